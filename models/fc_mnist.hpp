// Cerebras modelzoo's fc_mnist MLP (fc_mnist/pytorch/model.py), with its parameter names, so
// checkpoints read like the original's, its options checked before any allocation, and its loss.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

// What modelzoo's `model:` section says about the network. Defaults are the public config
// (examples/cerebras/configs/fc_mnist.yaml): three hidden layers of 128, dropout 0.2, ReLU.
struct FcMnistConfig {
  // Sizes come from user files, so each is bounded (and the total overflow-checked) before a
  // tensor is sized from it.
  static constexpr int64_t kMaxDepth = 4096;
  static constexpr int64_t kMaxWidth = int64_t{1} << 20;
  static constexpr int64_t kMaxParameters = int64_t{1} << 32;

  // modelzoo's other spelling, `depth` layers of `hidden_size` each; checked here because the
  // list it builds has `depth` entries.
  FcMnistConfig& depth_and_hidden_size(int64_t depth, int64_t hidden_size) {
    IPUML_CHECK(depth >= 0 && depth <= kMaxDepth, "FcMnistConfig: depth must be in [0, ", kMaxDepth,
                "], got ", depth);
    hidden_sizes_.assign(static_cast<size_t>(depth), hidden_size);
    return *this;
  }

  // modelzoo's fc_mnist builds ReLU only; tanh, gelu and sigmoid (PyTorch's modules of those
  // names) are accepted as other modelzoo models' activation_fn spells them.
  static bool known_activation(const std::string& name) {
    return name == "relu" || name == "tanh" || name == "gelu" || name == "sigmoid";
  }

  // Weights and biases of every Linear; -1 if the count overflows int64.
  int64_t num_parameters() const {
    int64_t total = 0, in = input_size_;
    bool overflow = false;
    auto add = [&](int64_t out) {
      int64_t w = 0;
      overflow = overflow || __builtin_mul_overflow(in, out, &w) ||
                 __builtin_add_overflow(w, out, &w) || __builtin_add_overflow(total, w, &total);
      in = out;
    };
    for (int64_t h : hidden_sizes_) add(h);
    add(num_classes_);
    return overflow ? -1 : total;
  }

  void validate() const {
    IPUML_CHECK(hidden_sizes_.size() <= static_cast<size_t>(kMaxDepth),
                "FcMnistConfig: ", hidden_sizes_.size(), " hidden layers, expected at most ",
                kMaxDepth);
    for (int64_t h : hidden_sizes_)
      IPUML_CHECK(h > 0 && h <= kMaxWidth, "FcMnistConfig: hidden sizes must be in [1, ", kMaxWidth,
                  "], got ", h);
    IPUML_CHECK(input_size_ > 0 && input_size_ <= kMaxWidth && num_classes_ > 0 &&
                    num_classes_ <= kMaxWidth,
                "FcMnistConfig: input_size and num_classes must be in [1, ", kMaxWidth, "], got ",
                input_size_, " and ", num_classes_);
    IPUML_CHECK(dropout_ >= 0.0 && dropout_ < 1.0, "FcMnistConfig: dropout must be in [0, 1), got ",
                dropout_);
    IPUML_CHECK(known_activation(activation_fn_), "FcMnistConfig: activation_fn '", activation_fn_,
                "' is not one of relu, tanh, gelu, sigmoid");
    const int64_t n = num_parameters();
    const int64_t widest =
        hidden_sizes_.empty() ? 0 : *std::max_element(hidden_sizes_.begin(), hidden_sizes_.end());
    IPUML_CHECK(n >= 0 && n <= kMaxParameters, "FcMnistConfig: ", hidden_sizes_.size(),
                " hidden layers (the widest ", widest, ") need ",
                n < 0 ? std::string("more than 2^63") : std::to_string(n),
                " parameters, expected at most 2^32");
  }

  // An empty list leaves only last_layer (a linear classifier), as modelzoo's loop would.
  IPUML_ARG(std::vector<int64_t>, hidden_sizes) = {128, 128, 128};
  IPUML_ARG(double, dropout) = 0.2;
  IPUML_ARG(std::string, activation_fn) = "relu";
  // Fixed at 784 and 10 in modelzoo (28 x 28 MNIST digits); options here for small tests.
  IPUML_ARG(int64_t, input_size) = 784;
  IPUML_ARG(int64_t, num_classes) = 10;
};

// modelzoo's `MNIST` module: x [B, ...] flattened to [B, input_size] -> log-probabilities
// [B, num_classes]. One activation module and one dropout module are shared by every hidden
// layer, as in the original (they hold no parameters, so only the repr shows it).
class FcMnistImpl : public nn::Module {
 public:
  explicit FcMnistImpl(const FcMnistConfig& c = FcMnistConfig()) : nn::Module("MNIST"), config(c) {
    config.validate();
    fc_layers = register_module("fc_layers", nn::ModuleList());
    int64_t in = config.input_size();
    for (int64_t h : config.hidden_sizes()) {
      fc_layers->push_back(nn::Linear(in, h));
      in = h;
    }
    last_layer = register_module("last_layer", nn::Linear(in, config.num_classes()));
    nonlin = register_module("nonlin", make_activation(config.activation_fn()));
    dropout = register_module("dropout", nn::Dropout(config.dropout()));
  }

  Tensor logits(const Tensor& x) {
    int64_t per_sample = 1;
    bool overflow = false;
    for (int64_t d = 1; d < x.dim(); ++d)
      overflow = overflow || __builtin_mul_overflow(per_sample, x.size(d), &per_sample);
    IPUML_CHECK(x.dim() >= 2 && !overflow && per_sample == config.input_size(),
                "FcMnist: expected an input [batch, ...] of ", config.input_size(),
                " values per sample, got shape ", shape_str(x.shape()));
    Tensor h = flatten(x, 1);
    for (auto& [name, layer] : *fc_layers) h = dropout(nonlin->forward(layer->forward(h)));
    return last_layer(h);
  }
  Tensor forward(const Tensor& x) override { return log_softmax(logits(x), 1); }

  FcMnistConfig config;
  nn::ModuleList fc_layers{nullptr};
  nn::Linear last_layer{nullptr};
  std::shared_ptr<nn::Module> nonlin;
  nn::Dropout dropout{nullptr};

 private:
  static std::shared_ptr<nn::Module> make_activation(const std::string& name) {
    if (name == "relu") return nn::ReLU().ptr();
    if (name == "tanh") return nn::Tanh().ptr();
    if (name == "gelu") return nn::GELU().ptr();
    if (name == "sigmoid") return nn::Sigmoid().ptr();
    fail("FcMnist: activation_fn '", name, "' is not one of relu, tanh, gelu, sigmoid");
  }
};
IPUML_MODULE(FcMnist);

// modelzoo's loss: NLLLoss (mean over the batch) on the log-probabilities forward() returns.
inline Tensor fc_mnist_loss(const Tensor& log_probs, const Tensor& labels) {
  return nll_loss(log_probs, labels);
}

}  // namespace ipuml::models
