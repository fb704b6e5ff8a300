// nn::Linear (y = x W^T + b, PyTorch's default initialisation) and nn::Identity.
// LinearOptions(in, out).bias(false) turns the bias off.
#pragma once

#include <cmath>
#include <string>

#include <ipuml/nn/init.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  IPUML_ARG(int64_t, in_features);
  IPUML_ARG(int64_t, out_features);
  IPUML_ARG(bool, bias) = true;
};

class LinearImpl : public Module {
 public:
  explicit LinearImpl(const LinearOptions& options_) : Module("Linear"), options(options_) {
    IPUML_CHECK(options.in_features() >= 0 && options.out_features() >= 0,
                "Linear: in_features and out_features must be non-negative, got ",
                options.in_features(), " and ", options.out_features());
    weight = register_parameter("weight", zeros({options.out_features(), options.in_features()}));
    if (options.bias()) bias = register_parameter("bias", zeros({options.out_features()}));
    reset_parameters();
  }
  LinearImpl(int64_t in_features, int64_t out_features)
      : LinearImpl(LinearOptions(in_features, out_features)) {}

  // PyTorch's default: kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)) for both
  // weight and bias, drawn in that order.
  void reset_parameters(Generator* gen = nullptr) {
    init::default_weight_and_bias_(weight, bias, gen);
  }

  Tensor forward(const Tensor& x) override {
    IPUML_CHECK(x.dim() >= 1 && x.size(-1) == options.in_features(),
                "Linear: expected an input "
                "whose last dimension is in_features=",
                options.in_features(), ", got shape ", shape_str(x.shape()));
    return linear(x, weight, bias);
  }

  std::string extra_repr() const override {
    return "in_features=" + std::to_string(options.in_features()) +
           ", out_features=" + std::to_string(options.out_features()) +
           ", bias=" + repr::py_bool(options.bias());
  }

  LinearOptions options;
  Tensor weight;
  Tensor bias;
};
IPUML_MODULE(Linear);

// Passes its input through; a placeholder where a layer is optional.
class IdentityImpl : public Module {
 public:
  IdentityImpl() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};
IPUML_MODULE(Identity);

}  // namespace ipuml::nn
