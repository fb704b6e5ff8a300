// nn::Dropout, and the channel-wise Dropout1d / Dropout2d: inverted dropout while training, the
// identity in eval(); masks come from the counter-based default generator (ipuml::manual_seed).
#pragma once

#include <string>

#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}
  IPUML_ARG(double, p);
  // Recorded for the repr; ipuml always computes out of place (same values).
  IPUML_ARG(bool, inplace) = false;
};

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(const DropoutOptions& options_ = {}) : Module("Dropout"), options(options_) {
    IPUML_CHECK(options.p() >= 0.0 && options.p() <= 1.0,
                "Dropout: probability has to be between 0 and 1, got p=", options.p());
  }
  explicit DropoutImpl(double p) : DropoutImpl(DropoutOptions(p)) {}

  Tensor forward(const Tensor& x) override { return dropout(x, options.p(), is_training()); }
  std::string extra_repr() const override {
    return "p=" + repr::py_float(options.p()) + ", inplace=" + repr::py_bool(options.inplace());
  }
  DropoutOptions options;
};
IPUML_MODULE(Dropout);

namespace detail {
// PyTorch's feature dropout: every channel of every sample is kept (scaled by 1 / (1 - p)) or
// zeroed whole. The input is [N, C, <feature_dims sizes>] or, unbatched, [C, <sizes>].
inline Tensor feature_dropout(const Tensor& x, double p, bool training, int64_t feature_dims,
                              const char* who, Generator* gen = nullptr) {
  IPUML_CHECK(p >= 0.0 && p <= 1.0, who, ": probability has to be between 0 and 1, got p=", p);
  IPUML_CHECK(x.dim() == feature_dims + 1 || x.dim() == feature_dims + 2, who, ": expected a ",
              feature_dims + 1, "-d (unbatched) or ", feature_dims + 2,
              "-d (batched) input, got shape ", shape_str(x.shape()));
  if (!training || p == 0.0) return x;
  Shape mask_shape = x.shape();
  for (int64_t d = x.dim() - feature_dims; d < x.dim(); ++d) mask_shape[static_cast<size_t>(d)] = 1;
  if (p == 1.0) return mul(x, zeros(mask_shape, x.dtype()));
  Tensor keep = cast(ge(uniform(mask_shape, 0.0, 1.0, gen), p), x.dtype());
  return mul(x, mul(keep, 1.0 / (1.0 - p)));
}
}  // namespace detail

// Dropout2d zeroes whole channels of [N, C, H, W] (or [C, H, W]) inputs; Dropout1d of
// [N, C, L] (or [C, L]) inputs.
using Dropout1dOptions = DropoutOptions;
using Dropout2dOptions = DropoutOptions;

namespace detail {
template <int64_t FeatureDims>
class ChannelDropoutImpl : public Module {
 public:
  ChannelDropoutImpl(const DropoutOptions& options_, const char* name)
      : Module(name), options(options_) {
    IPUML_CHECK(options.p() >= 0.0 && options.p() <= 1.0, name,
                ": probability has to be between 0 and 1, got p=", options.p());
  }
  Tensor forward(const Tensor& x) override {
    return feature_dropout(x, options.p(), is_training(), FeatureDims, type_name().c_str());
  }
  std::string extra_repr() const override {
    return "p=" + repr::py_float(options.p()) + ", inplace=" + repr::py_bool(options.inplace());
  }
  DropoutOptions options;
};
}  // namespace detail

class Dropout1dImpl : public detail::ChannelDropoutImpl<1> {
 public:
  explicit Dropout1dImpl(const Dropout1dOptions& o = {}) : ChannelDropoutImpl<1>(o, "Dropout1d") {}
  explicit Dropout1dImpl(double p) : Dropout1dImpl(Dropout1dOptions(p)) {}
};
IPUML_MODULE(Dropout1d);

class Dropout2dImpl : public detail::ChannelDropoutImpl<2> {
 public:
  explicit Dropout2dImpl(const Dropout2dOptions& o = {}) : ChannelDropoutImpl<2>(o, "Dropout2d") {}
  explicit Dropout2dImpl(double p) : Dropout2dImpl(Dropout2dOptions(p)) {}
};
IPUML_MODULE(Dropout2d);

// LibTorch's older name for Dropout2d (pytorch/examples' cpp/mnist uses it).
using FeatureDropoutImpl = Dropout2dImpl;
using FeatureDropout = Dropout2d;

}  // namespace ipuml::nn
