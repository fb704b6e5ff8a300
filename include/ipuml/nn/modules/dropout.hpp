// nn::Dropout: inverted dropout while training, the identity in eval(); masks come from the
// counter-based default generator, so they follow ipuml::manual_seed.
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

}  // namespace ipuml::nn
