// The CNN of PopTorch's MNIST tutorial (mnist_poptorch.py), layer for layer and name for name,
// plus its TrainingModelWithLoss wrapper (CrossEntropyLoss on the network's softmax output).
#pragma once

#include <cstdint>
#include <utility>

#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

// Conv2d -> MaxPool2d -> ReLU; the original pools before the activation (same result, as both
// are monotone, on a quarter of the elements).
class MnistBlockImpl : public nn::Module {
 public:
  MnistBlockImpl(int64_t in_channels, int64_t num_filters, int64_t kernel_size, int64_t pool_size)
      : nn::Module("Block") {
    conv = register_module("conv", nn::Conv2d(in_channels, num_filters, kernel_size));
    pool = register_module("pool", nn::MaxPool2d(nn::MaxPool2dOptions(pool_size)));
    relu = register_module("relu", nn::ReLU());
  }
  Tensor forward(const Tensor& x) override { return relu(pool(conv(x))); }

  nn::Conv2d conv{nullptr};
  nn::MaxPool2d pool{nullptr};
  nn::ReLU relu{nullptr};
};
IPUML_MODULE(MnistBlock);

// The tutorial's `Network`: [B,1,28,28] -> class probabilities [B,10]. Its last layer is a
// Softmax, so forward() returns probabilities; logits() stops just before it.
class MnistCnnImpl : public nn::Module {
 public:
  MnistCnnImpl() : nn::Module("Network") {
    layer1 = register_module("layer1", MnistBlock(1, 32, 3, 2));
    layer2 = register_module("layer2", MnistBlock(32, 64, 3, 2));
    layer3 = register_module("layer3", nn::Linear(1600, 128));
    layer3_act = register_module("layer3_act", nn::ReLU());
    layer3_dropout = register_module("layer3_dropout", nn::Dropout(0.5));
    layer4 = register_module("layer4", nn::Linear(128, 10));
    softmax = register_module("softmax", nn::Softmax(1));
  }

  Tensor logits(const Tensor& x) {
    Tensor h = layer2(layer1(x)).view({-1, 1600});
    h = layer3_act(layer3(h));
    return layer4(layer3_dropout(h));
  }
  Tensor forward(const Tensor& x) override { return softmax(logits(x)); }

  MnistBlock layer1{nullptr}, layer2{nullptr};
  nn::Linear layer3{nullptr}, layer4{nullptr};
  nn::ReLU layer3_act{nullptr};
  nn::Dropout layer3_dropout{nullptr};
  nn::Softmax softmax{nullptr};
};
IPUML_MODULE(MnistCnn);

// The tutorial's TrainingModelWithLoss: forward(x, labels) -> (output, loss).
//
// The original feeds the network's *softmax output* to CrossEntropyLoss, which applies
// log-softmax again: softmax is applied twice. That squashes the loss into a narrow band and
// weakens the gradients, but it is the reference behaviour (and the accuracies PopTorch
// reports come from it), so it is the default here. double_softmax = false computes the loss
// on the logits instead (the textbook form); the output stays the probabilities either way.
class MnistCnnWithLossImpl : public nn::Module {
 public:
  explicit MnistCnnWithLossImpl(MnistCnn net, bool double_softmax = true)
      : nn::Module("TrainingModelWithLoss"), double_softmax_(double_softmax) {
    model = register_module("model", std::move(net));
    loss = register_module("loss", nn::CrossEntropyLoss());
  }

  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& labels) {
    if (double_softmax_) {
      Tensor out = model(x);
      return {out, loss(out, labels)};
    }
    Tensor z = model->logits(x);
    return {model->softmax(z), loss(z, labels)};
  }
  using nn::Module::forward;
  bool double_softmax() const { return double_softmax_; }

  MnistCnn model{nullptr};
  nn::CrossEntropyLoss loss{nullptr};

 private:
  bool double_softmax_;
};
IPUML_MODULE(MnistCnnWithLoss);

}  // namespace ipuml::models
