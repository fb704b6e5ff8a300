// Activation modules: ReLU, GELU (approximate "none" or "tanh"), Tanh, Sigmoid, Softmax(dim),
// LogSoftmax(dim); thin wrappers over the ops that carry PyTorch's options and reprs.
#pragma once

#include <string>

#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}
  // Recorded for the repr; ipuml always computes out of place (same values).
  IPUML_ARG(bool, inplace);
};

class ReLUImpl : public Module {
 public:
  explicit ReLUImpl(const ReLUOptions& options_ = {}) : Module("ReLU"), options(options_) {}
  Tensor forward(const Tensor& x) override { return relu(x); }
  std::string extra_repr() const override { return options.inplace() ? "inplace=True" : ""; }
  ReLUOptions options;
};
IPUML_MODULE(ReLU);

struct GELUOptions {
  IPUML_ARG(std::string, approximate) = "none";
};

class GELUImpl : public Module {
 public:
  explicit GELUImpl(const GELUOptions& options_ = {}) : Module("GELU"), options(options_) {
    IPUML_CHECK(options.approximate() == "none" || options.approximate() == "tanh",
                "GELU: approximate must be 'none' or 'tanh', got '", options.approximate(), "'");
  }
  Tensor forward(const Tensor& x) override { return gelu(x, options.approximate()); }
  std::string extra_repr() const override { return "approximate='" + options.approximate() + "'"; }
  GELUOptions options;
};
IPUML_MODULE(GELU);

class TanhImpl : public Module {
 public:
  TanhImpl() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override { return tanh(x); }
};
IPUML_MODULE(Tanh);

class SigmoidImpl : public Module {
 public:
  SigmoidImpl() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override { return sigmoid(x); }
};
IPUML_MODULE(Sigmoid);

struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}
  IPUML_ARG(int64_t, dim);
};
using LogSoftmaxOptions = SoftmaxOptions;

class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(const SoftmaxOptions& options_) : Module("Softmax"), options(options_) {}
  explicit SoftmaxImpl(int64_t dim) : SoftmaxImpl(SoftmaxOptions(dim)) {}
  Tensor forward(const Tensor& x) override { return softmax(x, options.dim()); }
  std::string extra_repr() const override { return "dim=" + std::to_string(options.dim()); }
  SoftmaxOptions options;
};
IPUML_MODULE(Softmax);

class LogSoftmaxImpl : public Module {
 public:
  explicit LogSoftmaxImpl(const LogSoftmaxOptions& options_)
      : Module("LogSoftmax"), options(options_) {}
  explicit LogSoftmaxImpl(int64_t dim) : LogSoftmaxImpl(LogSoftmaxOptions(dim)) {}
  Tensor forward(const Tensor& x) override { return log_softmax(x, options.dim()); }
  std::string extra_repr() const override { return "dim=" + std::to_string(options.dim()); }
  LogSoftmaxOptions options;
};
IPUML_MODULE(LogSoftmax);

}  // namespace ipuml::nn
