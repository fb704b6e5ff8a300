// Devices: parsing and printing, TensorOptions factories, .to(device), Module::to(device),
// mixed-device errors, the eager IPU device's cached programs and cycles, and a toy backend
// registered from this file (eager Add only; every other op falls back to the CPU, reported once;
// one compile option of its own), options routed by backend name, and the optional profiling
// interface.
#include <atomic>
#include <iostream>
#include <sstream>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

using namespace ipuml;
using Catch::Contains;

namespace {

std::atomic<int> toy_adds{0};
backend::ProgramOptions toy_program;
std::string toy_label;

// The smallest backend: its own device type, eager Add on float32, compiled graphs handed to the
// CPU executor (so the conformance suite runs it like any other backend).
class ToyBackend : public backend::Backend {
 public:
  std::string name() const override { return "toy"; }
  std::vector<backend::DeviceInfo> devices() const override {
    backend::DeviceInfo d;
    d.name = "toy";
    d.description = "a test backend: eager add, everything else on the CPU";
    return {d};
  }
  bool supports(ir::OpKind) const override { return true; }
  // Its one option of its own, "label", is recorded with the program options it was given.
  std::unique_ptr<backend::Executable> compile(
      const ir::Graph& g, const backend::ProgramOptions& program,
      const backend::CompileOptions& options) const override {
    backend::CompileOptions rest = options;
    toy_program = program;
    toy_label = rest.count("label") ? rest.at("label") : "";
    rest.erase("label");
    return backend::get_backend("cpu")->compile(g, program, rest);
  }
  std::optional<DeviceType> eager_device_type() const override {
    return register_device_type("toy");
  }
  bool supports_op(ir::OpKind kind, const ir::Attrs&,
                   const std::vector<ir::TensorMeta>& inputs) const override {
    if (kind != ir::OpKind::Add) return false;
    for (auto& m : inputs)
      if (m.dtype != kFloat32) return false;
    return true;
  }
  void run_eager(Device, ir::OpKind kind, const ir::Attrs& attrs, const std::vector<Tensor>& inputs,
                 std::vector<Tensor>& outputs) const override {
    ++toy_adds;
    backend::get_backend("cpu")->run_eager(Device(), kind, attrs, inputs, outputs);
  }
};

IPUML_REGISTER_BACKEND(ToyBackend);

void require_close(const Tensor& got, const Tensor& want, double tol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  auto g = got.to_vector<double>();
  auto w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i)
    REQUIRE(std::abs(g[i] - w[i]) <= tol * std::max(1.0, std::abs(w[i])));
}

// Captures std::cerr for its lifetime.
class CerrCapture {
 public:
  CerrCapture() : old_(std::cerr.rdbuf(buf_.rdbuf())) {}
  ~CerrCapture() { std::cerr.rdbuf(old_); }
  std::string text() const { return buf_.str(); }

 private:
  std::ostringstream buf_;
  std::streambuf* old_;
};

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("devices parse and print as in LibTorch", "[devices]") {
  const Device d("ipu:1");
  CHECK(d.type() == kIPU);
  CHECK(d.index() == 1);
  CHECK(d.is_ipu());
  CHECK(d.str() == "ipu:1");
  CHECK(Device("cpu") == Device(kCPU));
  CHECK(Device("cpu:0").is_cpu());
  CHECK(Device("ipu") == Device(kIPU, 0));
  CHECK(Device(kCPU).str() == "cpu");
  CHECK(Device(kIPU, 0) != Device(kIPU, 1));
  std::ostringstream os;
  os << Device(kIPU, 3) << ' ' << kCPU;
  CHECK(os.str() == "ipu:3 cpu");
  CHECK(Device("toy:2").type() == register_device_type("toy"));
  CHECK(Device("toy:2").str() == "toy:2");
  CHECK_THROWS_WITH(Device("gpu:0"), Contains("unknown device type 'gpu'") && Contains("cpu, ipu"));
  CHECK_THROWS_WITH(Device("ipu:x"), Contains("non-negative index"));
  CHECK_THROWS_WITH(Device("ipu:-1"), Contains("non-negative index"));
  CHECK_THROWS_WITH(Device("ipu:"), Contains("non-negative index"));
  CHECK_THROWS_WITH(Device(kCPU, 1), Contains("one device"));
  CHECK_THROWS_WITH(Device(kIPU, -2), Contains("index must be >= 0"));
  CHECK_THROWS_WITH(register_device_type("Bad Name"), Contains("invalid name"));
}

TEST_CASE("factories take TensorOptions", "[devices]") {
  Tensor z = zeros({2, 3}, TensorOptions().dtype(kInt32).device(kIPU));
  CHECK(z.device() == Device(kIPU, 0));
  CHECK(z.dtype() == kInt32);
  CHECK(z.to_vector<int32_t>() == std::vector<int32_t>(6, 0));
  CHECK(zeros_like(z).device() == Device(kIPU));

  Tensor o = ones({2}, TensorOptions().requires_grad(true));
  CHECK(o.requires_grad());
  CHECK(o.device().is_cpu());
  CHECK(o.dtype() == kFloat32);

  Tensor f = full({2}, 2.5, Device("ipu:1"));
  CHECK(f.device() == Device(kIPU, 1));
  CHECK(f.to_vector<float>() == std::vector<float>{2.5f, 2.5f});

  Tensor r = randint(0, 5, {4}, Device("ipu:1"));
  CHECK(r.dtype() == kInt64);
  CHECK(r.device() == Device(kIPU, 1));
  CHECK(randint(0, 5, {4}, kInt32).dtype() == kInt32);

  Tensor a = arange(4, TensorOptions().device(kIPU));
  CHECK(a.dtype() == kInt64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(arange(0.0, 2.0, 0.5, TensorOptions(kFloat32)).numel() == 4);

  Generator g1(3), g2(3);
  Tensor n1 = randn({5}, TensorOptions().device(kIPU), &g1);
  Tensor n2 = randn({5}, &g2);
  CHECK(n1.device() == Device(kIPU));
  CHECK(n1.to_vector<float>() == n2.to_vector<float>());
  CHECK(empty({3}, TensorOptions().device(kIPU).dtype(kFloat16)).dtype() == kFloat16);
  // The DType overloads still choose themselves.
  CHECK(zeros({2}, kInt64).dtype() == kInt64);
}

TEST_CASE("to(device) copies and gradients flow back", "[devices]") {
  Generator g(1);
  Tensor a = randn({3, 4}, &g);
  Tensor b = a.to(Device("ipu:0"));
  CHECK(b.device() == Device(kIPU));
  CHECK(b.impl()->storage != a.impl()->storage);
  CHECK(b.to_vector<float>() == a.to_vector<float>());
  CHECK(a.to(kCPU).same(a));
  CHECK(b.to(kIPU).same(b));
  Tensor h = b.to(kCPU, kFloat16);
  CHECK(h.device().is_cpu());
  CHECK(h.dtype() == kFloat16);
  require_close(h, a, 1e-3);
  // A strided view arrives contiguous with its own values.
  Tensor t = a.t().to(kIPU);
  CHECK(t.is_contiguous());
  CHECK(t.to_vector<float>() == a.t().contiguous().to_vector<float>());
  CHECK(a.cpu().same(a));

  Tensor x = randn({3}, &g).requires_grad_();
  Tensor y = (x.to(kIPU) * 3.0).sum();
  CHECK(y.device() == Device(kIPU));
  y.backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().device().is_cpu());
  CHECK(x.grad().to_vector<float>() == std::vector<float>{3.f, 3.f, 3.f});
}

TEST_CASE("ops on tensors of different devices are refused", "[devices][errors]") {
  Tensor c = ones({2, 2});
  Tensor i = ones({2, 2}, Device(kIPU));
  CHECK_THROWS_WITH(add(c, i), Contains("Add: expected all tensors on the same device") &&
                                   Contains("cpu") && Contains("ipu:0") && Contains(".to(device)"));
  CHECK_THROWS_WITH(matmul(i, ones({2, 2}, Device("ipu:1"))),
                    Contains("ipu:0") && Contains("ipu:1"));
  {
    NoGradGuard ng;
    CHECK_THROWS_WITH(c.add_(i), Contains("same device") && Contains("ipu:0"));
    CHECK_THROWS_WITH(i.copy_(c), Contains("in-place") && Contains("cpu"));
    // In-place ops on a device tensor run there and write its bytes.
    i.mul_(3.0);
    i.add_(ones({2, 2}, Device(kIPU)));
    CHECK(i.to_vector<float>() == std::vector<float>(4, 4.f));
    i.fill_(1.5);
    CHECK(i.to_vector<float>() == std::vector<float>(4, 1.5f));
  }
  // A 0-dim CPU tensor goes with any device, as in LibTorch.
  Tensor s = i * scalar_tensor(2.0);
  CHECK(s.device() == Device(kIPU));
  CHECK(s.to_vector<float>() == std::vector<float>(4, 3.f));
}

TEST_CASE("kCUDA is a device type by name that no backend serves", "[devices][errors]") {
  // LibTorch code picks its device with cuda::is_available(); here it is always false.
  CHECK_FALSE(cuda::is_available());
  CHECK(cuda::device_count() == 0);
  CHECK(Device("cuda").type() == kCUDA);
  CHECK(Device("cuda:1") == Device(kCUDA, 1));
  CHECK(Device(kCUDA).str() == "cuda:0");
  CHECK(device_type_name(kCUDA) == "cuda");
  CHECK(find_device_type("cuda") == kCUDA);
  for (const Device& d : backend::eager_devices()) CHECK(d.type() != kCUDA);

  // Moving anything there is refused up front, with what to do instead; nothing moves.
  Tensor a = ones({2, 2});
  CHECK_THROWS_WITH(a.to(Device(kCUDA)), Contains("no backend runs tensors on device cuda:0") &&
                                             Contains("ipuml has no CUDA backend") &&
                                             Contains("cuda::is_available() is false") &&
                                             Contains("cpu"));
  CHECK_THROWS_WITH(zeros({2}, TensorOptions().device(kCUDA)), Contains("cuda:0"));
  nn::Linear lin(nn::LinearOptions(2, 2));
  const auto before = lin->weight.to_vector<float>();
  CHECK_THROWS_WITH(lin->to(Device(kCUDA)), Contains("no CUDA backend"));
  CHECK(lin->weight.device().is_cpu());
  CHECK(lin->weight.to_vector<float>() == before);
  // A type registered without kernels is refused the same way.
  const DeviceType bare = register_device_type("bare_test_device");
  CHECK_THROWS_WITH(a.to(Device(bare)), Contains("no backend runs tensors on device "
                                                 "bare_test_device:0") &&
                                            !Contains("CUDA"));
}

TEST_CASE("Module::to moves parameters in place and optimizers keep stepping them", "[devices]") {
  Generator g(7);
  nn::Linear cpu_lin(nn::LinearOptions(4, 3));
  nn::Linear dev_lin(nn::LinearOptions(4, 3));
  {
    NoGradGuard ng;
    dev_lin->weight.copy_(cpu_lin->weight);
    dev_lin->bias.copy_(cpu_lin->bias);
  }
  optim::SGD cpu_sgd(cpu_lin->parameters(), optim::SGDOptions(0.1));
  optim::SGD dev_sgd(dev_lin->parameters(), optim::SGDOptions(0.1));
  const Tensor w = dev_lin->weight;
  const auto* impl = w.impl();
  dev_lin->to(Device(kIPU));
  CHECK(dev_lin->weight.same(w));
  CHECK(dev_lin->weight.impl() == impl);
  for (auto& p : dev_lin->parameters()) CHECK(p.device() == Device(kIPU));
  for (int step = 0; step < 2; ++step) {
    Tensor x = randn({5, 4}, &g);
    Tensor lc = cpu_lin(x).pow(2.0).mean();
    Tensor ld = dev_lin(x.to(kIPU)).pow(2.0).mean();
    CHECK(ld.device() == Device(kIPU));
    require_close(ld.cpu(), lc);
    cpu_sgd.zero_grad();
    dev_sgd.zero_grad();
    lc.backward();
    ld.backward();
    CHECK(dev_lin->weight.grad().device() == Device(kIPU));
    cpu_sgd.step();
    dev_sgd.step();
    require_close(dev_lin->weight.cpu(), cpu_lin->weight);
    require_close(dev_lin->bias.cpu(), cpu_lin->bias);
  }
  // Back to the CPU, gradients included.
  dev_lin->to(kCPU);
  CHECK(dev_lin->weight.device().is_cpu());
  CHECK(dev_lin->weight.grad().device().is_cpu());
}

TEST_CASE("the eager IPU device runs cached single-op programs and counts cycles",
          "[devices][ipu]") {
  const Device ipu(kIPU, 2);
  ipu::reset_eager_profile(ipu);
  ipu::reset_eager_profile(Device(kIPU, 3));
  Generator g(3);
  Tensor a = randn({16, 32}, &g), b = randn({32, 8}, &g);
  Tensor ai = a.to(ipu), bi = b.to(ipu);
  const int64_t compiled0 = ipu::eager_programs_compiled();
  Tensor c = relu(matmul(ai, bi));
  CHECK(c.device() == ipu);
  require_close(c.cpu(), relu(matmul(a, b)));
  const ipu::EagerProfile p1 = ipu::eager_profile(ipu);
  CHECK(p1.ops >= 2);
  CHECK(p1.cycles > 0);
  CHECK(p1.simulated_seconds > 0);
  CHECK(ipu::eager_cycles(ipu) == p1.cycles);
  const int64_t compiled1 = ipu::eager_programs_compiled();
  CHECK(compiled1 >= compiled0 + 1);
  // The same ops again: no new program, the same cycles once more.
  Tensor c2 = relu(matmul(ai, bi));
  CHECK(ipu::eager_programs_compiled() == compiled1);
  const ipu::EagerProfile p2 = ipu::eager_profile(ipu);
  CHECK(p2.ops == 2 * p1.ops);
  CHECK(p2.cycles == Approx(2 * p1.cycles));
  CHECK(c2.to_vector<float>() == c.to_vector<float>());
  // Another IPU keeps its own count.
  CHECK(ipu::eager_profile(Device(kIPU, 3)).ops == 0);
  ipu::reset_eager_profile(ipu);
  CHECK(ipu::eager_cycles(ipu) == 0);
  CHECK_THROWS_WITH(ipu::eager_profile(Device(kCPU)), Contains("expected an IPU device"));
}

TEST_CASE("a backend registered from a test file runs its ops and falls back for the rest",
          "[devices][backend]") {
  const Device toy("toy");
  REQUIRE(backend::eager_backend(toy.type()) != nullptr);
  CHECK(backend::eager_backend(toy.type())->name() == "toy");
  CHECK(backend::eager_backend(kCPU)->name() == "cpu");
  CHECK(backend::eager_backend(kIPU)->name() == "ipu");
  Tensor a = ones({3}, toy), b = full({3}, 2.0, toy);
  const int adds = toy_adds;
  Tensor c = a + b;
  CHECK(toy_adds == adds + 1);
  CHECK(c.device() == toy);
  CHECK(c.to_vector<float>() == std::vector<float>(3, 3.f));

  backend::reset_fallback_reports();
  std::string err;
  Tensor e;
  {
    CerrCapture capture;
    Tensor d = mul(a, b);
    e = mul(d, b);
    err = capture.text();
  }
  CHECK(count_of(err, "backend 'toy' does not run Mul") == 1);
  CHECK(toy_adds == adds + 1);
  CHECK(e.device() == toy);
  CHECK(e.to_vector<float>() == std::vector<float>(3, 4.f));
}

TEST_CASE("Options.backend names the compiled backend, useIpuModel stays a shorthand",
          "[devices][runtime]") {
  CHECK(Options().backend_name() == "ipu");
  CHECK(Options().useIpuModel(false).backend_name() == "cpu");
  CHECK_FALSE(Options().backend("cpu").use_ipu_model());
  CHECK(Options().backend("toy").backend_name() == "toy");
  CHECK_THROWS_WITH(Options().backend(""), Contains("expected a backend name"));

  // A training step compiled by the toy backend (which hands graphs to the CPU executor) gives
  // eager CPU's numbers.
  Generator g(2);
  nn::Linear eager_lin(nn::LinearOptions(3, 2)), graph_lin(nn::LinearOptions(3, 2));
  {
    NoGradGuard ng;
    graph_lin->weight.copy_(eager_lin->weight);
    graph_lin->bias.copy_(eager_lin->bias);
  }
  optim::SGD eager_sgd(eager_lin->parameters(), optim::SGDOptions(0.1));
  optim::SGD graph_sgd(graph_lin->parameters(), optim::SGDOptions(0.1));
  auto loss_fn = [](const Tensor& out, const Tensor& y) { return mse_loss(out, y); };
  auto tm = trainingModel(graph_lin.ptr(), Options().backend("toy"), graph_sgd, loss_fn);
  Tensor x = randn({4, 3}, &g), y = randn({4, 2}, &g);
  tm(x, y);
  eager_sgd.zero_grad();
  loss_fn(eager_lin(x), y).backward();
  eager_sgd.step();
  require_close(graph_lin->weight, eager_lin->weight);
  CHECK_THROWS_WITH(trainingModel(graph_lin.ptr(), Options().backend("tpu"), graph_sgd, loss_fn),
                    Contains("unknown backend 'tpu'") && Contains("toy"));
}

TEST_CASE("ops that build helper tensors build them on their input's device", "[devices]") {
  const Device dev(kIPU);
  Generator g(4);
  Tensor x = randn({4, 5}, &g);
  Tensor xd = x.to(dev);
  require_close(triu(xd, 1).cpu(), triu(x, 1));
  require_close(xd.tril().cpu(), x.tril());
  Generator g1(9), g2(9);
  Tensor dd = dropout(xd, 0.5, true, &g1);
  CHECK(dd.device() == dev);
  require_close(dd.cpu(), dropout(x, 0.5, true, &g2));

  // Slicing's backward scatters through an index it makes.
  Tensor leaf = zeros({2, 5}, TensorOptions().device(dev).requires_grad(true));
  leaf.slice(1, 1, 5, 2).sum().backward();
  REQUIRE(leaf.grad().defined());
  CHECK(leaf.grad().device() == dev);
  CHECK(leaf.grad().to_vector<float>() ==
        std::vector<float>{0.f, 1.f, 0.f, 1.f, 0.f, 0.f, 1.f, 0.f, 1.f, 0.f});

  Tensor q = randn({1, 2, 4, 8}, &g);
  Tensor qd = q.to(dev);
  Tensor causal = scaled_dot_product_attention(qd, qd, qd, Tensor(), 0.0, true);
  CHECK(causal.device() == dev);
  require_close(causal.cpu(), scaled_dot_product_attention(q, q, q, Tensor(), 0.0, true));

  Tensor w = zeros({3, 3}, dev);
  nn::init::uniform_(w, -1.0, 1.0);
  CHECK(w.device() == dev);
  CHECK(w.abs().sum().item<float>() > 0.f);
}

TEST_CASE("a backend gets the program options and only its own options",
          "[devices][backend][runtime]") {
  nn::Linear lin(nn::LinearOptions(3, 2));
  optim::SGD sgd(lin->parameters(), optim::SGDOptions(0.1));
  auto loss_fn = [](const Tensor& out, const Tensor& y) { return mse_loss(out, y); };
  Generator g(6);
  Tensor x = randn({4, 3}, &g), y = randn({4, 2}, &g);
  // IPU options set through PopTorch's setters go to the ipu backend only.
  auto opts = Options()
                  .backend("toy")
                  .backendOption("toy", "label", "blue")
                  .setAvailableMemoryProportion(0.3)
                  .target("ipu21")
                  .modelName("net")
                  .deviceIterations(2);
  opts.Precision.setPartialsType(kFloat16);
  auto tm = trainingModel(lin.ptr(), opts, sgd, loss_fn);
  tm(cat({x, x}, 0), cat({y, y}, 0));
  CHECK(toy_label == "blue");
  CHECK(toy_program.name == "net");  // plain SGD updates inside the step: one program
  CHECK(toy_program.training);
  CHECK(toy_program.device_iterations == 2);
  CHECK(toy_program.replicas == 1);
  CHECK(toy_program.devices_per_replica == 1);
  CHECK(toy_program.partials_type == kFloat16);
  CHECK(opts.backend_options("ipu").at("available_memory_proportion") == "0.29999999999999999");
  CHECK(opts.backend_options("ipu").at("target") == "ipu21");
  CHECK(opts.backend_options("cpu").empty());

  // A key the backend does not know is refused by it, naming the key.
  nn::Linear lin2(nn::LinearOptions(3, 2));
  optim::SGD sgd2(lin2->parameters(), optim::SGDOptions(0.1));
  auto bad = trainingModel(
      lin2.ptr(), Options().backend("cpu").backendOption("cpu", "colour", "red"), sgd2, loss_fn);
  CHECK_THROWS_WITH(bad(x, y), Contains("cpu backend: unknown compile option 'colour'"));
  auto bad_ipu =
      trainingModel(lin2.ptr(), Options().backendOption("ipu", "colour", "red"), sgd2, loss_fn);
  CHECK_THROWS_WITH(bad_ipu(x, y), Contains("ipu backend: unknown compile option 'colour'") &&
                                       Contains("expected target"));
  auto bad_target = trainingModel(lin2.ptr(), Options().target("ipu21"), sgd2, loss_fn);
  CHECK_THROWS_WITH(bad_target(x, y), Contains("ipu21"));
  CHECK_THROWS_WITH(Options().setTargetOption("num_ipus=2;x", "1"), Contains("setTargetOption"));
  CHECK_THROWS_WITH(Options().backendOption("", "k", "v"), Contains("expected a backend name"));
}

TEST_CASE("profiling is an optional interface of compiled programs",
          "[devices][backend][runtime]") {
  auto loss_fn = [](const Tensor& out, const Tensor& y) { return mse_loss(out, y); };
  Generator g(7);
  Tensor x = randn({4, 3}, &g), y = randn({4, 2}, &g);
  for (const std::string name : {"cpu", "ipu"}) {
    nn::Linear lin(nn::LinearOptions(3, 2));
    optim::SGD sgd(lin->parameters(), optim::SGDOptions(0.1));
    auto tm = trainingModel(lin.ptr(), Options().backend(name).showCompilationProgressBar(false),
                            sgd, loss_fn);
    tm(x, y);
    const backend::Profiling* p = tm.step_executable()->profiling();
    std::ostringstream summary;
    tm.printProfileSummary(summary);
    if (name == "cpu") {
      // No device model: no simulated time, an empty report, no summary.
      CHECK(p == nullptr);
      CHECK_FALSE(tm.last_stats().simulated_seconds.has_value());
      CHECK(tm.report_json() == "{}");
      CHECK(summary.str().empty());
    } else {
      REQUIRE(p != nullptr);
      REQUIRE(tm.last_stats().simulated_seconds.has_value());
      // Plain SGD updates inside the step: the call is the one program's run.
      CHECK(*tm.last_stats().simulated_seconds == Approx(p->simulated_seconds_for(1)));
      CHECK(p->simulated_seconds() > 0);
      CHECK(p->simulated_seconds_for(3) == Approx(3 * p->simulated_seconds()));
      CHECK(tm.report_json().find("\"memory\"") != std::string::npos);
      CHECK_FALSE(summary.str().empty());
      CHECK(p->allreduce_seconds(1 << 20, 4) > p->allreduce_seconds(1 << 10, 4));
    }
  }
}
