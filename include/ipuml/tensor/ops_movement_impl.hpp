// Data movement: views (reshape, permute, slice, expand) that share storage in eager mode and
// become ops when tracing, plus cat/split, indexing and embedding.
#pragma once

#include <numeric>

#include <ipuml/core/parallel.hpp>
#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

namespace ops_detail {

// Copies any strided eager tensor into a contiguous buffer.
inline void strided_copy(const Tensor& src, void* dst) {
  const Shape& shape = src.shape();
  const Strides& st = src.strides();
  const int64_t es = static_cast<int64_t>(dtype_size(src.dtype()));
  const int64_t n = src.numel();
  if (n == 0) return;
  const int64_t rank = src.dim();
  const int64_t inner = rank ? shape[rank - 1] : 1;
  const int64_t inner_stride = rank ? st[rank - 1] : 1;
  const int64_t rows = n / inner;
  const char* base = static_cast<const char*>(src.raw_data());
  char* out = static_cast<char*>(dst);
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   int64_t off = 0, rem = r;
                   for (int64_t d = rank - 2; d >= 0; --d) {
                     off += (rem % shape[d]) * st[d];
                     rem /= shape[d];
                   }
                   const char* s = base + off * es;
                   char* o = out + r * inner * es;
                   if (inner_stride == 1) {
                     std::memcpy(o, s, static_cast<size_t>(inner * es));
                   } else {
                     for (int64_t i = 0; i < inner; ++i)
                       std::memcpy(o + i * es, s + i * inner_stride * es, static_cast<size_t>(es));
                   }
                 }
               });
}

// A view of x with the same elements under another shape and strides (squeeze/unsqueeze of a
// strided tensor); its gradient is reshaped back.
inline Tensor strided_view_of(const Tensor& x, Shape shape, Strides strides) {
  Tensor out = make_view(x, std::move(shape), std::move(strides), x.offset());
  attach({out}, "ReshapeBackward", {x}, [s = x.shape()](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{reshape(g[0], s)};
  });
  return out;
}

inline Shape resolve_shape(const Shape& shape, int64_t n, const Shape& from) {
  Shape s = shape;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      IPUML_CHECK(infer < 0, "reshape: only one dimension can be -1, got ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      IPUML_CHECK(s[i] >= 0, "reshape: invalid size ", s[i], " in ", shape_str(shape));
      IPUML_CHECK(!__builtin_mul_overflow(known, s[i], &known), "reshape: shape ", shape_str(shape),
                  " has more than 2^63 elements (expected a shape whose ",
                  "element count fits in int64)");
    }
  }
  if (infer >= 0) {
    IPUML_CHECK(known > 0 && n % known == 0, "reshape: cannot reshape a tensor of shape ",
                shape_str(from), " (", n, " elements) into shape ", shape_str(shape));
    s[infer] = n / known;
  }
  return s;
}

}  // namespace ops_detail

namespace detail {
IPUML_INLINE Tensor copy_to_device(const Tensor& t, Device device) {
  Tensor out = empty_on(t.shape(), t.dtype(), device);
  if (device.is_meta()) return out;  // shapes only: nothing to copy
  IPUML_CHECK(!t.is_meta(), "to(", device, "): a tensor of shape ", shape_str(t.shape()),
              " on the meta device has no values to copy (it was made for sizing only)");
  if (t.is_contiguous())
    std::memcpy(out.raw_data(), t.raw_data(),
                static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  else
    ops_detail::strided_copy(t, out.raw_data());
  return out;
}
}  // namespace detail

IPUML_INLINE Tensor contiguous(const Tensor& x) {
  if (x.is_symbolic() || x.is_contiguous()) return x;
  Tensor out = detail::empty_on(x.shape(), x.dtype(), x.device());
  if (!x.is_meta()) strided_copy(x, out.raw_data());
  attach({out}, "CloneBackward", {x}, [](const std::vector<Tensor>& g) { return g; });
  return out;
}

IPUML_INLINE Tensor reshape(const Tensor& x, const Shape& shape_in) {
  const Shape shape = resolve_shape(shape_in, x.numel(), x.shape());
  IPUML_CHECK(numel(shape) == x.numel(), "reshape: cannot reshape a tensor of shape ",
              shape_str(x.shape()), " (", x.numel(), " elements) into shape ", shape_str(shape),
              " (", numel(shape), " elements)");
  if (shape == x.shape()) return x;
  Tensor out;
  if (ir::is_tracing()) {
    Attrs a;
    a.shape = shape;
    out = run1(OpKind::Reshape, a, {x});
    out.impl()->is_view = true;
  } else {
    Tensor c = x.is_contiguous() ? x : contiguous(x);
    out = make_view(c, shape, contiguous_strides(shape), c.offset());
    if (!x.is_contiguous()) out.impl()->is_view = false;  // a fresh copy, not an alias
  }
  attach({out}, "ReshapeBackward", {x}, [s = x.shape()](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{reshape(g[0], s)};
  });
  return out;
}

IPUML_INLINE Tensor permute(const Tensor& x, const std::vector<int64_t>& dims_in) {
  IPUML_CHECK(static_cast<int64_t>(dims_in.size()) == x.dim(), "permute: expected ", x.dim(),
              " dims for a tensor of shape ", shape_str(x.shape()), ", got ", detail::str(dims_in));
  auto dims = wrap_dims(dims_in, x.dim(), "permute");
  std::vector<bool> seen(dims.size(), false);
  for (auto d : dims) {
    IPUML_CHECK(!seen[d], "permute: dim ", d, " repeated in ", detail::str(dims_in));
    seen[d] = true;
  }
  Tensor out;
  if (ir::is_tracing()) {
    out = run1(OpKind::Permute, dims_attrs(dims), {x});
    out.impl()->is_view = true;
  } else {
    Shape s;
    Strides st;
    for (auto d : dims) {
      s.push_back(x.shape()[d]);
      st.push_back(x.strides()[d]);
    }
    out = make_view(x, s, st, x.offset());
  }
  std::vector<int64_t> inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inv[dims[i]] = static_cast<int64_t>(i);
  attach({out}, "PermuteBackward", {x},
         [inv](const std::vector<Tensor>& g) { return std::vector<Tensor>{permute(g[0], inv)}; });
  return out;
}

IPUML_INLINE Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  if (x.dim() < 2 && d0 == d1) return x;
  d0 = wrap_dim(d0, x.dim(), "transpose");
  d1 = wrap_dim(d1, x.dim(), "transpose");
  if (d0 == d1) return x;
  std::vector<int64_t> dims(static_cast<size_t>(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[d0], dims[d1]);
  return permute(x, dims);
}

IPUML_INLINE Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  IPUML_CHECK(x.dim() > 0, "slice: cannot slice a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "slice");
  IPUML_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t size = x.shape()[dim];
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  if (start == 0 && end == size && step == 1) return x;
  Tensor out;
  if (ir::is_tracing()) {
    Attrs a = dims_attrs({dim});
    a.start = start;
    a.end = end;
    a.step = step;
    out = run1(OpKind::Slice, a, {x});
    out.impl()->is_view = true;
  } else {
    Shape s = x.shape();
    Strides st = x.strides();
    s[dim] = (end - start + step - 1) / step;
    const int64_t off = x.offset() + start * st[dim];
    st[dim] *= step;
    out = make_view(x, s, st, off);
  }
  attach({out}, "SliceBackward", {x},
         [s = x.shape(), dim, start, end, step](const std::vector<Tensor>& g) {
           Attrs a = dims_attrs({dim});
           a.shape = s;
           Tensor index =
               arange(static_cast<double>(start), static_cast<double>(end),
                      static_cast<double>(step), TensorOptions(kInt64).device(g[0].device()));
           return std::vector<Tensor>{run1(OpKind::IndexAdd, a, {index, g[0]})};
         });
  return out;
}

IPUML_INLINE Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  dim = wrap_dim(dim, x.dim(), "narrow");
  const int64_t size = x.shape()[dim];
  if (start < 0) start += size;
  IPUML_CHECK(start >= 0 && length >= 0 && start + length <= size, "narrow: start ", start,
              " + length ", length, " exceeds dim ", dim, " of size ", size);
  return slice(x, dim, start, start + length, 1);
}

IPUML_INLINE Tensor expand(const Tensor& x, const Shape& shape_in) {
  Shape shape = shape_in;
  IPUML_CHECK(shape.size() >= x.shape().size(), "expand: cannot expand shape ",
              shape_str(x.shape()), " to fewer dims ", shape_str(shape_in));
  const size_t off = shape.size() - x.shape().size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == -1) {
      IPUML_CHECK(i >= off, "expand: -1 is not allowed for a new leading dim in ",
                  shape_str(shape_in));
      shape[i] = x.shape()[i - off];
    }
  if (shape == x.shape()) return x;
  Tensor out;
  if (ir::is_tracing()) {
    Attrs a;
    a.shape = shape;
    out = run1(OpKind::Expand, a, {x});
    out.impl()->is_view = true;
  } else {
    ir::infer(OpKind::Expand,
              [&] {
                Attrs a;
                a.shape = shape;
                return a;
              }(),
              {{x.shape(), x.dtype()}});
    Strides st(shape.size(), 0);
    for (size_t i = 0; i < x.shape().size(); ++i)
      st[off + i] = x.shape()[i] == 1 && shape[off + i] != 1 ? 0 : x.strides()[i];
    out = make_view(x, shape, st, x.offset());
  }
  attach({out}, "ExpandBackward", {x}, [s = x.shape()](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to(g[0], s)};
  });
  return out;
}

IPUML_INLINE Tensor squeeze(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return x;
  dim = wrap_dim(dim, x.dim(), "squeeze");
  if (x.shape()[dim] != 1) return x;
  Shape s = x.shape();
  s.erase(s.begin() + dim);
  if (ir::is_tracing() || x.is_contiguous()) return reshape(x, s);
  // A strided input stays a view (reshape would copy it), so writes through x[:, i] land.
  Strides st = x.strides();
  st.erase(st.begin() + dim);
  return ops_detail::strided_view_of(x, std::move(s), std::move(st));
}

IPUML_INLINE Tensor unsqueeze(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.shape();
  s.insert(s.begin() + dim, 1);
  if (ir::is_tracing() || x.is_contiguous()) return reshape(x, s);
  Strides st = x.strides();
  st.insert(st.begin() + dim, dim < x.dim() ? x.strides()[dim] * x.shape()[dim] : 1);
  return ops_detail::strided_view_of(x, std::move(s), std::move(st));
}

IPUML_INLINE Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  start_dim = wrap_dim(start_dim, x.dim(), "flatten");
  end_dim = wrap_dim(end_dim, x.dim(), "flatten");
  IPUML_CHECK(start_dim <= end_dim, "flatten: start_dim ", start_dim, " is after end_dim ",
              end_dim);
  Shape s(x.shape().begin(), x.shape().begin() + start_dim);
  int64_t m = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) m *= x.shape()[i];
  s.push_back(m);
  s.insert(s.end(), x.shape().begin() + end_dim + 1, x.shape().end());
  return reshape(x, s);
}

IPUML_INLINE Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  IPUML_CHECK(!xs.empty(), "cat: expected a non-empty list of tensors");
  dim = wrap_dim(dim, xs[0].dim(), "cat");
  if (xs.size() == 1) return xs[0];
  Tensor out = run1(OpKind::Cat, dims_attrs({dim}), xs);
  std::vector<int64_t> sizes;
  for (auto& x : xs) sizes.push_back(x.shape()[dim]);
  attach({out}, "CatBackward", xs, [sizes, dim](const std::vector<Tensor>& g) {
    std::vector<Tensor> r;
    int64_t at = 0;
    for (auto s : sizes) {
      r.push_back(slice(g[0], dim, at, at + s));
      at += s;
    }
    return r;
  });
  return out;
}

IPUML_INLINE Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  IPUML_CHECK(!xs.empty(), "stack: expected a non-empty list of tensors");
  dim = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  for (size_t i = 0; i < xs.size(); ++i) {
    IPUML_CHECK(xs[i].shape() == xs[0].shape(), "stack: tensor ", i, " has shape ",
                shape_str(xs[i].shape()), ", expected ", shape_str(xs[0].shape()));
    u.push_back(unsqueeze(xs[i], dim));
  }
  if (u.size() == 1) return u[0];
  return cat(u, dim);
}

IPUML_INLINE std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  IPUML_CHECK(split_size > 0, "split: split_size must be positive, got ", split_size);
  dim = wrap_dim(dim, x.dim(), "split");
  std::vector<Tensor> r;
  const int64_t n = x.shape()[dim];
  for (int64_t at = 0; at < n || (n == 0 && r.empty()); at += split_size)
    r.push_back(slice(x, dim, at, std::min(at + split_size, n)));
  return r;
}

IPUML_INLINE std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  IPUML_CHECK(chunks > 0, "chunk: chunks must be positive, got ", chunks);
  dim = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.shape()[dim];
  return split(x, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}

IPUML_INLINE Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, x.dim(), "index_select");
  Tensor out = run1(OpKind::IndexSelect, dims_attrs({dim}), {x, index});
  attach({out}, "IndexSelectBackward", {x},
         [s = x.shape(), dim, idx = saved(index)](const std::vector<Tensor>& g) {
           Attrs a = dims_attrs({dim});
           a.shape = s;
           return std::vector<Tensor>{run1(OpKind::IndexAdd, a, {idx, g[0]})};
         });
  return out;
}

IPUML_INLINE Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = wrap_dim(dim, x.dim(), "gather");
  Tensor out = run1(OpKind::Gather, dims_attrs({dim}), {x, index});
  attach({out}, "GatherBackward", {x},
         [s = x.shape(), dim, idx = saved(index)](const std::vector<Tensor>& g) {
           Attrs a = dims_attrs({dim});
           a.shape = s;
           return std::vector<Tensor>{run1(OpKind::ScatterAdd, a, {idx, g[0]})};
         });
  return out;
}

IPUML_INLINE Tensor embedding(const Tensor& weight, const Tensor& indices) {
  IPUML_CHECK(weight.dim() == 2, "embedding: weight must be 2-d [num_embeddings, dim], got ",
              shape_str(weight.shape()));
  IPUML_CHECK(is_integral(indices.dtype()), "embedding: indices must be int64 or int32, got ",
              dtype_name(indices.dtype()));
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.shape()[1]);
  return reshape(index_select(weight, 0, reshape(indices, {-1})), out_shape);
}

}  // namespace ipuml
