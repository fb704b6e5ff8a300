// The compile-only estimate: a model's fit and projected throughput from tracing and compiling
// alone, equal to what executing the same configuration reports, whether its stages are
// pipelined or not, with replicas, gradient accumulation and device iterations; a model that does
// not fit is reported, and running it is refused as before.
#include <cstdio>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include <ipuml/backends/ipu/cycle_model.hpp>
#include <ipuml/backends/ipu/ipu_backend.hpp>
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/runtime/block.hpp>

#include "../support/error_of.hpp"

using namespace ipuml;
using runtime::ExecutionStrategy;
using testing::error_of;

namespace {

// Three layers and a head; with `split`, the last two run on a second IPU.
struct StackImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr}, head{nullptr};
  StackImpl(int64_t w, bool split) : nn::Module("Stack") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(w, w)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(w, w)));
    l3 = register_module("l3", nn::Linear(nn::LinearOptions(w, w)));
    head = register_module("head", nn::Linear(nn::LinearOptions(w, 10)));
    if (split) runtime::BeginBlock(l3, 1);
  }
  Tensor forward(const Tensor& x) override { return head(relu(l3(relu(l2(relu(l1(x))))))); }
};
IPUML_MODULE(Stack);

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

Options options(int64_t g, int64_t d, int64_t r, ExecutionStrategy s) {
  Options o;
  o.showCompilationProgressBar(false)
      .deviceIterations(d)
      .replicationFactor(r)
      .gradientAccumulation(g)
      .setExecutionStrategy(s);
  return o;
}

struct Batch {
  Tensor x, y;
};
Batch batch(const Options& o, int64_t micro) {
  Generator gen(3);
  const int64_t rows = o.combined_batch(micro);
  return {randn({rows, 32}, &gen), randint(0, 10, {rows}, &gen)};
}

}  // namespace

TEST_CASE("estimate: a training configuration's modelled time equals what running it reports",
          "[ipu][estimate]") {
  const bool split = GENERATE(false, true);
  const auto strategy = GENERATE(ExecutionStrategy::Sharded, ExecutionStrategy::Pipelined);
  if (!split && strategy == ExecutionStrategy::Pipelined) return;
  INFO("two IPUs per replica: " << split
                                << ", pipelined: " << (strategy == ExecutionStrategy::Pipelined));
  const Options o = options(4, 2, 2, strategy);
  const Batch b = batch(o, 8);

  manual_seed(1);
  Stack sized(32, split);
  optim::SGD sgd_sized(sized->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  Options only = o;
  only.compileOnly(true);
  auto estimated = trainingModel(sized.ptr(), only, sgd_sized, ce());
  const runtime::Estimate e = estimated.estimate(b.x, b.y);
  // Compile-only runs nothing: the weights and the optimizer's state are untouched.
  manual_seed(1);
  Stack fresh(32, split);
  for (size_t i = 0; i < fresh->parameters().size(); ++i)
    CHECK(sized->parameters()[i].to_vector<float>() == fresh->parameters()[i].to_vector<float>());
  CHECK(error_of([&] { estimated(b.x, b.y); }).find("Options.compileOnly is set") !=
        std::string::npos);

  manual_seed(1);
  Stack run(32, split);
  optim::SGD sgd_run(run->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto executed = trainingModel(run.ptr(), o, sgd_run, ce());
  executed(b.x, b.y);
  const auto& stats = executed.last_stats();
  REQUIRE(stats.simulated_seconds.has_value());
  CHECK(e.call_seconds == *stats.simulated_seconds);  // the same sum, to the bit
  CHECK(e.samples_per_call == stats.samples);
  CHECK(e.samples_per_second() == Approx(*stats.simulated_samples_per_second()).epsilon(1e-12));
  // The same model estimated after running gives the same answer.
  CHECK(executed.estimate(b.x, b.y).call_seconds == e.call_seconds);

  CHECK(e.program == "training");
  CHECK(e.micro_batch == 8);
  CHECK(e.gradient_accumulation == 4);
  CHECK(e.replicas == 2);
  CHECK(e.device_iterations == 2);
  CHECK(e.devices_per_replica == (split ? 2 : 1));
  CHECK(e.pipelined == (strategy == ExecutionStrategy::Pipelined));
  CHECK(e.memory.fits);
  CHECK(e.memory.device == "IPU");
  CHECK(e.memory.unit == "tile");
  CHECK(e.memory.unit_bytes == 638976);
  REQUIRE(e.memory.fullest_unit.size() == static_cast<size_t>(e.devices_per_replica));
  for (auto b2 : e.memory.fullest_unit) CHECK((b2 > 0 && b2 <= e.memory.unit_bytes));
  int64_t by_category = 0, by_device = 0;
  for (auto& [name, bytes] : e.memory.categories) by_category += bytes;
  for (auto bytes : e.memory.device_bytes) by_device += bytes;
  CHECK(by_category == by_device);
  // One update: the G micro-batches (overlapping when pipelined), the optimizer, the all-reduce.
  CHECK(e.update_seconds > 0);
  // The all-reduce spans the replica's IPUs, each reducing its own share of the gradients.
  double gradient_bytes = 0;
  for (auto& p : sized->parameters()) gradient_bytes += static_cast<double>(p.numel()) * 4;
  const auto target = ipu::target_preset("ipu2");
  CHECK(e.allreduce_seconds ==
        ipu::allreduce_cycles(target, gradient_bytes, 2, split ? 2 : 1) / target.clock_hz);
  CHECK(e.allreduce_seconds > 0);
  if (e.pipelined)
    CHECK(e.accumulation_seconds < 4 * e.micro_batch_seconds);
  else
    CHECK(e.accumulation_seconds == Approx(4 * e.micro_batch_seconds).epsilon(1e-12));
  // Where the time goes: every part of the step is there; a sharded step's IPUs run one after
  // another, so its parts add up to the micro-batch, and the update's to the update.
  CHECK(e.step_split.compute > 0);
  CHECK(e.step_split.exchange > 0);
  CHECK(e.step_split.sync > 0);
  CHECK(e.step_split.host > 0);
  if (!e.pipelined) CHECK(e.step_split.total() == Approx(e.micro_batch_seconds).epsilon(1e-12));
  CHECK(e.update_split.total() == Approx(e.update_seconds).epsilon(1e-12));
  CHECK(e.call_seconds == Approx(2 * e.iteration_seconds()).epsilon(1e-12));
  CHECK(e.clock_hz == 1.33e9);
  CHECK(e.wall_seconds > 0);
}

TEST_CASE("estimate: one replica without accumulation, and inference, equal their runs",
          "[ipu][estimate]") {
  manual_seed(2);
  Stack a(32, false);
  optim::SGD sgd(a->parameters(), optim::SGDOptions(0.05));
  const Options o = options(1, 3, 1, ExecutionStrategy::Sharded);
  const Batch b = batch(o, 4);
  auto tm = trainingModel(a.ptr(), o, sgd, ce());
  const runtime::Estimate e = tm.estimate(b.x, b.y);
  CHECK(e.update_seconds == 0);  // the step runs the optimizer itself
  CHECK(e.allreduce_seconds == 0);
  tm(b.x, b.y);
  CHECK(e.call_seconds == *tm.last_stats().simulated_seconds);

  manual_seed(2);
  Stack c(32, true);
  const Options io = options(1, 4, 2, ExecutionStrategy::Pipelined);
  Generator gen(4);
  const Tensor x = randn({io.combined_batch(5, false), 32}, &gen);
  auto inf = inferenceModel(c.ptr(), io);
  const runtime::Estimate ie = inf.estimate(x);
  inf(x);
  CHECK(ie.program == "inference");
  CHECK(ie.call_seconds == *inf.last_stats().simulated_seconds);
  CHECK(ie.samples_per_call == 5 * 4 * 2);
  CHECK(ie.call_seconds < 4 * ie.micro_batch_seconds);  // the stages overlap
}

TEST_CASE("estimate: a model that does not fit is reported, and running it still fails",
          "[ipu][estimate]") {
  manual_seed(3);
  Stack a(256, false);
  optim::SGD sgd(a->parameters(), optim::SGDOptions(0.05));
  Options o = options(1, 1, 1, ExecutionStrategy::Sharded);
  o.target("tiny");
  Generator gen(5);
  const Tensor x = randn({16, 256}, &gen), y = randint(0, 10, {16}, &gen);
  auto tm = trainingModel(a.ptr(), o, sgd, ce());
  const runtime::Estimate e = tm.estimate(x, y);
  CHECK_FALSE(e.memory.fits);
  CHECK(e.memory.message.find("Out of memory on tile") != std::string::npos);
  CHECK(e.call_seconds > 0);
  std::ostringstream os;
  runtime::print_estimate(os, e);
  CHECK(os.str().find("memory: DOES NOT FIT") != std::string::npos);
  CHECK(os.str().find("Out of memory on tile") != std::string::npos);
  CHECK(error_of([&] { tm(x, y); }).find("Out of memory on tile") != std::string::npos);
}

TEST_CASE("estimate: the printed report and the CPU backend's refusal", "[ipu][estimate]") {
  manual_seed(4);
  Stack a(32, true);
  optim::SGD sgd(a->parameters(), optim::SGDOptions(0.05));
  const Options o = options(3, 1, 2, ExecutionStrategy::Pipelined);
  const Batch b = batch(o, 2);
  auto tm = trainingModel(a.ptr(), o, sgd, ce());
  const runtime::Estimate e = tm.estimate(b.x, b.y);
  std::ostringstream os;
  runtime::print_estimate(os, e);
  const std::string s = os.str();
  INFO(s);
  CHECK(s.find("Compile-only estimate of the training program on ipu2: 2 IPUs") == 0);
  CHECK(s.find("micro-batch 2 x gradient accumulation 3 x 2 replicas of 2 IPUs (pipelined) x 1 "
               "device iteration = 12 samples per host call") != std::string::npos);
  CHECK(s.find("memory: fits (fullest tile of each IPU: ") != std::string::npos);
  CHECK(s.find("by category: state ") != std::string::npos);
  CHECK(s.find("+ gradient all-reduce ") != std::string::npos);
  CHECK(s.find("projected throughput: ") != std::string::npos);
  // The shares of one weight update, added up by hand from the estimate's parts.
  const auto at = s.find("where the time goes (one weight update): compute ");
  REQUIRE(at != std::string::npos);
  const std::string line = s.substr(at, s.find('\n', at) - at);
  double shown[5] = {0, 0, 0, 0, 0};
  REQUIRE(std::sscanf(line.c_str(),
                      "where the time goes (one weight update): compute %lf %%, exchange %lf %%, "
                      "sync %lf %%, host %lf %%, all-reduce %lf %%",
                      &shown[0], &shown[1], &shown[2], &shown[3], &shown[4]) == 5);
  const double all = e.iteration_seconds();
  const double steps = e.accumulation_seconds / e.step_split.total(),
               update = e.update_seconds / e.update_split.total();
  const double want[5] = {e.step_split.compute * steps + e.update_split.compute * update,
                          e.step_split.exchange * steps + e.update_split.exchange * update,
                          e.step_split.sync * steps + e.update_split.sync * update,
                          e.step_split.host * steps + e.update_split.host * update,
                          e.allreduce_seconds};
  for (int i = 0; i < 5; ++i) CHECK(shown[i] == Approx(100 * want[i] / all).margin(0.051));

  Options cpu;
  cpu.useIpuModel(false).showCompilationProgressBar(false);
  Stack c(32, false);
  optim::SGD sgd2(c->parameters(), optim::SGDOptions(0.05));
  auto on_cpu = trainingModel(c.ptr(), cpu, sgd2, ce());
  CHECK(error_of([&] {
          on_cpu.estimate(b.x.narrow(0, 0, 2), b.y.narrow(0, 0, 2));
        }).find("backend 'cpu' models no device") != std::string::npos);
}
