// Exchange checking: with ExecOptions::check_exchange the emulator keeps every value in per-tile
// pieces as the plan lays it out and moves operands between them, so a plan that puts data
// where the ops do not pay to fetch it fails instead of running with the right numbers by
// accident. The conformance suite runs every op family checked (tests/conformance).
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/backends/ipu/ipu_backend.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/nn/nn.hpp>
#include <ipuml/optim/optim.hpp>
#include <ipuml/runtime/block.hpp>
#include <ipuml/runtime/training_model.hpp>

using namespace ipuml;

namespace {

struct Traced {
  ir::Trace trace;
  std::vector<Tensor> inputs;
};

// relu(x @ w) + b: a matrix product, then elementwise ops that follow its layout.
Traced small_graph() {
  Generator g(3);
  Traced t;
  t.inputs = {randn({6, 5}, &g), randn({5, 7}, &g), randn({7}, &g)};
  ir::Tracer tracer;
  std::vector<Tensor> xs;
  for (auto& x : t.inputs) xs.push_back(tracer.input(x));
  t.trace = tracer.finish({add(relu(matmul(xs[0], xs[1])), xs[2])});
  return t;
}

ipu::Target two_tiny_ipus() {
  ipu::Target t = ipu::target_preset("tiny");
  t.num_ipus = 2;
  return t;
}

ipu::ExecOptions checked() {
  ipu::ExecOptions e;
  e.check_exchange = true;
  return e;
}

// The graph's i-th input (laid out by the plan where its first reader wants it).
int64_t graph_input(const ir::Graph& g, size_t i) { return g.inputs.at(i); }

struct TwoLayerImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr};
  TwoLayerImpl() : nn::Module("TwoLayer") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(6, 12)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(12, 3)));
  }
  Tensor forward(const Tensor& x) override { return l2(relu(l1(x))); }
};
IPUML_MODULE(TwoLayer);

}  // namespace

TEST_CASE("ipu exchange check: a correct plan runs checked with the unchecked bits",
          "[ipu][exchange]") {
  auto t = small_graph();
  const auto target = two_tiny_ipus();
  const ipu::Plan plan = ipu::plan_graph(t.trace.graph, target, {});
  ipu::Executable plain(t.trace.graph, plan), check(t.trace.graph, plan, checked());
  const auto a = plain.run(t.inputs, t.trace.states)[0].to_vector<float>();
  const auto b = check.run(t.inputs, t.trace.states)[0].to_vector<float>();
  CHECK(a == b);
  CHECK(check.checked_inter_device_bytes() == 0);  // everything on IPU 0
}

TEST_CASE("ipu exchange check: data laid out on another IPU without a paid transfer fails",
          "[ipu][exchange][errors]") {
  auto t = small_graph();
  const auto target = two_tiny_ipus();
  ipu::Plan plan = ipu::plan_graph(t.trace.graph, target, {});
  // Forge the plan: the weight lives on IPU 1 while the product on IPU 0 charges no IPU-Link.
  plan.values.at(static_cast<size_t>(graph_input(t.trace.graph, 1))).span.device = 1;
  // Unchecked, the emulator reads the host buffer and the numbers come out right: the error in
  // the plan (cycles never charged) would go unseen.
  ipu::Executable plain(t.trace.graph, plan);
  ipu::Executable good(t.trace.graph, ipu::plan_graph(t.trace.graph, target, {}));
  CHECK(plain.run(t.inputs, t.trace.states)[0].to_vector<float>() ==
        good.run(t.inputs, t.trace.states)[0].to_vector<float>());
  ipu::Executable check(t.trace.graph, plan, checked());
  CHECK_THROWS_WITH(check.run(t.inputs, t.trace.states),
                    Catch::Contains("from other IPUs, but its plan pays for 0"));
}

TEST_CASE("ipu exchange check: a result written onto another IPU fails",
          "[ipu][exchange][errors]") {
  auto t = small_graph();
  ipu::Plan plan = ipu::plan_graph(t.trace.graph, two_tiny_ipus(), {});
  const int64_t out = t.trace.graph.nodes.front().outputs.front();
  plan.values.at(static_cast<size_t>(out)).span.device = 1;
  ipu::Executable check(t.trace.graph, plan, checked());
  CHECK_THROWS_WITH(check.run(t.inputs, t.trace.states), Catch::Contains("is laid out on IPU 1"));
}

TEST_CASE("ipu exchange check: a layout that does not cover its tensor fails",
          "[ipu][exchange][errors]") {
  auto t = small_graph();
  ipu::Plan plan = ipu::plan_graph(t.trace.graph, two_tiny_ipus(), {});
  auto& l = plan.values.at(static_cast<size_t>(graph_input(t.trace.graph, 0)));
  l.bytes /= 2;  // the layout places half of the tensor's bytes on tiles
  ipu::Executable check(t.trace.graph, plan, checked());
  CHECK_THROWS_WITH(check.run(t.inputs, t.trace.states),
                    Catch::Contains("hold 60 of its 120 bytes"));
}

TEST_CASE("ipu exchange check: a model split over two IPUs moves its activations over IPU-Links",
          "[ipu][exchange]") {
  // The same training steps with and without checking (IPUML_ENGINE_OPTIONS' debug switch) give
  // the same weights; the checked run moved exactly the bytes its plan pays IPU-Links for.
  auto train = [](bool check) {
    if (check) ::setenv("IPUML_ENGINE_OPTIONS", R"({"debug.checkExchange": "true"})", 1);
    manual_seed(4);
    TwoLayer net;
    runtime::BeginBlock(net->l2, 1);
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.1));
    auto tm =
        trainingModel(net.ptr(), Options().target("ipu2").showCompilationProgressBar(false), opt,
                      [](const Tensor& o, const Tensor& y) { return cross_entropy(o, y); });
    Generator g(9);
    for (int i = 0; i < 2; ++i) tm(randn({4, 6}, &g), randint(0, 3, {4}, &g));
    if (check) ::unsetenv("IPUML_ENGINE_OPTIONS");
    const auto* exe = dynamic_cast<const ipu::IpuBackendExecutable*>(tm.step_executable());
    REQUIRE(exe != nullptr);
    double paid = 0;
    for (auto& np : exe->program().plan().nodes) paid += np.inter_device_bytes;
    std::vector<std::vector<float>> w;
    for (auto& p : net->parameters()) w.push_back(p.to_vector<float>());
    return std::make_tuple(w, exe->program().checked_inter_device_bytes(), paid);
  };
  const auto [plain_w, plain_moved, plain_paid] = train(false);
  const auto [check_w, moved, paid] = train(true);
  CHECK(check_w == plain_w);
  CHECK(plain_moved == 0);
  CHECK(paid > 0);
  CHECK(moved == Approx(paid));
}
