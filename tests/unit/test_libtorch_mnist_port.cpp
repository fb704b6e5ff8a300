// The quick, file-free variant of pytorch/examples' cpp/mnist/mnist.cpp: the literal port
// (tests/libtorch_port/mnist.cpp, only the include and the namespace changed) trains on the real
// MNIST under ctest; this one keeps its code (a Net struct deriving nn::Module with holders
// registered by name, FeatureDropout, max_pool2d(x, 2), view({-1, 320}), dropout(x, p,
// is_training()), log_softmax, train/test loops templated on the loader taking a Device and
// optim::Optimizer&, AT_ASSERT, nll_loss(out, t, /*weight=*/{}, Reduction::Sum),
// argmax(1).eq(t).sum(), cuda::is_available() choosing the device, model.to(device),
// .map(Normalize<>(...)).map(Stack<>()), size().value() and make_data_loader<SequentialSampler>)
// on a generated data set and fewer, smaller batches, and checks the numbers instead of printing
// them. Those differences are marked "Original:". Below it, the pieces the port relies on are
// checked one by one: data::datasets::MNIST(root, Mode), the dataset size type, Normalize<> and
// the compat header's AT_ASSERT / TORCH_CHECK.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <ipuml/libtorch.hpp>
#include "../support/error_of.hpp"
#include "../support/mnist_cache.hpp"

namespace {

constexpr int64_t kTrainBatchSize = 64;
constexpr int64_t kTestBatchSize = 250;  // Original: 1000
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
double train(int32_t epoch, Net& model, ipuml::Device device, DataLoader& data_loader,
             ipuml::optim::Optimizer& optimizer, size_t dataset_size) {
  model.train();
  size_t batch_idx = 0;
  double last_loss = 0;
  for (auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model.forward(data);
    auto loss = ipuml::nll_loss(output, targets);
    AT_ASSERT(!std::isnan(loss.template item<float>()));
    loss.backward();
    optimizer.step();
    last_loss = loss.template item<float>();
    // Original: std::printf("\rTrain Epoch: %ld [%5ld/%5ld] Loss: %.4f", ...);
    if (batch_idx++ % 10 == 0)
      UNSCOPED_INFO("Train Epoch: " << epoch << " [" << batch_idx * batch.data.size(0) << "/"
                                    << dataset_size << "] Loss: " << last_loss);
  }
  return last_loss;
}

// Original: void test(...), printing the average loss and the accuracy.
template <typename DataLoader>
std::pair<double, double> test(Net& model, ipuml::Device device, DataLoader& data_loader,
                               size_t dataset_size) {
  ipuml::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int32_t correct = 0;
  for (const auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    auto output = model.forward(data);
    test_loss += ipuml::nll_loss(output, targets,
                                 /*weight=*/{}, Reduction::Sum)
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

  ipuml::DeviceType device_type;
  if (ipuml::cuda::is_available()) {
    device_type = ipuml::kCUDA;
  } else {
    device_type = ipuml::kCPU;
  }
  CHECK(device_type == ipuml::kCPU);
  ipuml::Device device(device_type);

  Net model;
  model.to(device);

  // Original: ipuml::data::datasets::MNIST(kDataRoot).map(...)
  auto train_dataset = BlockDigits(1280, 100)
                           .map(ipuml::data::transforms::Normalize<>(0.1307, 0.3081))
                           .map(ipuml::data::transforms::Stack<>());
  const size_t train_dataset_size = train_dataset.size().value();
  auto train_loader = ipuml::data::make_data_loader<ipuml::data::samplers::SequentialSampler>(
      std::move(train_dataset), kTrainBatchSize);

  // Original: ipuml::data::datasets::MNIST(kDataRoot, MNIST::Mode::kTest).map(...)
  auto test_dataset = BlockDigits(500, 900000)
                          .map(ipuml::data::transforms::Normalize<>(0.1307, 0.3081))
                          .map(ipuml::data::transforms::Stack<>());
  const size_t test_dataset_size = test_dataset.size().value();
  auto test_loader = ipuml::data::make_data_loader(std::move(test_dataset), kTestBatchSize);

  ipuml::optim::SGD optimizer(model.parameters(), ipuml::optim::SGDOptions(0.01).momentum(0.5));

  const auto [loss_before, accuracy_before] = test(model, device, *test_loader, test_dataset_size);
  double loss = 0, accuracy = 0;
  for (size_t epoch = 1; epoch <= kNumberOfEpochs; ++epoch) {
    train(static_cast<int32_t>(epoch), model, device, *train_loader, optimizer, train_dataset_size);
    std::tie(loss, accuracy) = test(model, device, *test_loader, test_dataset_size);
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

TEST_CASE("data::datasets::MNIST takes LibTorch's root and Mode", "[libtorch][mnist-port]") {
  const std::string dir = ipuml::testing::cached_mnist_dir();
  if (dir.empty()) return;
  using ipuml::data::datasets::MNIST;
  auto test_set = MNIST(dir, MNIST::Mode::kTest)
                      .map(ipuml::data::transforms::Normalize<>(0.1307, 0.3081))
                      .map(ipuml::data::transforms::Stack<>());
  CHECK(test_set.size().value() == 10000);
  CHECK(test_set.size() == 10000);
  CHECK(MNIST(dir).size().value() == 60000);
  // ipuml's own spelling names the same class.
  static_assert(std::is_same_v<ipuml::datasets::MNIST, MNIST>);
  auto loader = ipuml::data::make_data_loader<ipuml::data::samplers::SequentialSampler>(
      std::move(test_set), 1000);
  int64_t batches = 0;
  for (const auto& batch : *loader) {
    CHECK(batch.data.shape() == ipuml::Shape{1000, 1, 28, 28});
    CHECK(batch.target.shape() == ipuml::Shape{1000});
    if (batches++ > 0) continue;
    // The first test image is a 7, and its corner is background: (0 - 0.1307) / 0.3081.
    CHECK(batch.target.index({0}).item<int64_t>() == 7);
    CHECK(batch.data.index({0, 0, 0, 0}).item<float>() ==
          Approx((0.0 - 0.1307) / 0.3081).epsilon(1e-6));
  }
  CHECK(batches == 10);
}

TEST_CASE("a mapped dataset's size reads as a count and as LibTorch's optional",
          "[libtorch][mnist-port]") {
  auto mapped = BlockDigits(37, 1)
                    .map(ipuml::data::transforms::Normalize<>(0.5, 0.25))
                    .map(ipuml::data::transforms::Stack<>());
  const auto size = mapped.size();
  static_assert(std::is_same_v<decltype(size), const ipuml::data::DatasetSize>);
  CHECK(size.has_value());
  CHECK(size.value() == size_t{37});
  CHECK(*size == size_t{37});
  const int64_t as_count = size;
  CHECK(as_count == 37);
  CHECK(static_cast<size_t>(mapped.size()) == 37);
  CHECK(mapped.size() - 7 == 30);
  static_assert(ipuml::data::Dataset<decltype(mapped)>);
}

TEST_CASE("Normalize is a class template with a default argument, as LibTorch's",
          "[libtorch][mnist-port]") {
  ipuml::data::transforms::Normalize<> templ(0.5, 0.25);
  ipuml::data::transforms::Normalize deduced(0.5, 0.25);  // class template argument deduction
  static_assert(std::is_same_v<decltype(templ), decltype(deduced)>);
  ipuml::data::Example e{ipuml::tensor({1.f, 0.f, 0.75f}), ipuml::tensor(int64_t{3})};
  const auto out = templ(e).data.to_vector<float>();
  CHECK(out == std::vector<float>{2.f, -2.f, 1.f});
}

TEST_CASE("AT_ASSERT and TORCH_CHECK throw ipuml::Error naming the condition and the place",
          "[libtorch][mnist-port]") {
  using Catch::Matchers::Contains;
  using ipuml::testing::error_of;
  AT_ASSERT(1 + 1 == 2);
  TORCH_CHECK(true, "never shown");
  const std::string a = error_of([] { AT_ASSERT(!std::isnan(std::nan(""))); });
  CHECK_THAT(a, Contains("AT_ASSERT(!std::isnan(std::nan(\"\"))) failed at ") &&
                    Contains("test_libtorch_mnist_port.cpp:"));
  const int64_t n = 3;
  const std::string t = error_of([&] { TORCH_CHECK(n == 4, "expected 4 samples, got ", n); });
  CHECK_THAT(t,
             Contains("TORCH_CHECK(n == 4) failed at ") && Contains(": expected 4 samples, got 3"));
  CHECK_THAT(error_of([] { TORCH_CHECK(false); }), Contains("TORCH_CHECK(false) failed at "));
}
