// Bodies of the sample transforms (compiled once in src/lib/data_transforms.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>

#include <ipuml/core/error.hpp>
#include <ipuml/data/transforms.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::data::transforms::normalize_detail {

IPUML_INLINE NormalizeImpl::NormalizeImpl(double mean, double stddev)
    : NormalizeImpl(std::vector<double>{mean}, std::vector<double>{stddev}) {}

IPUML_INLINE NormalizeImpl::NormalizeImpl(std::vector<double> mean, std::vector<double> stddev)
    : mean_(std::move(mean)), std_(std::move(stddev)) {
  IPUML_CHECK(!mean_.empty() && mean_.size() == std_.size(), "Normalize: needs as many means as ",
              "standard deviations (at least one), got ", mean_.size(), " and ", std_.size());
  for (size_t c = 0; c < std_.size(); ++c)
    IPUML_CHECK(std::isfinite(std_[c]) && std_[c] != 0.0 && std::isfinite(mean_[c]),
                "Normalize: channel ", c, " has mean ", mean_[c], " and std ", std_[c],
                " (expected finite values and a non-zero std)");
}

IPUML_INLINE Example NormalizeImpl::operator()(Example e) const {
  e.data = apply(e.data);
  return e;
}

IPUML_INLINE Tensor NormalizeImpl::apply(const Tensor& data) const {
  IPUML_CHECK(data.defined(), "Normalize: the example has no data tensor");
  IPUML_CHECK(data.dtype() == kFloat32, "Normalize: expected float32 data, got ",
              dtype_name(data.dtype()));
  const int64_t channels = static_cast<int64_t>(mean_.size());
  int64_t inner = data.numel();  // elements per channel run
  if (channels > 1) {
    IPUML_CHECK(data.dim() >= 3 && data.size(-3) == channels, "Normalize: ", channels,
                " channel means need data of shape [..., ", channels, ", H, W], got ",
                shape_str(data.shape()));
    inner = data.size(-1) * data.size(-2);
  }
  // Raw loops: this runs on loader workers for every batch, where going through the op
  // dispatcher (and autograd bookkeeping) would cost more than the arithmetic.
  Tensor src = data.contiguous();
  Tensor out = empty(data.shape(), kFloat32);
  const float* in = src.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = data.numel();
  for (int64_t start = 0, run = 0; start < n; start += inner, ++run) {
    // Subtract then divide in float32, as torchvision's sub_().div_() does, for the same bits.
    const size_t c = static_cast<size_t>(run % channels);
    const float m = static_cast<float>(mean_[c]), s = static_cast<float>(std_[c]);
    const int64_t end = std::min(n, start + inner);
    for (int64_t i = start; i < end; ++i) o[i] = (in[i] - m) / s;
  }
  return out;
}

}  // namespace ipuml::data::transforms::normalize_detail
