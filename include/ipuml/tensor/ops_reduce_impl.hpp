// Reductions (sum, mean, extremes, arg-extremes, variance) and their backward formulas.
#pragma once

#include <algorithm>
#include <limits>

#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

namespace ops_detail {

// The shape a reduction over `dims` keeps when keepdim=true.
inline Shape keepdim_shape(const Shape& s, const std::vector<int64_t>& dims) {
  Shape out = s;
  if (dims.empty()) {
    std::fill(out.begin(), out.end(), 1);
  } else {
    for (auto d : dims) out[d] = 1;
  }
  return out;
}

// Broadcasts a reduced gradient back over the reduced dims.
inline Tensor expand_back(const Tensor& g, const Shape& in_shape,
                          const std::vector<int64_t>& dims) {
  return expand(reshape(g, keepdim_shape(in_shape, dims)), in_shape);
}

inline int64_t reduced_count(const Shape& s, const std::vector<int64_t>& dims) {
  if (dims.empty()) return numel(s);
  int64_t n = 1;
  for (auto d : dims) n *= s[d];
  return n;
}

}  // namespace ops_detail

IPUML_INLINE Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  dims = wrap_dims(std::move(dims), x.dim(), "sum");
  Tensor out = run1(OpKind::Sum, dims_attrs(dims, keepdim), {x});
  attach({out}, "SumBackward", {x}, [s = x.shape(), dims](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{expand_back(g[0], s, dims)};
  });
  return out;
}

namespace ops_detail {
// The sum of a 16-bit x accumulated and returned in float32 (torch.sum(x, dtype=float32)): the
// Sum op with its flag set. Its gradient is rounded to x's type before it is broadcast back.
inline Tensor sum_f32(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Attrs a = dims_attrs(dims, keepdim);
  a.flag = true;
  Tensor out = run1(OpKind::Sum, a, {x});
  attach({out}, "SumBackward", {x},
         [s = x.shape(), dims, dt = x.dtype()](const std::vector<Tensor>& g) {
           return std::vector<Tensor>{expand_back(cast(g[0], dt), s, dims)};
         });
  return out;
}
}  // namespace ops_detail

IPUML_INLINE Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  dims = wrap_dims(std::move(dims), x.dim(), "mean");
  const int64_t n = reduced_count(x.shape(), dims);
  const double scale =
      n > 0 ? 1.0 / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
  // A 16-bit mean sums and divides in float32, as PyTorch's does: the sum of a batch norm's
  // 225 000 activations a channel is far past fp16's 65504 even where their mean is not.
  if (is_half(x.dtype())) return cast(mul(sum_f32(x, dims, keepdim), scale), x.dtype());
  return mul(sum(x, dims, keepdim), scale);
}

namespace ops_detail {
inline Tensor extreme(OpKind k, const char* name, const Tensor& x, std::vector<int64_t> dims,
                      bool keepdim) {
  dims = wrap_dims(std::move(dims), x.dim(), name);
  Tensor out = run1(k, dims_attrs(dims, keepdim), {x});
  attach({out}, name, {x}, [x = saved(x), o = saved(out), dims](const std::vector<Tensor>& g) {
    // Ties share the gradient evenly (PyTorch's amax/amin rule).
    Tensor mask = cast(eq(x, expand_back(o, x.shape(), dims)), x.dtype());
    Tensor count = sum(mask, dims, true);
    return std::vector<Tensor>{div(mul(expand_back(g[0], x.shape(), dims), mask), count)};
  });
  return out;
}

inline std::pair<Tensor, Tensor> extreme_dim(OpKind k, const char* name, const Tensor& x,
                                             int64_t dim, bool keepdim) {
  dim = wrap_dim(dim, x.dim(), name);
  auto outs = detail::dispatch(k, dims_attrs({dim}, keepdim), {x});
  attach({outs[0]}, name, {x}, [idx = outs[1], s = x.shape(), dim](const std::vector<Tensor>& g) {
    const Shape ks = keepdim_shape(s, {dim});
    Attrs a = dims_attrs({dim});
    a.shape = s;
    return std::vector<Tensor>{run1(OpKind::ScatterAdd, a, {reshape(idx, ks), reshape(g[0], ks)})};
  });
  return {outs[0], outs[1]};
}
}  // namespace ops_detail

IPUML_INLINE Tensor amax(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return extreme(OpKind::Amax, "AmaxBackward", x, std::move(dims), keepdim);
}
IPUML_INLINE Tensor amin(const Tensor& x, std::vector<int64_t> dims, bool keepdim) {
  return extreme(OpKind::Amin, "AminBackward", x, std::move(dims), keepdim);
}
IPUML_INLINE std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(OpKind::MaxDim, "MaxBackward", x, dim, keepdim);
}
IPUML_INLINE std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_dim(OpKind::MinDim, "MinBackward", x, dim, keepdim);
}

IPUML_INLINE Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  std::vector<int64_t> dims;
  if (dim) dims.push_back(wrap_dim(*dim, x.dim(), "argmax"));
  return run1(OpKind::ArgMax, dims_attrs(dims, keepdim), {x});
}
IPUML_INLINE Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  std::vector<int64_t> dims;
  if (dim) dims.push_back(wrap_dim(*dim, x.dim(), "argmin"));
  return run1(OpKind::ArgMin, dims_attrs(dims, keepdim), {x});
}

IPUML_INLINE Tensor var(const Tensor& x, std::vector<int64_t> dims, int64_t correction,
                        bool keepdim) {
  dims = wrap_dims(std::move(dims), x.dim(), "var");
  const int64_t n = reduced_count(x.shape(), dims);
  Tensor d = sub(x, mean(x, dims, true));
  const double denom = static_cast<double>(n - correction);
  const double scale = denom > 0 ? 1.0 / denom : std::numeric_limits<double>::quiet_NaN();
  // 16-bit deviations squared are summed and scaled in float32 (as mean).
  if (is_half(x.dtype())) return cast(mul(sum_f32(mul(d, d), dims, keepdim), scale), x.dtype());
  return mul(sum(mul(d, d), dims, keepdim), scale);
}

IPUML_INLINE Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  IPUML_CHECK(lead >= 0, "sum_to: cannot reduce shape ", shape_str(x.shape()), " to ",
              shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
  Tensor r = dims.empty() ? x : sum(x, dims, true);
  return reshape(r, shape);
}

}  // namespace ipuml
