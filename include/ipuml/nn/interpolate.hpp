// F::interpolate (LibTorch's torch::nn::functional::interpolate) and its InterpolateFuncOptions:
// resampling [N, C, L] / [N, C, H, W] / [N, C, D, H, W] by nearest, linear, bicubic or area.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/nn/init.hpp>
#include <ipuml/nn/modules/common.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::nn {

// How interpolate makes values between samples (LibTorch's torch::kNearest, ...). Linear,
// Bilinear and Trilinear are the same rule for 1, 2 and 3 spatial dimensions; as in LibTorch,
// each is accepted only for its rank.
enum class InterpolateMode { Nearest, NearestExact, Linear, Bilinear, Bicubic, Trilinear, Area };
std::string interpolate_mode_name(InterpolateMode mode);

}  // namespace ipuml::nn

namespace ipuml {
// LibTorch's spellings, `F::InterpolateFuncOptions().mode(torch::kBilinear)`. LibTorch's
// torch::kLinear is one name for the init nonlinearity and this mode; ipuml's kLinear is the
// nonlinearity (nn/init.hpp), which mode() takes as InterpolateMode::Linear.
inline constexpr nn::InterpolateMode kNearest = nn::InterpolateMode::Nearest;
inline constexpr nn::InterpolateMode kNearestExact = nn::InterpolateMode::NearestExact;
inline constexpr nn::InterpolateMode kBilinear = nn::InterpolateMode::Bilinear;
inline constexpr nn::InterpolateMode kBicubic = nn::InterpolateMode::Bicubic;
inline constexpr nn::InterpolateMode kTrilinear = nn::InterpolateMode::Trilinear;
inline constexpr nn::InterpolateMode kArea = nn::InterpolateMode::Area;
}  // namespace ipuml

namespace ipuml::nn::functional {

// Exactly one of size (the output's spatial sizes) and scale_factor (one factor per spatial
// dimension; the output size is floor(input size * factor)) must be given. align_corners only
// with the interpolating modes (false when not given). With a scale_factor, PyTorch maps output
// to input coordinates by 1 / factor unless recompute_scale_factor is true (then by the ratio of
// the sizes); the results are the same for integer factors.
struct InterpolateFuncOptions {
  // size and scale_factor take a list (`.size({4, 4})`, which LibTorch's optional-typed setters
  // only take for one value) or std::nullopt.
  InterpolateFuncOptions& size(std::vector<int64_t> v) {
    size_ = std::move(v);
    return *this;
  }
  InterpolateFuncOptions& size(std::nullopt_t) {
    size_.reset();
    return *this;
  }
  const std::optional<std::vector<int64_t>>& size() const { return size_; }
  InterpolateFuncOptions& scale_factor(std::vector<double> v) {
    scale_factor_ = std::move(v);
    return *this;
  }
  InterpolateFuncOptions& scale_factor(std::nullopt_t) {
    scale_factor_.reset();
    return *this;
  }
  const std::optional<std::vector<double>>& scale_factor() const { return scale_factor_; }

  IPUML_ARG(InterpolateMode, mode) = InterpolateMode::Nearest;
  IPUML_ARG(std::optional<bool>, align_corners);
  IPUML_ARG(std::optional<bool>, recompute_scale_factor);
  // Not implemented: true is refused.
  IPUML_ARG(bool, antialias) = false;

 public:
  // torch::kLinear, which ipuml spells as the init nonlinearity (see kLinear above).
  InterpolateFuncOptions& mode(init::Nonlinearity linear);

 private:
  std::optional<std::vector<int64_t>> size_;
  std::optional<std::vector<double>> scale_factor_;
};

// Values and gradients as PyTorch's upsample_* kernels give them (float32 source coordinates,
// the same rounding of nearest indices, cubic convolution with A = -0.75 and clamped borders),
// computed one spatial dimension at a time from index_select, mul and add, so differentiable,
// on any device and traceable. Work is linear in the output (2 taps per dimension for linear, 4
// for bicubic), not a dense interpolation matrix.
Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& options = {});

}  // namespace ipuml::nn::functional

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/nn/interpolate_impl.hpp>
#endif
