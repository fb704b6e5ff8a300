// SambaNova's LeNet starter (sambanova/tutorials lenet/lenet.py, the ALCF AI Testbed's first
// SambaFlow program) with its parameter names, its input checked by name, and its loss.
#pragma once

#include <cstdint>
#include <utility>

#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

// lenet.py's one model option, --num-classes (default 10). Its images are fixed at 1 x 28 x 28:
// fc1 takes the 16 x 7 x 7 features two 2 x 2 poolings leave of them.
struct LeNetConfig {
  static constexpr int64_t kMaxClasses = int64_t{1} << 20;
  static constexpr int64_t kImageSize = 28;

  void validate() const {
    IPUML_CHECK(num_classes_ > 0 && num_classes_ <= kMaxClasses,
                "LeNetConfig: num_classes must be in [1, ", kMaxClasses, "], got ", num_classes_);
  }

  IPUML_ARG(int64_t, num_classes) = 10;
};

// SambaNova's LeNet: not LeCun's 5 x 5 convolutions but 3 x 3 ones padded by 1 and without
// biases (6 then 16 channels), each followed by ReLU and a 2 x 2 max pool, then three Linear
// layers (784 -> 120 -> 84 -> num_classes) with ReLU between them. Its parameters keep PyTorch's
// default initialisation, as the original does. The original's forward(inputs, labels) returns
// (loss, logits) from its `criterion` (CrossEntropyLoss, mean over the batch); here forward(x)
// gives the logits and forward(x, labels) the pair, in the original's order.
class LeNetImpl : public nn::Module {
 public:
  explicit LeNetImpl(const LeNetConfig& c = LeNetConfig()) : nn::Module("LeNet"), config(c) {
    config.validate();
    auto conv = [](int64_t in, int64_t out) {
      return nn::Conv2d(
          nn::Conv2dOptions(in, out, {3, 3}).stride({1, 1}).padding({1, 1}).bias(false));
    };
    conv1 = register_module("conv1", conv(1, 6));
    maxpool1 = register_module("maxpool1", nn::MaxPool2d(nn::MaxPool2dOptions({2, 2})));
    conv2 = register_module("conv2", conv(6, 16));
    maxpool2 = register_module("maxpool2", nn::MaxPool2d(nn::MaxPool2dOptions({2, 2})));
    fc1 = register_module("fc1", nn::Linear(16 * 7 * 7, 120));
    fc2 = register_module("fc2", nn::Linear(120, 84));
    fc3 = register_module("fc3", nn::Linear(84, config.num_classes()));
    criterion = register_module("criterion", nn::CrossEntropyLoss());
  }

  // Images [batch, 1, 28, 28] -> logits [batch, num_classes].
  Tensor forward(const Tensor& x) override {
    check_input(x);
    Tensor h = maxpool1(relu(conv1(x)));
    h = maxpool2(relu(conv2(h)));
    // The original's reshape(x, [batch, -1]), spelled out so an empty batch reshapes too.
    h = reshape(h, {h.size(0), 16 * 7 * 7});
    h = relu(fc1(h));
    h = relu(fc2(h));
    return fc3(h);
  }

  // The original's forward(inputs, labels): (CrossEntropyLoss of the logits, the logits).
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& labels) {
    Tensor out = forward(x);
    return {criterion(out, labels), out};
  }

  LeNetConfig config;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::MaxPool2d maxpool1{nullptr}, maxpool2{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  nn::CrossEntropyLoss criterion{nullptr};

 private:
  // The convolutions would accept other sizes and fail later in fc1 with a matmul's message;
  // say what the model expects instead.
  static void check_input(const Tensor& x) {
    constexpr int64_t s = LeNetConfig::kImageSize;
    IPUML_CHECK(x.dim() == 4, "LeNet: expected images [batch, 1, ", s, ", ", s,
                "] (a 4-d input), got a ", x.dim(), "-d input of shape ", shape_str(x.shape()));
    IPUML_CHECK(x.size(1) == 1, "LeNet: expected 1 input channel, got ", x.size(1),
                " (input shape ", shape_str(x.shape()), ")");
    IPUML_CHECK(x.size(2) == s && x.size(3) == s, "LeNet: expected ", s, " x ", s,
                " images (fc1 takes 16 x 7 x 7 features), got ", x.size(2), " x ", x.size(3),
                " (input shape ", shape_str(x.shape()), ")");
  }
};
IPUML_MODULE(LeNet);

// lenet.py's loss: CrossEntropyLoss (mean over the batch) on the logits forward() returns.
inline Tensor lenet_loss(const Tensor& logits, const Tensor& labels) {
  return cross_entropy(logits, labels);
}

}  // namespace ipuml::models
