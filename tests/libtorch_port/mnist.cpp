// pytorch/examples' cpp/mnist/mnist.cpp (its first version, commit 29a38c6), with only the include
// (<torch/torch.h> -> <ipuml/libtorch.hpp>) and the namespace (torch:: -> ipuml::) changed;
// everything below the licence is the original, line for line (clang-format is off so that
// `sed 's/torch::/ipuml::/g'` of the original gives this file's code). Run by ctest as
// libtorch_port_mnist (tests/libtorch_port/run_mnist.sh) on the cached MNIST files.
//
// BSD 3-Clause License
//
// Copyright (c) 2017 Pytorch contributors,
// All rights reserved.
//
// Redistribution and use in source and binary forms, with or without
// modification, are permitted provided that the following conditions are met:
//
// * Redistributions of source code must retain the above copyright notice, this
//   list of conditions and the following disclaimer.
//
// * Redistributions in binary form must reproduce the above copyright notice,
//   this list of conditions and the following disclaimer in the documentation
//   and/or other materials provided with the distribution.
//
// * Neither the name of the copyright holder nor the names of its
//   contributors may be used to endorse or promote products derived from
//   this software without specific prior written permission.
//
// THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS"
// AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
// IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE
// DISCLAIMED. IN NO EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE
// FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
// DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS OR
// SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
// CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY,
// OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
// OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

// clang-format off
#include <ipuml/libtorch.hpp>

#include <cstddef>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

// Where to find the MNIST dataset.
const char* kDataRoot = "./data";

// The batch size for training.
const int64_t kTrainBatchSize = 64;

// The batch size for testing.
const int64_t kTestBatchSize = 1000;

// The number of epochs to train.
const int64_t kNumberOfEpochs = 10;

// After how many batches to log a new update with the loss value.
const int64_t kLogInterval = 10;

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
    x = ipuml::relu(
        ipuml::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
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

template <typename DataLoader>
void train(
    int32_t epoch,
    Net& model,
    ipuml::Device device,
    DataLoader& data_loader,
    ipuml::optim::Optimizer& optimizer,
    size_t dataset_size) {
  model.train();
  size_t batch_idx = 0;
  for (auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    optimizer.zero_grad();
    auto output = model.forward(data);
    auto loss = ipuml::nll_loss(output, targets);
    AT_ASSERT(!std::isnan(loss.template item<float>()));
    loss.backward();
    optimizer.step();

    if (batch_idx++ % kLogInterval == 0) {
      std::printf(
          "\rTrain Epoch: %ld [%5ld/%5ld] Loss: %.4f",
          epoch,
          batch_idx * batch.data.size(0),
          dataset_size,
          loss.template item<float>());
    }
  }
}

template <typename DataLoader>
void test(
    Net& model,
    ipuml::Device device,
    DataLoader& data_loader,
    size_t dataset_size) {
  ipuml::NoGradGuard no_grad;
  model.eval();
  double test_loss = 0;
  int32_t correct = 0;
  for (const auto& batch : data_loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    auto output = model.forward(data);
    test_loss += ipuml::nll_loss(
                     output,
                     targets,
                     /*weight=*/{},
                     Reduction::Sum)
                     .template item<float>();
    auto pred = output.argmax(1);
    correct += pred.eq(targets).sum().template item<int64_t>();
  }

  test_loss /= dataset_size;
  std::printf(
      "\nTest set: Average loss: %.4f | Accuracy: %.3f\n",
      test_loss,
      static_cast<double>(correct) / dataset_size);
}

auto main() -> int {
  ipuml::manual_seed(1);

  ipuml::DeviceType device_type;
  if (ipuml::cuda::is_available()) {
    std::cout << "CUDA available! Training on GPU." << std::endl;
    device_type = ipuml::kCUDA;
  } else {
    std::cout << "Training on CPU." << std::endl;
    device_type = ipuml::kCPU;
  }
  ipuml::Device device(device_type);

  Net model;
  model.to(device);

  auto train_dataset = ipuml::data::datasets::MNIST(kDataRoot)
                           .map(ipuml::data::transforms::Normalize<>(0.1307, 0.3081))
                           .map(ipuml::data::transforms::Stack<>());
  const size_t train_dataset_size = train_dataset.size().value();
  auto train_loader =
      ipuml::data::make_data_loader<ipuml::data::samplers::SequentialSampler>(
          std::move(train_dataset), kTrainBatchSize);

  auto test_dataset = ipuml::data::datasets::MNIST(
                          kDataRoot, ipuml::data::datasets::MNIST::Mode::kTest)
                          .map(ipuml::data::transforms::Normalize<>(0.1307, 0.3081))
                          .map(ipuml::data::transforms::Stack<>());
  const size_t test_dataset_size = test_dataset.size().value();
  auto test_loader =
      ipuml::data::make_data_loader(std::move(test_dataset), kTestBatchSize);

  ipuml::optim::SGD optimizer(
      model.parameters(), ipuml::optim::SGDOptions(0.01).momentum(0.5));

  for (size_t epoch = 1; epoch <= kNumberOfEpochs; ++epoch) {
    train(epoch, model, device, *train_loader, optimizer, train_dataset_size);
    test(model, device, *test_loader, test_dataset_size);
  }
}
