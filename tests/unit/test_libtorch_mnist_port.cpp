// pytorch/examples' cpp/mnist/mnist.cpp, ported to ipuml with LibTorch's idioms kept: a Net
// struct deriving nn::Module with holders registered by name, FeatureDropout, max_pool2d(x, 2),
// view({-1, 320}), dropout(x, p, is_training()), log_softmax, train/test loops templated on the
// loader and taking optim::Optimizer&, nll_loss(out, t, /*weight=*/{}, Reduction::Sum),
// argmax(1).eq(t).sum(), .map(transforms::Normalize(...)).map(transforms::Stack<>()) and
// make_data_loader<SequentialSampler>. What still differs from the original is marked
// "Original:" where it happens: the Device lines (they come with the device seam), Normalize<>
// (a class here, not a template), size() (an int64_t here, not an optional) and the data set (a
// generated one, so the test needs no files; datasets::MNIST(root, Mode) is checked below).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>

#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/ipuml.hpp>
#include "../support/mnist_cache.hpp"

namespace {

constexpr int64_t kTrainBatchSize = 64;
constexpr int64_t kTestBatchSize = 250;
constexpr int64_t kNumberOfEpochs = 10;

struct Net : ipuml::nn::Module {
  Net()
      : conv1(ipuml::nn::Conv2dOptions(1, 10, /*kernel_size=*/5)),
        conv2(ipuml::nn::Conv2dOptions(10, 20, /*kernel_size=*/5)),
        fc1(320, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  ipuml::Tensor forward(ipuml::Tensor x) {
    x = ipuml::relu(ipuml::max_pool2d(conv1->forward(x), 2));
    x = ipuml::relu(ipuml::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 320});
    x = ipuml::relu(fc1->forward(x));
    x = ipuml::dropout(x, /*p=*/0.5, /*training=*/is_training());
    x = fc2->forward(x);
    return ipuml::log_softmax(x, /*dim=*/1);
  }

  ipuml::nn::Conv2d conv1;
  ipuml::nn::Conv2d conv2;
  ipuml::nn::FeatureDropout conv2_drop;
  ipuml::nn::Linear fc1;
  ipuml::nn::Linear fc2;
};

// Stands in for MNIST (the original reads ./data): 28x28 images of noise with a bright 6x6
// block whose position is the class, so a few hundred steps learn it.
class BlockDigits : public ipuml::data::DatasetBase<BlockDigits> {
 public:
  BlockDigits(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  ipuml::data::Example get(int64_t i) const {
    check_index(i, n_, "BlockDigits");
    ipuml::Generator gen(seed_ + static_cast<uint64_t>(i));
    const int64_t label = i % 10;
    ipuml::Tensor image = ipuml::mul(ipuml::rand({1, 28, 28}, &gen), 0.3);
    const int64_t r = 2 + 12 * (label / 5), c = 2 + 5 * (label % 5);
    using namespace ipuml::indexing;
    image.index_put_({0, Slice(r, r + 6), Slice(c, c + 4)}, 1.0);
    return {image, ipuml::tensor(label)};
  }
  int64_t size() const { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

template <typename DataLoader>
double train(size_t epoch, Net& model, DataLoader& data_loader, ipuml::optim::Optimizer& optimizer,
             size_t dataset_size) {
  model.train();
  size_t batch_idx = 0;
  double last_loss = 0;
  for (auto& batch : data_loader) {
    // Original: auto data = batch.data.to(device), targets = batch.target.to(device);
    auto data = batch.data, targets = batch.target;
    optimizer.zero_grad();
    auto output = model.forward(data);
    auto loss = ipuml::nll_loss(output, targets);
    REQUIRE_FALSE(std::isnan(loss.template item<float>()));
    loss.backward();
    optimizer.step();
    last_loss = loss.template item<float>();
    if (batch_idx++ % 10 == 0)
      UNSCOPED_INFO("Train Epoch: " << epoch << " [" << batch_idx * batch.data.size(0) << "/"
                                    << dataset_size << "] Loss: " << last_loss);
  }
  return last_loss;
}

template <typename DataLoader>
std::pair<double, double> test(Net& model, DataLoader& data_loader, size_t dataset_size) {
  ipuml::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int32_t correct = 0;
  for (const auto& batch : data_loader) {
    auto data = batch.data, targets = batch.target;
    auto output = model.forward(data);
    test_loss += ipuml::nll_loss(output, targets,
                                 /*weight=*/{}, ipuml::Reduction::Sum)
                     .template item<float>();
    auto pred = output.argmax(1);
    correct += static_cast<int32_t>(pred.eq(targets).sum().template item<int64_t>());
  }
  test_loss /= static_cast<double>(dataset_size);
  return {test_loss, static_cast<double>(correct) / static_cast<double>(dataset_size)};
}

}  // namespace

TEST_CASE("pytorch/examples cpp/mnist structure trains with LibTorch's idioms",
          "[libtorch][mnist-port]") {
  ipuml::manual_seed(1);
  Net model;
  // Original: model.to(device);

  // Original: torch::data::datasets::MNIST(kDataRoot).map(Normalize<>(0.1307, 0.3081)) ...
  auto train_dataset = BlockDigits(1280, 100)
                           .map(ipuml::data::transforms::Normalize(0.1307, 0.3081))
                           .map(ipuml::data::transforms::Stack<>());
  // Original: train_dataset.size().value();
  const size_t train_dataset_size = static_cast<size_t>(train_dataset.size());
  auto train_loader = ipuml::data::make_data_loader<ipuml::data::samplers::SequentialSampler>(
      std::move(train_dataset), kTrainBatchSize);

  auto test_dataset = BlockDigits(500, 900000)
                          .map(ipuml::data::transforms::Normalize(0.1307, 0.3081))
                          .map(ipuml::data::transforms::Stack<>());
  const size_t test_dataset_size = static_cast<size_t>(test_dataset.size());
  auto test_loader = ipuml::data::make_data_loader(std::move(test_dataset), kTestBatchSize);

  ipuml::optim::SGD optimizer(model.parameters(), ipuml::optim::SGDOptions(0.01).momentum(0.5));

  const auto [loss_before, accuracy_before] = test(model, *test_loader, test_dataset_size);
  double loss = 0, accuracy = 0;
  for (size_t epoch = 1; epoch <= kNumberOfEpochs; ++epoch) {
    train(epoch, model, *train_loader, optimizer, train_dataset_size);
    std::tie(loss, accuracy) = test(model, *test_loader, test_dataset_size);
  }
  INFO("test loss " << loss_before << " -> " << loss << ", accuracy " << accuracy_before << " -> "
                    << accuracy);
  CHECK(loss < 0.5 * loss_before);
  CHECK(accuracy > 0.9);
  // The same names as LibTorch's state dict (conv2_drop has none).
  std::vector<std::string> keys;
  for (const auto& item : model.named_parameters()) keys.push_back(item.key());
  CHECK(keys == std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                         "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
}

TEST_CASE("datasets::MNIST takes LibTorch's root and Mode", "[libtorch][mnist-port]") {
  const std::string dir = ipuml::testing::cached_mnist_dir();
  if (dir.empty()) return;
  using ipuml::datasets::MNIST;
  auto test_set = MNIST(dir, MNIST::Mode::kTest)
                      .map(ipuml::data::transforms::Normalize(0.1307, 0.3081))
                      .map(ipuml::data::transforms::Stack<>());
  CHECK(test_set.size() == 10000);
  CHECK(MNIST(dir).size() == 60000);
  auto loader = ipuml::data::make_data_loader<ipuml::data::samplers::SequentialSampler>(
      std::move(test_set), 1000);
  int64_t batches = 0;
  for (const auto& batch : *loader) {
    CHECK(batch.data.shape() == ipuml::Shape{1000, 1, 28, 28});
    CHECK(batch.target.shape() == ipuml::Shape{1000});
    ++batches;
  }
  CHECK(batches == 10);
}
