// SambaNova's logistic-regression starter (sambanova/tutorials hello_world/logreg.py, the `LogReg`
// the ALCF AI Testbed runs on MNIST) with its parameter names, its input checked, and its loss.
#pragma once

#include <cstdint>
#include <utility>

#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

// logreg.py's model options: --num-features 784, --num-classes 10 and --bias (off unless given:
// the tutorial's flag is store_true, and the LogReg inside ffn_mnist.py has no bias either).
struct LogRegConfig {
  static constexpr int64_t kMaxWidth = int64_t{1} << 20;

  void validate() const {
    IPUML_CHECK(num_features_ > 0 && num_features_ <= kMaxWidth,
                "LogRegConfig: num_features must be in [1, ", kMaxWidth, "], got ", num_features_);
    IPUML_CHECK(num_classes_ > 0 && num_classes_ <= kMaxWidth,
                "LogRegConfig: num_classes must be in [1, ", kMaxWidth, "], got ", num_classes_);
  }

  IPUML_ARG(int64_t, num_features) = 784;
  IPUML_ARG(int64_t, num_classes) = 10;
  IPUML_ARG(bool, bias) = false;
};

// SambaNova's `LogReg`: one Linear `lin_layer` (num_features -> num_classes, PyTorch's default
// initialisation) and a `criterion` (CrossEntropyLoss, mean over the batch). Its input is a
// batch of flattened samples [batch, num_features] (the tutorial compiles the model for that
// shape). forward(x) gives the logits; forward(x, labels) gives (loss, logits), the original's
// pair in the original's order.
class LogRegImpl : public nn::Module {
 public:
  explicit LogRegImpl(const LogRegConfig& c = LogRegConfig()) : nn::Module("LogReg"), config(c) {
    config.validate();
    lin_layer = register_module(
        "lin_layer",
        nn::Linear(
            nn::LinearOptions(config.num_features(), config.num_classes()).bias(config.bias())));
    criterion = register_module("criterion", nn::CrossEntropyLoss());
  }

  Tensor forward(const Tensor& x) override {
    IPUML_CHECK(x.dim() == 2,
                "LogReg: expected an input [batch, num_features=", config.num_features(),
                "] (a 2-d input; flatten images first), got a ", x.dim(), "-d input of shape ",
                shape_str(x.shape()));
    IPUML_CHECK(x.size(1) == config.num_features(),
                "LogReg: expected num_features=", config.num_features(), " values per sample, got ",
                x.size(1), " (input shape ", shape_str(x.shape()), ")");
    return lin_layer(x);
  }

  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& labels) {
    Tensor out = forward(x);
    return {criterion(out, labels), out};
  }

  LogRegConfig config;
  nn::Linear lin_layer{nullptr};
  nn::CrossEntropyLoss criterion{nullptr};
};
IPUML_MODULE(LogReg);

// logreg.py's loss: CrossEntropyLoss (mean over the batch) on the logits.
inline Tensor logreg_loss(const Tensor& logits, const Tensor& labels) {
  return cross_entropy(logits, labels);
}

}  // namespace ipuml::models
