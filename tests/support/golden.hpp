// Test support: reading tensors from the PyTorch-generated golden JSON files and comparing them.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/ipuml.hpp>

namespace ipuml::testing {

inline nlohmann::json load_golden(const std::string& name) {
  std::ifstream in(std::string(IPUML_SOURCE_DIR) + "/tests/golden/" + name);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

inline Tensor tensor_from_json(const nlohmann::json& j) {
  Shape shape = j.at("shape").get<Shape>();
  const std::string dt = j.at("dtype");
  if (dt == "float32") return from_vector(j.at("data").get<std::vector<float>>(), shape);
  if (dt == "int64") return from_vector(j.at("data").get<std::vector<int64_t>>(), shape);
  if (dt == "bool") return from_vector(j.at("data").get<std::vector<bool>>(), shape);
  FAIL("unknown dtype " << dt);
  return {};
}

// The golden scripts' deterministic weights (gen_nn.py, gen_fc_mnist.py, gen_unet.py compute
// the same): parameter k, element i = sin(0.37 i + 1.3 k) / sqrt(fan_in), fan_in the elements
// of a row (or the length of a vector), rounded to float32.
inline Tensor formula_weights(int k, const Shape& shape) {
  const int64_t n = numel(shape);
  const int64_t fan_in = shape.size() > 1 ? n / shape[0] : shape[0];
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = static_cast<float>(
        std::sin(0.37 * static_cast<double>(i) + 1.3 * k) / std::sqrt(static_cast<double>(fan_in)));
  return from_vector(v, shape);
}

// Element-wise |a - b| <= atol + rtol * |b|, with a message naming the worst element.
inline void require_close(const Tensor& actual, const nlohmann::json& expected, double atol,
                          double rtol, const std::string& what) {
  INFO(what);
  REQUIRE(actual.defined());
  REQUIRE(actual.shape() == expected.at("shape").get<Shape>());
  auto a = actual.to_vector<double>();
  auto e = expected.at("data");
  REQUIRE(a.size() == e.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double ev = e[i].is_boolean() ? (e[i].get<bool>() ? 1.0 : 0.0) : e[i].get<double>();
    if (std::abs(a[i] - ev) > atol + rtol * std::abs(ev)) {
      FAIL(what << ": element " << i << " is " << a[i] << ", expected " << ev);
    }
  }
}

}  // namespace ipuml::testing
