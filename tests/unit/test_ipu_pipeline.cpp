// Model parallelism on the emulated IPU: pipeline stages, the pipelined schedule against
// sharded and single-IPU runs (same numbers, PopTorch's order of throughputs), and replicas
// charging one gradient all-reduce per weight update.
#include <catch2/catch.hpp>

#include <ipuml/backends/ipu/ipu_backend.hpp>
#include <ipuml/backends/emu/schedule.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/ir/stages.hpp>
#include <ipuml/nn/nn.hpp>
#include <ipuml/optim/optim.hpp>
#include <ipuml/runtime/block.hpp>
#include <ipuml/runtime/training_model.hpp>

using namespace ipuml;

namespace {

// Four equal layers and a 10-class head. Split before l4, the two IPUs cost about the same:
// IPU 0 runs three layers (the first needs no input gradient), IPU 1 one layer, the head and
// the loss, whose many small steps each pay a sync.
struct TowerImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr}, l4{nullptr}, head{nullptr};
  explicit TowerImpl(int64_t w) : nn::Module("Tower") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(w, w)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(w, w)));
    l3 = register_module("l3", nn::Linear(nn::LinearOptions(w, w)));
    l4 = register_module("l4", nn::Linear(nn::LinearOptions(w, w)));
    head = register_module("head", nn::Linear(nn::LinearOptions(w, 10)));
  }
  Tensor forward(const Tensor& x) override {
    return head(relu(l4(relu(l3(relu(l2(relu(l1(x)))))))));
  }
};
IPUML_MODULE(Tower);

Tower make_tower(int64_t w, bool split) {
  manual_seed(11);
  Tower t(w);
  if (split) runtime::BeginBlock(t->l4, 1);
  return t;
}

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

Options ipu_options() { return Options().showCompilationProgressBar(false); }

std::vector<float> flat_weights(const Tower& t) {
  std::vector<float> all;
  for (auto& p : t->parameters()) {
    auto v = p.to_vector<float>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

struct RunResult {
  std::vector<float> weights;
  std::vector<float> losses;
  double simulated = 0;
  int stages = 0;
  bool overlapped = false;  // the micro-batches really ran through overlapping stages
};

RunResult train(int64_t w, bool split, runtime::ExecutionStrategy strategy, int64_t g, int steps) {
  Generator gen(5);
  const int64_t micro = 16;
  Tensor x = randn({micro * g, w}, &gen);
  Tensor y = randint(0, 10, {micro * g}, &gen);
  Tower t = make_tower(w, split);
  optim::SGD opt(t->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto model =
      trainingModel(t.ptr(),
                    ipu_options().gradientAccumulation(g).setExecutionStrategy(strategy).outputMode(
                        runtime::OutputMode::All),
                    opt, ce());
  RunResult r;
  for (int i = 0; i < steps; ++i) {
    auto l = model(x, y).to_vector<float>();
    r.losses.insert(r.losses.end(), l.begin(), l.end());
  }
  r.weights = flat_weights(t);
  r.simulated = *model.last_stats().simulated_seconds;
  r.stages = ir::stage_count(model.step_graph());
  const auto* exe = dynamic_cast<const ipu::IpuBackendExecutable*>(model.step_executable());
  REQUIRE(exe != nullptr);
  r.overlapped = exe->pipelined() && exe->program().pipelinable();
  return r;
}

}  // namespace

TEST_CASE("pipeline stages: 2N - 1 for a training step over N IPUs, N for inference",
          "[ipu][pipeline]") {
  Tower t = make_tower(16, true);
  optim::SGD opt(t->parameters(), optim::SGDOptions(0.1));
  auto model = trainingModel(t.ptr(),
                             ipu_options().gradientAccumulation(3).setExecutionStrategy(
                                 runtime::ExecutionStrategy::Pipelined),
                             opt, ce());
  model(randn({24, 16}), randint(0, 10, {24}));
  const auto& g = model.step_graph();
  CHECK(ir::stage_count(g) == 3);
  // Forward of IPU 0, forward and backward of IPU 1, backward (and update) of IPU 0.
  for (auto& n : g.nodes) {
    INFO(ir::op_name(n.kind) << " on IPU " << n.placement << " in stage " << n.stage);
    CHECK(((n.stage == 1) == (n.placement == 1)));
  }
  for (size_t n = 1; n < g.nodes.size(); ++n) CHECK(g.nodes[n].stage >= g.nodes[n - 1].stage);

  // Fewer micro-batches than stages cannot fill the pipeline: PopTorch's error, before running.
  Tower t2 = make_tower(16, true);
  optim::SGD opt2(t2->parameters(), optim::SGDOptions(0.1));
  auto bad = trainingModel(t2.ptr(),
                           ipu_options().gradientAccumulation(2).setExecutionStrategy(
                               runtime::ExecutionStrategy::Pipelined),
                           opt2, ce());
  CHECK_THROWS_WITH(bad(randn({16, 16}), randint(0, 10, {16})),
                    Catch::Contains("has 3 stages, so gradientAccumulation must be >= 3"));

  auto inf = inferenceModel(t.ptr(), ipu_options().deviceIterations(2).setExecutionStrategy(
                                         runtime::ExecutionStrategy::Pipelined));
  Tensor out = inf(randn({8, 16}));
  CHECK(out.shape() == Shape{8, 10});
}

TEST_CASE("pipelined, sharded and single-IPU training give the same numbers", "[ipu][pipeline]") {
  using runtime::ExecutionStrategy;
  auto single = train(32, false, ExecutionStrategy::Sharded, 4, 3);
  auto sharded = train(32, true, ExecutionStrategy::Sharded, 4, 3);
  auto pipelined = train(32, true, ExecutionStrategy::Pipelined, 4, 3);
  CHECK(pipelined.stages == 3);
  CHECK(sharded.stages == 1);
  CHECK(pipelined.overlapped);
  CHECK_FALSE(sharded.overlapped);
  // The pipeline runs each stage's micro-batches in order: the very bits of the sharded run.
  CHECK(pipelined.weights == sharded.weights);
  CHECK(pipelined.losses == sharded.losses);
  REQUIRE(single.weights.size() == pipelined.weights.size());
  for (size_t i = 0; i < single.weights.size(); ++i)
    REQUIRE(pipelined.weights[i] == Approx(single.weights[i]).margin(1e-5));
}

TEST_CASE("simulated throughput: pipelined > single IPU > sharded, as Graphcore's tutorial shows",
          "[ipu][pipeline]") {
  using runtime::ExecutionStrategy;
  const int64_t g = 16;
  auto single = train(512, false, ExecutionStrategy::Sharded, g, 1);
  auto sharded = train(512, true, ExecutionStrategy::Sharded, g, 1);
  auto pipelined = train(512, true, ExecutionStrategy::Pipelined, g, 1);
  INFO("simulated seconds per update: single " << single.simulated << ", sharded "
                                               << sharded.simulated << ", pipelined "
                                               << pipelined.simulated);
  CHECK(pipelined.simulated < single.simulated);
  CHECK(single.simulated < sharded.simulated);
  // Two balanced IPUs: the steady state runs at about twice the single IPU's rate; ramp-up and
  // ramp-down (2 of 18 pipeline cycles), the sync ending each pipeline cycle, the inter-IPU
  // copies and the weight update (not pipelined) keep it short of that.
  CHECK(single.simulated / pipelined.simulated > 1.3);
  CHECK(single.simulated / pipelined.simulated < 2.0);
}

TEST_CASE("the pipelined schedule: ramp-up, steady state set by the busiest IPU, ramp-down",
          "[ipu][pipeline]") {
  ipu::Target t = ipu::target_preset("ipu2");
  t.global_sync_cycles = 0;
  // Three stages over two IPUs: IPU 0 holds stages 0 and 2.
  const std::vector<std::vector<double>> st = {{100, 0}, {0, 150}, {80, 0}};
  // One micro-batch walks through: 100 + 150 + 80.
  CHECK(ipu::pipelined_cycles(st, t, 1) == 330);
  // Cycles 0..G+1: c0 = 100, c1 = max(100, 150), c2..c(G-1) = max(180, 150), then
  // c(G) = max(80, 150), c(G+1) = 80.
  const int64_t G = 10;
  const double want = 100 + 150 + 180.0 * static_cast<double>(G - 2) + 150 + 80;
  CHECK(ipu::pipelined_cycles(st, t, G) == want);
  t.global_sync_cycles = 7;
  CHECK(ipu::pipelined_cycles(st, t, G) == want + 7.0 * static_cast<double>(G + 2));
}

TEST_CASE("replicas charge exactly one gradient all-reduce per weight update",
          "[ipu][pipeline][replicas]") {
  Generator gen(8);
  const int64_t w = 64, micro = 4, g = 2;
  // With a host link per IPU, the replicas' programs are the one replica's; on an IPU-M2000's
  // one link shared by its four IPUs, they also stream their data more slowly.
  std::string link = "1";
  auto run = [&](int64_t r, int64_t d) {
    Tower t = make_tower(w, false);
    optim::SGD opt(t->parameters(), optim::SGDOptions(0.05));
    auto model = trainingModel(t.ptr(),
                               ipu_options()
                                   .replicationFactor(r)
                                   .gradientAccumulation(g)
                                   .deviceIterations(d)
                                   .setTargetOption("num_ipus", "8")
                                   .setTargetOption("ipus_per_host_link", link),
                               opt, ce());
    Tensor x = randn({micro * g * r * d, w}, &gen);
    Tensor y = randint(0, 10, {micro * g * r * d}, &gen);
    model(x, y);
    return std::make_pair(*model.last_stats().simulated_seconds, model.allreduce_count());
  };
  size_t grad_bytes = 0;
  {
    Tower t = make_tower(w, false);
    for (auto& p : t->parameters()) grad_bytes += static_cast<size_t>(p.numel()) * 4;
  }
  const auto [one, n1] = run(1, 3);
  const auto [four, n4] = run(4, 3);
  CHECK(n1 == 0);
  CHECK(n4 == 3);  // three device iterations, three updates, three all-reduces
  ipu::Target t = ipu::target_preset("ipu2");
  const double ar = ipu::allreduce_cycles(t, static_cast<double>(grad_bytes), 4) / t.clock_hz;
  REQUIRE(ar > 0);
  // The replicas' programs are the one replica's: the only difference is the all-reduces.
  CHECK(four - one == Approx(3 * ar).epsilon(1e-9));
  link = "4";
  const auto [shared, n_shared] = run(4, 3);
  CHECK(n_shared == 3);
  CHECK(shared > four);

  // Scaling: more replicas, more samples per simulated second, but less than linearly.
  double prev = 0, base = 0;
  for (int64_t r : {1, 2, 4, 8}) {
    const double secs = run(r, 1).first;
    const double rate = static_cast<double>(micro * g * r) / secs;
    INFO(r << " replicas: " << rate << " samples/s");
    if (r == 1) base = rate;
    CHECK(rate > prev);
    if (r > 1) CHECK(rate < base * static_cast<double>(r));
    prev = rate;
  }
}
