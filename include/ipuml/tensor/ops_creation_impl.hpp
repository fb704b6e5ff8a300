// Creation ops: constants, ranges and counter-based random tensors.
#pragma once

#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

using ops_detail::Attrs;
using ops_detail::OpKind;

IPUML_INLINE Tensor full(const Shape& shape, double value, DType dtype) {
  Attrs a;
  a.shape = shape;
  a.scalar = value;
  a.dtype = dtype;
  return ops_detail::run1(OpKind::Full, a, {});
}
IPUML_INLINE Tensor zeros(const Shape& shape, DType dtype) { return full(shape, 0.0, dtype); }
IPUML_INLINE Tensor ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }
IPUML_INLINE Tensor scalar_tensor(double value, DType dtype) { return full({}, value, dtype); }
IPUML_INLINE Tensor zeros_like(const Tensor& t) { return full_like(t, 0.0); }
IPUML_INLINE Tensor ones_like(const Tensor& t) { return full_like(t, 1.0); }
IPUML_INLINE Tensor full_like(const Tensor& t, double v) {
  return full(t.shape(), v, TensorOptions(t.dtype()).device(t.device()));
}

namespace ops_detail {
// A factory's result (`make()`) on the options' device, with requires_grad set: made on the
// meta device directly (nothing allocated), otherwise made on the CPU and moved.
template <typename Make>
Tensor with_options(const TensorOptions& o, Make make) {
  Tensor t;
  {
    DefaultDeviceGuard made_on(o.device().is_meta() ? o.device() : Device());
    t = make();
  }
  if (!t.is_symbolic() && o.device() != t.device()) t = detail::copy_to_device(t, o.device());
  if (o.requires_grad()) t.requires_grad_(true);
  return t;
}
}  // namespace ops_detail

IPUML_INLINE Tensor zeros(const Shape& shape, const TensorOptions& o) {
  return full(shape, 0.0, o);
}
IPUML_INLINE Tensor ones(const Shape& shape, const TensorOptions& o) { return full(shape, 1.0, o); }
IPUML_INLINE Tensor full(const Shape& shape, double value, const TensorOptions& o) {
  return ops_detail::with_options(o, [&] { return full(shape, value, o.dtype()); });
}
IPUML_INLINE Tensor arange(int64_t end, const TensorOptions& o) {
  return ops_detail::with_options(o, [&] { return arange(end, o.dtype_or(kInt64)); });
}
IPUML_INLINE Tensor arange(double start, double end, const TensorOptions& o) {
  return arange(start, end, 1.0, o);
}
IPUML_INLINE Tensor arange(double start, double end, double step, const TensorOptions& o) {
  return ops_detail::with_options(o, [&] { return arange(start, end, step, o.dtype()); });
}

IPUML_INLINE Tensor arange(int64_t end, DType dtype) {
  IPUML_CHECK(end >= 0, "arange: end must be non-negative, got ", end);
  return arange(0.0, static_cast<double>(end), 1.0, dtype);
}

IPUML_INLINE Tensor arange(double start, double end, double step, DType dtype) {
  IPUML_CHECK(step != 0, "arange: step must be non-zero");
  IPUML_CHECK((end - start) / step >= 0, "arange: range [", start, ", ", end, ") with step ", step,
              " is empty in the wrong direction");
  Attrs a;
  a.shape = {static_cast<int64_t>(std::ceil((end - start) / step))};
  a.scalar = start;
  a.scalar2 = step;
  a.dtype = dtype;
  return ops_detail::run1(OpKind::Arange, a, {});
}

namespace ops_detail {
inline Tensor random(OpKind k, const Shape& shape, double p0, double p1, DType dtype,
                     Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  RandomStream s = g.next();
  Attrs a;
  a.shape = shape;
  a.scalar = p0;
  a.scalar2 = p1;
  a.start = static_cast<int64_t>(p0);
  a.end = static_cast<int64_t>(p1);
  a.dtype = dtype;
  a.seed = s.seed;
  a.stream = s.stream;
  return run1(k, a, {});
}
}  // namespace ops_detail

IPUML_INLINE Tensor rand(const Shape& shape, Generator* gen) {
  return ops_detail::random(OpKind::RandUniform, shape, 0.0, 1.0, kFloat32, gen);
}
IPUML_INLINE Tensor uniform(const Shape& shape, double low, double high, Generator* gen) {
  IPUML_CHECK(low <= high, "uniform: low ", low, " exceeds high ", high);
  return ops_detail::random(OpKind::RandUniform, shape, low, high, kFloat32, gen);
}
IPUML_INLINE Tensor randn(const Shape& shape, Generator* gen) {
  return ops_detail::random(OpKind::RandNormal, shape, 0.0, 1.0, kFloat32, gen);
}
IPUML_INLINE Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator* gen) {
  IPUML_CHECK(high > low, "randint: expected low < high, got [", low, ", ", high, ")");
  return ops_detail::random(OpKind::RandInt, shape, static_cast<double>(low),
                            static_cast<double>(high), kInt64, gen);
}

IPUML_INLINE Tensor rand(const Shape& shape, const TensorOptions& o, Generator* gen) {
  return ops_detail::with_options(
      o, [&] { return ops_detail::random(OpKind::RandUniform, shape, 0.0, 1.0, o.dtype(), gen); });
}
IPUML_INLINE Tensor randn(const Shape& shape, const TensorOptions& o, Generator* gen) {
  return ops_detail::with_options(
      o, [&] { return ops_detail::random(OpKind::RandNormal, shape, 0.0, 1.0, o.dtype(), gen); });
}
IPUML_INLINE Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& o,
                            Generator* gen) {
  IPUML_CHECK(high > low, "randint: expected low < high, got [", low, ", ", high, ")");
  return ops_detail::with_options(o, [&] {
    return ops_detail::random(OpKind::RandInt, shape, static_cast<double>(low),
                              static_cast<double>(high), o.dtype_or(kInt64), gen);
  });
}

IPUML_INLINE Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                                DType storage) {
  return from_vector(values, shape).to(storage);
}

}  // namespace ipuml
