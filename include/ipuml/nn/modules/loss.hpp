// Loss modules CrossEntropyLoss (weight, ignore_index, label_smoothing), NLLLoss (weight,
// ignore_index) and MSELoss: forward(input, target) with a Reduction (mean by default), as
// PyTorch's; a class weight is registered as the buffer "weight", as in PyTorch.
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
  IPUML_ARG(Tensor, weight);
  IPUML_ARG(int64_t, ignore_index) = -100;
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
    if (options.weight().defined()) {
      IPUML_CHECK(options.weight().dim() == 1 && is_floating(options.weight().dtype()),
                  "CrossEntropyLoss: weight must be a 1-d floating-point tensor [C], got shape ",
                  shape_str(options.weight().shape()), " of ",
                  dtype_name(options.weight().dtype()));
      register_buffer("weight", options.weight());
    }
  }
  // The single-tensor forward stays visible (it refuses: a loss needs a target).
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return cross_entropy(input, target, options.reduction(), options.label_smoothing(),
                         options.weight(), options.ignore_index());
  }
  CrossEntropyLossOptions options;
};
IPUML_MODULE(CrossEntropyLoss);

struct NLLLossOptions {
  IPUML_ARG(Tensor, weight);
  IPUML_ARG(int64_t, ignore_index) = -100;
  IPUML_ARG(Reduction, reduction) = Reduction::Mean;
};

class NLLLossImpl : public Module {
 public:
  explicit NLLLossImpl(const NLLLossOptions& options_ = {}) : Module("NLLLoss"), options(options_) {
    if (options.weight().defined()) {
      IPUML_CHECK(options.weight().dim() == 1 && is_floating(options.weight().dtype()),
                  "NLLLoss: weight must be a 1-d floating-point tensor [C], got shape ",
                  shape_str(options.weight().shape()), " of ",
                  dtype_name(options.weight().dtype()));
      register_buffer("weight", options.weight());
    }
  }
  using Module::forward;
  Tensor forward(const Tensor& input, const Tensor& target) {
    return nll_loss(input, target, options.reduction(), options.weight(), options.ignore_index());
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
