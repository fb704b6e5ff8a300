// Bodies of Tensor::index and Tensor::index_put_ (compiled once in compiled mode).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/tensor/indexing.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml {

namespace indexing::detail {

// The basic indices applied as views; the one tensor index (if any) left for the caller, with
// the dimension of `view` where it starts and how many dimensions it covers.
struct Resolved {
  Tensor view;
  const TensorIndex* advanced = nullptr;
  int64_t dim = 0;         // in `view`
  int64_t source_dim = 0;  // in the indexed tensor (for messages)
  int64_t covers = 0;
};

inline int64_t dims_consumed(const TensorIndex& i) {
  switch (i.kind()) {
    case TensorIndex::Kind::Integer:
    case TensorIndex::Kind::Slice:
      return 1;
    case TensorIndex::Kind::Tensor:
      return i.tensor().dtype() == kBool ? i.tensor().dim() : 1;
    default:
      return 0;
  }
}

inline Resolved resolve(const Tensor& self, const std::vector<TensorIndex>& indices,
                        const char* op) {
  const int64_t rank = self.dim();
  int64_t consumed = 0, ellipses = 0;
  for (const auto& i : indices) {
    consumed += dims_consumed(i);
    if (i.is_ellipsis()) ++ellipses;
    if (i.is_tensor()) {
      const DType t = i.tensor().dtype();
      IPUML_CHECK(t == kBool || t == kInt64 || t == kInt32, op,
                  ": tensors used as indices must be int64, int32 or bool, got ", dtype_name(t));
    }
  }
  IPUML_CHECK(ellipses <= 1, op, ": an index can only have a single ellipsis ('...'), got ",
              ellipses);
  IPUML_CHECK(consumed <= rank, op, ": too many indices for a tensor of dimension ", rank,
              " (shape ", shape_str(self.shape()), "): the indices consume ", consumed);
  Resolved r;
  r.view = self;
  int64_t d = 0, src = 0;  // the next dim of the view, and of self
  for (const auto& i : indices) {
    switch (i.kind()) {
      case TensorIndex::Kind::Integer: {
        const int64_t n = r.view.size(d);
        const int64_t k = i.integer();
        IPUML_CHECK(k >= -n && k < n, op, ": index ", k, " is out of bounds for dimension ", src,
                    " with size ", n, " (tensor of shape ", shape_str(self.shape()), ")");
        r.view = r.view.select(d, k);
        ++src;
        break;
      }
      case TensorIndex::Kind::Slice: {
        const Slice& s = i.slice();
        r.view = ipuml::slice(r.view, d, s.start().value_or(0),
                              s.stop().value_or(std::numeric_limits<int64_t>::max()), s.step());
        ++d;
        ++src;
        break;
      }
      case TensorIndex::Kind::None:
        r.view = r.view.unsqueeze(d++);
        break;
      case TensorIndex::Kind::Boolean:
        r.view = r.view.unsqueeze(d);
        if (!i.boolean()) r.view = ipuml::slice(r.view, d, 0, 0);
        ++d;
        break;
      case TensorIndex::Kind::Ellipsis:
        d += rank - consumed;
        src += rank - consumed;
        break;
      case TensorIndex::Kind::Tensor:
        IPUML_CHECK(r.advanced == nullptr, op,
                    ": only one tensor (integer or boolean) index per call is supported; index "
                    "again for the next one");
        r.advanced = &i;
        r.dim = d;
        r.source_dim = src;
        r.covers = dims_consumed(i);
        d += r.covers;
        src += r.covers;
        break;
    }
  }
  return r;
}

// Positions picked by an integer index tensor along a dimension of size n (negatives wrapped).
inline std::vector<int64_t> positions(const Tensor& index, int64_t n, int64_t dim, const char* op) {
  std::vector<int64_t> p = index.to_vector<int64_t>();
  for (auto& k : p) {
    IPUML_CHECK(k >= -n && k < n, op, ": index ", k, " is out of bounds for dimension ", dim,
                " with size ", n);
    if (k < 0) k += n;
  }
  return p;
}

// Flat positions of the true elements of `mask`, which must match view's dims [dim, dim + m).
inline std::vector<int64_t> mask_positions(const Tensor& view, const Tensor& mask, int64_t dim,
                                           const char* op) {
  for (int64_t j = 0; j < mask.dim(); ++j)
    IPUML_CHECK(mask.size(j) == view.size(dim + j), op, ": the mask of shape ",
                shape_str(mask.shape()), " does not match the indexed tensor's shape ",
                shape_str(view.shape()), " at dimension ", dim + j, " (", mask.size(j), " vs ",
                view.size(dim + j), ")");
  std::vector<int64_t> out;
  const auto bits = mask.to_vector<int64_t>();
  for (size_t k = 0; k < bits.size(); ++k)
    if (bits[k]) out.push_back(static_cast<int64_t>(k));
  return out;
}

inline Shape replace_dims(const Shape& s, int64_t dim, int64_t covers, const Shape& with) {
  Shape out(s.begin(), s.begin() + dim);
  out.insert(out.end(), with.begin(), with.end());
  out.insert(out.end(), s.begin() + dim + covers, s.end());
  return out;
}

inline Tensor& put(Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& value) {
  const char* op = "index_put_";
  IPUML_CHECK(!self.is_symbolic(), op, ": not supported while tracing a graph");
  IPUML_CHECK(!(autograd::is_grad_enabled() && self.requires_grad()), op,
              ": the tensor requires grad, and writes into it are not recorded by autograd; wrap "
              "the write in ipuml::NoGradGuard");
  Resolved r = resolve(self, indices, op);
  if (!r.advanced) {
    r.view.copy_(value);
    return self;
  }
  const Tensor& idx = r.advanced->tensor();
  const bool is_mask = idx.dtype() == kBool;
  std::vector<int64_t> pos;
  if (is_mask) {
    pos = mask_positions(r.view, idx, r.dim, op);
    // A scalar through a mask: one pass (where) instead of one copy per selected element.
    if (value.numel() == 1) {
      Shape ms(static_cast<size_t>(r.view.dim()), 1);
      for (int64_t j = 0; j < idx.dim(); ++j) ms[static_cast<size_t>(r.dim + j)] = idx.size(j);
      Tensor filled = ipuml::where(idx.reshape(ms), value.reshape({}).to(r.view.dtype()), r.view);
      r.view.copy_(filled);
      return self;
    }
  } else {
    pos = positions(idx, r.view.size(r.dim), r.source_dim, op);
  }
  // The value broadcasts to the shape index() would return for these indices.
  const int64_t count = static_cast<int64_t>(pos.size());
  Shape picked_shape = is_mask ? Shape{count} : idx.shape();
  Shape target = replace_dims(r.view.shape(), r.dim, r.covers, picked_shape);
  Tensor v = value.to(r.view.dtype())
                 .expand(target)
                 .reshape(replace_dims(r.view.shape(), r.dim, r.covers, {count}));
  for (int64_t k = 0; k < count; ++k) {
    Tensor dst = r.view;
    if (is_mask) {
      int64_t rem = pos[static_cast<size_t>(k)];
      std::vector<int64_t> coord(static_cast<size_t>(r.covers));
      for (int64_t j = r.covers; j-- > 0;) {
        coord[static_cast<size_t>(j)] = rem % idx.size(j);
        rem /= idx.size(j);
      }
      for (int64_t c : coord) dst = dst.select(r.dim, c);
    } else {
      dst = dst.select(r.dim, pos[static_cast<size_t>(k)]);
    }
    dst.copy_(v.select(r.dim, k));
  }
  return self;
}

}  // namespace indexing::detail

IPUML_INLINE Tensor Tensor::index(const std::vector<indexing::TensorIndex>& indices) const {
  using namespace indexing::detail;
  Resolved r = resolve(*this, indices, "index");
  if (!r.advanced) return r.view;
  const Tensor& idx = r.advanced->tensor();
  if (idx.dtype() == kBool) {
    Tensor flat = r.view;
    if (idx.dim() == 0)
      flat = flat.unsqueeze(r.dim);
    else if (idx.dim() > 1)
      flat = flat.flatten(r.dim, r.dim + idx.dim() - 1);
    const auto pos = mask_positions(r.view, idx, r.dim, "index");
    const int64_t count = static_cast<int64_t>(pos.size());
    return ipuml::index_select(flat, r.dim, from_vector<int64_t>(pos, {count}));
  }
  const auto pos = positions(idx, r.view.size(r.dim), r.source_dim, "index");
  Tensor picked = ipuml::index_select(
      r.view, r.dim, from_vector<int64_t>(pos, {static_cast<int64_t>(pos.size())}));
  return picked.reshape(replace_dims(r.view.shape(), r.dim, 1, idx.shape()));
}
IPUML_INLINE Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> indices) const {
  return index(std::vector<indexing::TensorIndex>(indices));
}

IPUML_INLINE Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices,
                                        const Tensor& value) {
  return indexing::detail::put(*this, indices, value);
}
IPUML_INLINE Tensor& Tensor::index_put_(const std::vector<indexing::TensorIndex>& indices,
                                        double value) {
  return indexing::detail::put(*this, indices, scalar_tensor(value, dtype()));
}
IPUML_INLINE Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices,
                                        const Tensor& value) {
  return index_put_(std::vector<indexing::TensorIndex>(indices), value);
}
IPUML_INLINE Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> indices,
                                        double value) {
  return index_put_(std::vector<indexing::TensorIndex>(indices), scalar_tensor(value, dtype()));
}

}  // namespace ipuml
