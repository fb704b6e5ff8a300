// nn::init: PyTorch's in-place parameter initialisers (uniform_, kaiming_uniform_,
// xavier_normal_...). They draw from the default generator (or `gen`), so ipuml::manual_seed makes
// model init reproducible.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml::nn::init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Conv1D, Conv2D, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };

// torch.nn.init.calculate_gain; `param` is the negative slope of LeakyReLU (0.01 when absent).
inline double calculate_gain(Nonlinearity n, std::optional<double> param = std::nullopt) {
  switch (n) {
    case Nonlinearity::Linear:
    case Nonlinearity::Conv1D:
    case Nonlinearity::Conv2D:
    case Nonlinearity::Sigmoid:
      return 1.0;
    case Nonlinearity::Tanh:
      return 5.0 / 3.0;
    case Nonlinearity::ReLU:
      return std::sqrt(2.0);
    case Nonlinearity::LeakyReLU: {
      const double slope = param.value_or(0.01);
      return std::sqrt(2.0 / (1.0 + slope * slope));
    }
    case Nonlinearity::SELU:
      return 3.0 / 4.0;
  }
  return 1.0;
}

// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (weights are
// [out, in, k...]), as PyTorch computes them.
inline std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  IPUML_CHECK(t.dim() >= 2,
              "nn::init: fan in and fan out can not be computed for a tensor with "
              "fewer than 2 dimensions, got shape ",
              shape_str(t.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

namespace detail {
// Writes `values` into `t` without recording it: initialisation is not part of any graph.
inline Tensor assign(Tensor t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values.to(t.device()));
  return t;
}
inline int64_t fan(const Tensor& t, FanMode mode) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::FanIn ? in : out;
}
}  // namespace detail

inline Tensor uniform_(Tensor t, double a = 0.0, double b = 1.0, Generator* gen = nullptr) {
  IPUML_CHECK(a <= b, "nn::init::uniform_: lower bound ", a, " exceeds upper bound ", b);
  return detail::assign(t, uniform(t.shape(), a, b, gen));
}

inline Tensor normal_(Tensor t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr) {
  IPUML_CHECK(std >= 0.0, "nn::init::normal_: std must be non-negative, got ", std);
  return detail::assign(t, add(mul(randn(t.shape(), gen), std), mean));
}

inline Tensor constant_(Tensor t, double value) {
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}
inline Tensor zeros_(Tensor t) { return constant_(std::move(t), 0.0); }
inline Tensor ones_(Tensor t) { return constant_(std::move(t), 1.0); }

// U(-bound, bound) with bound = gain * sqrt(3 / fan). With a = sqrt(5) and FanIn this is
// PyTorch's Linear/Conv default, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
inline Tensor kaiming_uniform_(Tensor t, double a = 0.0, FanMode mode = FanMode::FanIn,
                               Nonlinearity nonlinearity = Nonlinearity::LeakyReLU,
                               Generator* gen = nullptr) {
  if (t.numel() == 0) return t;  // PyTorch: initialising a zero-element tensor is a no-op
  const double std =
      calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(detail::fan(t, mode)));
  const double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(t), -bound, bound, gen);
}

// PyTorch's reset_parameters of Linear and the convolutions (_ConvNd, transposed included):
// kaiming_uniform_(a = sqrt(5)) for the weight, then U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the
// bias (when defined), fan_in read off the weight as PyTorch reads it, drawn in that order.
inline void default_weight_and_bias_(Tensor weight, Tensor bias, Generator* gen = nullptr) {
  kaiming_uniform_(weight, std::sqrt(5.0), FanMode::FanIn, Nonlinearity::LeakyReLU, gen);
  if (!bias.defined()) return;
  const int64_t fan_in = calculate_fan_in_and_fan_out(weight).first;
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  uniform_(std::move(bias), -bound, bound, gen);
}

inline Tensor kaiming_normal_(Tensor t, double a = 0.0, FanMode mode = FanMode::FanIn,
                              Nonlinearity nonlinearity = Nonlinearity::LeakyReLU,
                              Generator* gen = nullptr) {
  if (t.numel() == 0) return t;
  const double std =
      calculate_gain(nonlinearity, a) / std::sqrt(static_cast<double>(detail::fan(t, mode)));
  return normal_(std::move(t), 0.0, std, gen);
}

inline Tensor xavier_uniform_(Tensor t, double gain = 1.0, Generator* gen = nullptr) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  const double bound = std::sqrt(3.0) * gain * std::sqrt(2.0 / static_cast<double>(in + out));
  return uniform_(std::move(t), -bound, bound, gen);
}

inline Tensor xavier_normal_(Tensor t, double gain = 1.0, Generator* gen = nullptr) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(std::move(t), 0.0, gain * std::sqrt(2.0 / static_cast<double>(in + out)), gen);
}

}  // namespace ipuml::nn::init

namespace ipuml {
// LibTorch's spellings, `nn::init::kaiming_normal_(w, 0, kFanOut, kReLU)` (torch::kFanOut ...).
inline constexpr nn::init::FanMode kFanIn = nn::init::FanMode::FanIn;
inline constexpr nn::init::FanMode kFanOut = nn::init::FanMode::FanOut;
inline constexpr nn::init::Nonlinearity kLinear = nn::init::Nonlinearity::Linear;
inline constexpr nn::init::Nonlinearity kConv1D = nn::init::Nonlinearity::Conv1D;
inline constexpr nn::init::Nonlinearity kConv2D = nn::init::Nonlinearity::Conv2D;
inline constexpr nn::init::Nonlinearity kSigmoid = nn::init::Nonlinearity::Sigmoid;
inline constexpr nn::init::Nonlinearity kTanh = nn::init::Nonlinearity::Tanh;
inline constexpr nn::init::Nonlinearity kReLU = nn::init::Nonlinearity::ReLU;
inline constexpr nn::init::Nonlinearity kLeakyReLU = nn::init::Nonlinearity::LeakyReLU;
inline constexpr nn::init::Nonlinearity kSELU = nn::init::Nonlinearity::SELU;
}  // namespace ipuml
