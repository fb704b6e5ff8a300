// nn::Flatten: merges dims start_dim..end_dim (default 1..-1, keeping the batch dim), the
// module form of torch.flatten used between convolutional and linear layers.
#pragma once

#include <string>

#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

struct FlattenOptions {
  IPUML_ARG(int64_t, start_dim) = 1;
  IPUML_ARG(int64_t, end_dim) = -1;
};

class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(const FlattenOptions& options_ = {})
      : Module("Flatten"), options(options_) {}
  Tensor forward(const Tensor& x) override {
    return flatten(x, options.start_dim(), options.end_dim());
  }
  std::string extra_repr() const override {
    return "start_dim=" + std::to_string(options.start_dim()) +
           ", end_dim=" + std::to_string(options.end_dim());
  }
  FlattenOptions options;
};
IPUML_MODULE(Flatten);

}  // namespace ipuml::nn
