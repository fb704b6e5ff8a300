// The meta device: tensors with shapes and no values, so that a model of any size can be built,
// traced and sized. Its estimate must equal the estimate of the same model built with values,
// and reading a value must be refused by name.
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

#include "../support/error_of.hpp"

using namespace ipuml;
using testing::error_of;

namespace {

struct WideImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr}, head{nullptr};
  explicit WideImpl(int64_t w) : nn::Module("Wide") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(w, w)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(w, w)));
    head = register_module("head", nn::Linear(nn::LinearOptions(w, 10)));
  }
  Tensor forward(const Tensor& x) override { return head(gelu(l2(relu(l1(x))))); }
};
IPUML_MODULE(Wide);

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

// Resident memory of this process in bytes (Linux), 0 where /proc is not there.
size_t resident_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

runtime::Estimate estimate_on(const std::string& backend, bool meta, int64_t w, int64_t batch) {
  manual_seed(7);
  std::optional<DefaultDeviceGuard> guard;
  if (meta) guard.emplace(kMeta);
  Wide model(w);
  optim::Adam adam(model->parameters(), optim::AdamOptions(1e-3));
  guard.reset();
  Options o;
  o.showCompilationProgressBar(false).backend(backend).compileOnly(true);
  auto tm = trainingModel(model.ptr(), o, adam, ce());
  return tm.estimate(zeros({batch, w}), zeros({batch}, kInt64));
}

}  // namespace

TEST_CASE("meta device: factories and modules under the guard make shapes without values",
          "[meta]") {
  CHECK(Device("meta").is_meta());
  CHECK(Device("meta").str() == "meta");
  CHECK(default_device().is_cpu());
  CHECK(error_of([] { Device d(kMeta, 1); }).find("meta device has one index") !=
        std::string::npos);
  {
    DefaultDeviceGuard meta(kMeta);
    CHECK(default_device().is_meta());
    // Another thread keeps its own default.
    bool other_cpu = false;
    std::thread([&] { other_cpu = zeros({2}).device().is_cpu(); }).join();
    CHECK(other_cpu);
    nn::Linear l(nn::LinearOptions(3, 5));
    CHECK(l->weight.is_meta());
    CHECK(l->weight.shape() == Shape{5, 3});
    CHECK(l->bias.is_meta());
    CHECK(randn({4, 4}).is_meta());
    CHECK(empty({2, 2}).is_meta());
    CHECK(zeros({2}, TensorOptions(kFloat16)).dtype() == kFloat16);
    CHECK(zeros({2}, TensorOptions(kFloat16)).is_meta());
    // An explicit device wins over the default.
    CHECK(zeros({2}, TensorOptions().device(kCPU)).device().is_cpu());
  }
  CHECK(default_device().is_cpu());
  CHECK(zeros({2}).device().is_cpu());
  // A meta tensor made with options outside a guard.
  CHECK(ones({3, 3}, TensorOptions().device(kMeta)).is_meta());
}

TEST_CASE("meta device: ops and autograd infer shapes and dtypes and run no kernel", "[meta]") {
  Tensor a = randn({8, 16}, TensorOptions().device(kMeta).requires_grad(true));
  Tensor b = randn({16, 4}, TensorOptions().device(kMeta));
  Tensor y = softmax(matmul(a, b).transpose(0, 1).contiguous(), -1).to(kFloat16);
  CHECK(y.is_meta());
  CHECK(y.shape() == Shape{4, 8});
  CHECK(y.dtype() == kFloat16);
  Tensor loss = y.to(kFloat32).sum();
  loss.backward();
  REQUIRE(a.grad().defined());
  CHECK(a.grad().is_meta());
  CHECK(a.grad().shape() == Shape{8, 16});
  // In place: nothing to write, the version still moves as PyTorch's does.
  Tensor c = zeros({2, 2}, TensorOptions().device(kMeta));
  c.add_(1.0);
  c.copy_(ones({2, 2}));  // from the CPU into meta: allowed, writes nothing
  CHECK(c.is_meta());
  std::ostringstream os;
  os << c;
  CHECK(os.str() == "tensor(..., device='meta', size=[2, 2], dtype=float32)");
}

TEST_CASE("meta device: reading a value is refused by name", "[meta]") {
  Tensor m = zeros({3, 4}, TensorOptions().device(kMeta));
  for (const std::string& e :
       {error_of([&] { (void)m.to_vector<float>(); }),
        error_of([&] { (void)m.sum().item<float>(); }), error_of([&] { (void)m.to(kCPU); })}) {
    INFO(e);
    CHECK(e.find("meta device") != std::string::npos);
    CHECK((e.find("[3, 4]") != std::string::npos || e.find("[]") != std::string::npos));
  }
  // Mixing a meta tensor with a CPU one names both devices.
  const std::string mixed = error_of([&] { (void)add(m, ones({3, 4})); });
  CHECK(mixed.find("meta") != std::string::npos);
  CHECK(mixed.find("cpu") != std::string::npos);
}

TEST_CASE("meta device: a model built on it estimates exactly as the same model with values",
          "[meta][estimate]") {
  for (const std::string backend : {"ipu", "cerebras"}) {
    INFO(backend);
    const runtime::Estimate real = estimate_on(backend, false, 64, 16);
    const runtime::Estimate meta = estimate_on(backend, true, 64, 16);
    CHECK(meta.call_seconds == real.call_seconds);
    CHECK(meta.memory.fits == real.memory.fits);
    CHECK(meta.memory.device_bytes == real.memory.device_bytes);
    CHECK(meta.memory.categories == real.memory.categories);
    CHECK(meta.target == real.target);
  }
}

TEST_CASE("meta device: a model of 8.6 GB of fp32 weights is sized without allocating them",
          "[meta][estimate]") {
  const size_t before = resident_bytes();
  // 2 x 32768^2 weights: 2.1 billion parameters, 8.6 GB; Adam's two moments make it 26 GB.
  const runtime::Estimate e = estimate_on("cerebras", true, 32768, 8);
  const size_t after = resident_bytes();
  if (before > 0)
    CHECK(after < before + (size_t{1} << 30));  // well under one of its 26 GB with Adam
  CHECK(e.samples_per_second() > 0);
  INFO(e.target);
  CHECK(e.target.find("weight streaming (pipelined execution would need") != std::string::npos);
  // A meta model compiled to run is refused when it would need values.
  DefaultDeviceGuard meta(kMeta);
  Wide model(16);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1));
  Options o;
  o.showCompilationProgressBar(false).backend("cerebras");
  auto tm = trainingModel(model.ptr(), o, sgd, ce());
  DefaultDeviceGuard cpu(kCPU);
  const std::string err = error_of([&] { tm(zeros({4, 16}), zeros({4}, kInt64)); });
  INFO(err);
  CHECK(err.find("meta device") != std::string::npos);
}
