// SambaNova's feed-forward MNIST starter (ffn_mnist.py: `FFNLogReg`, a two-layer FFN under the
// logistic regression of logistic_regression.hpp) with its parameter names, its initialisation,
// its input checked, and its loss.
#pragma once

#include <cstdint>
#include <utility>

#include <ipuml/nn/init.hpp>
#include <ipuml/nn/nn.hpp>

#include <ipuml/models/logistic_regression.hpp>

namespace ipuml::models {

// ffn_mnist.py's model options and defaults: --num-features 784, --ffn-dim-1 32, --ffn-dim-2 32,
// --num-classes 10.
struct FfnMnistConfig {
  static constexpr int64_t kMaxWidth = int64_t{1} << 20;

  void validate() const {
    auto in_range = [](const char* field, int64_t v) {
      IPUML_CHECK(v > 0 && v <= kMaxWidth, "FfnMnistConfig: ", field, " must be in [1, ", kMaxWidth,
                  "], got ", v);
    };
    in_range("num_features", num_features_);
    in_range("ffn_dim_1", ffn_dim_1_);
    in_range("ffn_dim_2", ffn_dim_2_);
    in_range("num_classes", num_classes_);
  }

  IPUML_ARG(int64_t, num_features) = 784;
  IPUML_ARG(int64_t, ffn_dim_1) = 32;
  IPUML_ARG(int64_t, ffn_dim_2) = 32;
  IPUML_ARG(int64_t, num_classes) = 10;
};

// The original's `FFN`: gemm1 -> ReLU -> gemm2, both Linear layers without biases. There is no
// activation after gemm2: its output goes straight into the logistic regression.
class FFNImpl : public nn::Module {
 public:
  FFNImpl(int64_t num_features, int64_t ffn_dim_1, int64_t ffn_dim_2) : nn::Module("FFN") {
    gemm1 = register_module("gemm1",
                            nn::Linear(nn::LinearOptions(num_features, ffn_dim_1).bias(false)));
    relu = register_module("relu", nn::ReLU());
    gemm2 =
        register_module("gemm2", nn::Linear(nn::LinearOptions(ffn_dim_1, ffn_dim_2).bias(false)));
  }
  Tensor forward(const Tensor& x) override { return gemm2(relu(gemm1(x))); }

  nn::Linear gemm1{nullptr}, gemm2{nullptr};
  nn::ReLU relu{nullptr};
};
IPUML_MODULE(FFN);

// The original's `FFNLogReg`: `ffn` then `logreg` (a bias-free LogReg on ffn_dim_2 features),
// every parameter drawn again by xavier_normal_ (its _init_params). Input: flattened samples
// [batch, num_features]. forward(x) gives the logits; forward(x, labels) gives (loss, logits) in
// the original's order, the loss being logreg's CrossEntropyLoss (mean over the batch).
class FFNLogRegImpl : public nn::Module {
 public:
  explicit FFNLogRegImpl(const FfnMnistConfig& c = FfnMnistConfig())
      : nn::Module("FFNLogReg"), config(c) {
    config.validate();
    ffn =
        register_module("ffn", FFN(config.num_features(), config.ffn_dim_1(), config.ffn_dim_2()));
    logreg = register_module(
        "logreg",
        LogReg(LogRegConfig().num_features(config.ffn_dim_2()).num_classes(config.num_classes())));
    for (auto& p : parameters()) nn::init::xavier_normal_(p);
  }

  Tensor forward(const Tensor& x) override {
    IPUML_CHECK(x.dim() == 2,
                "FFNLogReg: expected an input [batch, num_features=", config.num_features(),
                "] (a 2-d input; flatten images first), got a ", x.dim(), "-d input of shape ",
                shape_str(x.shape()));
    IPUML_CHECK(x.size(1) == config.num_features(),
                "FFNLogReg: expected num_features=", config.num_features(),
                " values per sample, got ", x.size(1), " (input shape ", shape_str(x.shape()), ")");
    return logreg(ffn(x));
  }

  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& labels) {
    Tensor out = forward(x);
    return {logreg->criterion(out, labels), out};
  }

  FfnMnistConfig config;
  FFN ffn{nullptr};
  LogReg logreg{nullptr};
};
IPUML_MODULE(FFNLogReg);

// ffn_mnist.py's loss: logreg's CrossEntropyLoss (mean over the batch) on the logits.
inline Tensor ffn_mnist_loss(const Tensor& logits, const Tensor& labels) {
  return cross_entropy(logits, labels);
}

}  // namespace ipuml::models
