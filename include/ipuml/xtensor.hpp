// Zero-copy views between ipuml::Tensor and xtensor containers, for research code that keeps its
// data in xtensor (the only ipuml header that includes xtensor; nothing else depends on it).
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include <ipuml/tensor/ops.hpp>

namespace ipuml {

namespace xtensor_detail {

template <class C>
Tensor view_of(C& c, std::shared_ptr<void> owner) {
  using value_type = typename C::value_type;
  static_assert(std::is_same_v<value_type, float>,
                "ipuml::from_xtensor: only float containers can be viewed (a Tensor view must "
                "share the bytes); convert with xt::cast<float> first");
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = kFloat32;
  int64_t span = 1;  // elements from the first to one past the last reachable one
  for (size_t d = 0; d < c.dimension(); ++d) {
    const auto n = static_cast<int64_t>(c.shape()[d]);
    // xtensor gives size-1 dims stride 0; the Tensor keeps them as they are (never stepped).
    const auto s = static_cast<int64_t>(c.strides()[d]);
    impl->shape.push_back(n);
    impl->strides.push_back(s);
    if (n == 0) span = 0;
    if (span > 0) span += (n - 1) * s;
  }
  impl->storage = std::make_shared<Storage>(
      static_cast<void*>(c.data()), static_cast<size_t>(span) * sizeof(float), std::move(owner));
  return Tensor(std::move(impl));
}

}  // namespace xtensor_detail

// A float32 Tensor over the container's own memory: writes through either side are seen by the
// other. The container must outlive the tensor and every view of it, and must not be resized
// (which reallocates). Row- and column-major containers both work (the strides are kept).
template <class EC, xt::layout_type L, class SC, class Tag>
Tensor from_xtensor(xt::xarray_container<EC, L, SC, Tag>& a) {
  return xtensor_detail::view_of(a, nullptr);
}
template <class EC, std::size_t N, xt::layout_type L, class Tag>
Tensor from_xtensor(xt::xtensor_container<EC, N, L, Tag>& a) {
  return xtensor_detail::view_of(a, nullptr);
}
// The owning form: the container is moved into the tensor's storage and lives as long as it.
template <class EC, xt::layout_type L, class SC, class Tag>
Tensor from_xtensor(xt::xarray_container<EC, L, SC, Tag>&& a) {
  auto owned = std::make_shared<xt::xarray_container<EC, L, SC, Tag>>(std::move(a));
  return xtensor_detail::view_of(*owned, owned);
}
template <class EC, std::size_t N, xt::layout_type L, class Tag>
Tensor from_xtensor(xt::xtensor_container<EC, N, L, Tag>&& a) {
  auto owned = std::make_shared<xt::xtensor_container<EC, N, L, Tag>>(std::move(a));
  return xtensor_detail::view_of(*owned, owned);
}

// An xtensor expression (xt::xarray_adaptor, row-major) over a float32 tensor's memory: writes
// through it change the tensor. It keeps the tensor's storage alive. The tensor must be
// contiguous (strided views are refused rather than copied silently: call .contiguous(), which
// copies, when a copy is what you want) and hold data (not a traced, symbolic tensor).
inline auto to_xtensor(const Tensor& t) {
  IPUML_CHECK(t.defined(), "to_xtensor: the tensor is undefined");
  IPUML_CHECK(!t.is_symbolic(), "to_xtensor: the tensor is symbolic (recorded while tracing) and ",
              "holds no data");
  IPUML_CHECK(t.dtype() == kFloat32, "to_xtensor: expected a float32 tensor, got ",
              dtype_name(t.dtype()), " (convert with .to(ipuml::kFloat32), which copies)");
  IPUML_CHECK(t.is_contiguous(), "to_xtensor: expected a contiguous tensor, got shape ",
              shape_str(t.shape()), " with strides ", shape_str(t.strides()),
              " (call .contiguous(), which copies)");
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  std::shared_ptr<Storage> keep = t.impl()->storage;
  return xt::adapt_smart_ptr(t.data_ptr<float>(), shape, std::move(keep));
}

}  // namespace ipuml
