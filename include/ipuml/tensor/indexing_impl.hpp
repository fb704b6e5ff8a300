// Bodies of Tensor::index and Tensor::index_put_ (compiled once in compiled mode).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/autograd/node.hpp>
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

// Writes `value` into self at `indices`, as ops autograd does not see (the caller decides what
// is recorded). `value` must not share memory with self.
inline void write(Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& value,
                  const char* op) {
  Resolved r = resolve(self, indices, op);
  if (!r.advanced) {
    r.view.copy_(value);
    return;
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
      return;
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
}

// How many tensors other than self and value hold self's memory: views of it, and the copies
// earlier ops saved for their backward. A recorded write would change what those see without
// autograd knowing.
inline long other_holders(const Tensor& self, const Tensor& value) {
  const auto& storage = self.impl()->storage;
  long n = storage.use_count() - 1;
  if (value.impl() != self.impl() && value.impl()->storage == storage) --n;
  return n;
}

// The tensor indices of `indices` copied, so that a backward recorded now reads the positions of
// this write even if the caller changes its index tensors later.
inline std::vector<TensorIndex> saved_indices(const std::vector<TensorIndex>& indices) {
  std::vector<TensorIndex> out;
  out.reserve(indices.size());
  for (const auto& i : indices)
    out.push_back(i.is_tensor() ? TensorIndex(i.tensor().detach().clone()) : i);
  return out;
}

inline Tensor& put(Tensor& self, const std::vector<TensorIndex>& indices, const Tensor& value_in) {
  const char* op = "index_put_";
  IPUML_CHECK(!self.is_symbolic(), op, ": not supported while tracing a graph");
  IPUML_CHECK(value_in.defined(), op, ": the value is an undefined tensor");
  const bool grad_mode = autograd::is_grad_enabled();
  IPUML_CHECK(!(grad_mode && self.requires_grad() && self.is_leaf()), op,
              ": a leaf Variable that requires grad is being used in an in-place operation (as "
              "PyTorch says); write into a copy (x.clone()) or under ipuml::NoGradGuard");
  // Recorded as PyTorch records it: self's new history is IndexPutBackward over its old one and
  // the value, so gradients reach both.
  const bool record =
      grad_mode && is_floating(self.dtype()) && (self.requires_grad() || value_in.requires_grad());
  if (record) {
    const long holders = other_holders(self, value_in);
    IPUML_CHECK(holders == 0, op, ": the tensor's memory is shared with ", holders,
                " other tensor(s) (views of it, or values an earlier op saved for its backward), "
                "which this write would change without autograd knowing; write into a copy "
                "(x.clone()) instead");
  }
  // A value that views self is read before the write starts.
  const bool aliased = !value_in.is_symbolic() && value_in.impl()->storage == self.impl()->storage;
  Tensor history;
  if (record) {
    history = self.detach();
    history.impl()->requires_grad = self.requires_grad();
    history.impl()->grad_fn = self.impl()->grad_fn;
    history.impl()->output_nr = self.impl()->output_nr;
  }
  {
    NoGradGuard no_grad;
    write(self, indices, aliased ? value_in.clone() : value_in, op);
  }
  if (!record) return self;
  autograd::attach(
      {self}, "IndexPutBackward", {history, value_in},
      [idx = saved_indices(indices), need_self = history.requires_grad(),
       need_value = value_in.requires_grad(), value_shape = value_in.shape(),
       value_dtype = value_in.dtype()](const std::vector<Tensor>& g) {
        Tensor g_self, g_value;
        if (need_self) {  // what was overwritten gets nothing
          g_self = g[0].clone();
          write(g_self, idx, scalar_tensor(0.0, g_self.dtype()), "IndexPutBackward");
        }
        if (need_value) {  // each written position's gradient, summed over broadcasting
          g_value = sum_to(g[0].index(idx), value_shape);
          if (g_value.dtype() != value_dtype) g_value = cast(g_value, value_dtype);
        }
        return std::vector<Tensor>{g_self, g_value};
      });
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
