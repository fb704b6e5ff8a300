// LibTorch's torch::tensor literal factory as ipuml::tensor: `tensor({1.f, 2.f})`,
// `tensor({{1, 2}, {3, 4}})`, `tensor(3.5)`. Integers give int64, floating values float32, bools
// bool.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <vector>

#include <ipuml/tensor/ops.hpp>

namespace ipuml {

namespace literal_detail {

template <typename T>
concept Element = std::is_arithmetic_v<T>;

template <Element T>
constexpr DType dtype_for() {
  if constexpr (std::is_same_v<T, bool>)
    return kBool;
  else if constexpr (std::is_integral_v<T>)
    return kInt64;
  else
    return kFloat32;
}

template <Element T>
Tensor make(const std::vector<T>& values, const Shape& shape, std::optional<DType> dtype) {
  const DType natural = dtype_for<T>();
  Tensor t;
  if constexpr (std::is_same_v<T, bool>) {
    t = from_vector<bool>(values, shape);
  } else if constexpr (std::is_integral_v<T>) {
    t = from_vector<int64_t>(std::vector<int64_t>(values.begin(), values.end()), shape);
  } else {
    t = from_vector<float>(std::vector<float>(values.begin(), values.end()), shape);
  }
  return dtype && *dtype != natural ? t.to(*dtype) : t;
}

}  // namespace literal_detail

// A 0-d tensor.
template <literal_detail::Element T>
Tensor tensor(T value, std::optional<DType> dtype = std::nullopt) {
  return literal_detail::make<T>({value}, {}, dtype);
}
// A 1-d tensor.
template <literal_detail::Element T>
Tensor tensor(std::initializer_list<T> values, std::optional<DType> dtype = std::nullopt) {
  const std::vector<T> v(values);
  return literal_detail::make<T>(v, {static_cast<int64_t>(v.size())}, dtype);
}
template <literal_detail::Element T>
Tensor tensor(const std::vector<T>& values, std::optional<DType> dtype = std::nullopt) {
  return literal_detail::make<T>(values, {static_cast<int64_t>(values.size())}, dtype);
}
// A 2-d tensor from rows, which must have equal lengths.
template <literal_detail::Element T>
Tensor tensor(std::initializer_list<std::initializer_list<T>> rows,
              std::optional<DType> dtype = std::nullopt) {
  std::vector<T> v;
  const size_t cols = rows.size() ? rows.begin()->size() : 0;
  for (const auto& r : rows) {
    IPUML_CHECK(r.size() == cols, "tensor: rows of a nested list must have equal lengths, got ",
                cols, " and ", r.size());
    v.insert(v.end(), r.begin(), r.end());
  }
  return literal_detail::make<T>(v, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)},
                                 dtype);
}

}  // namespace ipuml
