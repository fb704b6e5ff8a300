// Loss modules CrossEntropyLoss (label_smoothing), NLLLoss and MSELoss: forward(input, target)
// with a Reduction (mean by default), as PyTorch's.
#pragma once

#include <string>

#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

// LibTorch's spellings: CrossEntropyLossOptions().reduction(nn::kSum).
inline constexpr Reduction kNone = Reduction::None;
inline constexpr Reduction kMean = Reduction::Mean;
inline constexpr Reduction kSum = Reduction::Sum;

struct CrossEntropyLossOptions {
  IPUML_ARG(Reduction, reduction) = Reduction::Mean;
  IPUML_ARG(double, label_smoothing) = 0.0;
};

class CrossEntropyLossImpl : public Module {
 public:
  explicit CrossEntropyLossImpl(const CrossEntropyLossOptions& options_ = {})
      : Module("CrossEntropyLoss"), options(options_) {
    IPUML_CHECK(options.label_smoothing() >= 0.0 && options.label_smoothing() <= 1.0,
                "CrossEntropyLoss: label_smoothing must be in [0, 1], got ",
                options.label_smoothing());
  }
  // The single-tensor forward stays visible (it refuses: a loss needs a target).
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return cross_entropy(input, target, options.reduction(), options.label_smoothing());
  }
  CrossEntropyLossOptions options;
};
IPUML_MODULE(CrossEntropyLoss);

struct NLLLossOptions {
  IPUML_ARG(Reduction, reduction) = Reduction::Mean;
};

class NLLLossImpl : public Module {
 public:
  explicit NLLLossImpl(const NLLLossOptions& options_ = {})
      : Module("NLLLoss"), options(options_) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return nll_loss(input, target, options.reduction());
  }
  NLLLossOptions options;
};
IPUML_MODULE(NLLLoss);

struct MSELossOptions {
  IPUML_ARG(Reduction, reduction) = Reduction::Mean;
};

class MSELossImpl : public Module {
 public:
  explicit MSELossImpl(const MSELossOptions& options_ = {})
      : Module("MSELoss"), options(options_) {}
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return mse_loss(input, target, options.reduction());
  }
  MSELossOptions options;
};
IPUML_MODULE(MSELoss);

}  // namespace ipuml::nn
