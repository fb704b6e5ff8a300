// One memory image for a training step and its weight update: the optimizer's own state and the
// update's code are added to the step's tiles, shared tensors are held once, and the fit is
// checked on the two together.
#include <algorithm>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include <ipuml/backends/ipu/ipu_backend.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/runtime/training_model.hpp>

using namespace ipuml;

namespace {

struct Run {
  ipu::MemoryReport step, image;
  int64_t optimizer_state_bytes = 0;
};

// A wide linear layer trained with Adam and gradient accumulation (so the update is its own
// program), on the 4-tile test target.
Run compile_wide(runtime::Options o) {
  manual_seed(3);
  nn::Linear lin(nn::LinearOptions(64, 256));
  optim::Adam adam(lin->parameters(), optim::AdamOptions(1e-3));
  auto loss = [](const Tensor& out, const Tensor& y) { return mse_loss(out, y); };
  auto model = runtime::trainingModel(lin.ptr(), o.gradientAccumulation(2), adam, loss);
  model(randn({8, 64}), randn({8, 256}));
  auto* exe = dynamic_cast<const ipu::IpuBackendExecutable*>(model.step_executable());
  REQUIRE(exe != nullptr);
  Run r;
  r.image = exe->program().memory_report();
  for (size_t i = 0; i < adam.parameters().size(); ++i)
    for (auto& [name, t] : adam.state(i))
      r.optimizer_state_bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
  return r;
}

runtime::Options tiny(int64_t bytes_per_tile) {
  return runtime::Options()
      .target("tiny")
      .setTargetOption("bytes_per_tile", std::to_string(bytes_per_tile))
      .showCompilationProgressBar(false);
}

int64_t sum_category(const ipu::MemoryReport& m, int c) {
  int64_t s = 0;
  for (auto& t : m.units) s += t.bytes[c];
  return s;
}

}  // namespace

TEST_CASE("ipu memory image: the weight update's state joins the step's tiles, counted once",
          "[ipu][runtime]") {
  auto r = compile_wide(tiny(int64_t{1} << 24).allowOutOfMemory(true));
  REQUIRE(r.optimizer_state_bytes > 0);
  const auto& m = r.image;
  REQUIRE(m.units.size() == 4);
  // The step alone holds weights, bias and accumulators; the image adds Adam's two moments
  // (and its step counters), each piece rounded up to the target's alignment.
  const int64_t state = sum_category(m, ipu::kState);
  const int64_t params = (64 * 256 + 256) * 4;
  CHECK(state >= 2 * params + r.optimizer_state_bytes);
  CHECK(state <= 2 * params + r.optimizer_state_bytes + 64 * 4 * 32);
  // Not-always-live figures: one entry per program step of both programs.
  CHECK(m.not_always_live_per_step.size() > 0);
  for (auto& t : m.units) CHECK(t.bytes[ipu::kStack] > 0);
  CHECK_FALSE(m.out_of_memory);
}

TEST_CASE("ipu memory image: a step that fits alone but not with its update is out of memory",
          "[ipu][runtime]") {
  // The fullest tile of the image with Adam's state on chip and off chip, given room to spare;
  // then a tile size between the two.
  runtime::Options off = tiny(int64_t{1} << 24).allowOutOfMemory(true);
  off.TensorLocations.setOptimizerLocation(
      runtime::TensorLocationSettings().useOnChipStorage(false));
  auto fullest = [](const ipu::MemoryReport& m) {
    return m.units[static_cast<size_t>(m.worst_unit)].total();
  };
  const int64_t on_chip =
      fullest(compile_wide(tiny(int64_t{1} << 24).allowOutOfMemory(true)).image);
  const int64_t off_chip = fullest(compile_wide(off).image);
  REQUIRE(on_chip - off_chip > 8192);
  const int64_t limit = (on_chip + off_chip) / 2;
  std::string msg;
  try {
    compile_wide(tiny(limit));
  } catch (const Error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.find("Out of memory on tile") != std::string::npos);
  CHECK(msg.find("The training step alone fits") != std::string::npos);
  CHECK(msg.find("setOptimizerLocation") != std::string::npos);
  // The same program with Adam's state in streaming memory fits.
  off = tiny(limit);
  off.TensorLocations.setOptimizerLocation(
      runtime::TensorLocationSettings().useOnChipStorage(false));
  auto r = compile_wide(off);
  CHECK_FALSE(r.image.out_of_memory);
}

TEST_CASE("ipu replicated tensor sharding: each replica holds a quarter of the optimizer state",
          "[ipu][runtime][replicas]") {
  // Four replicas with Adam: sharding the optimizer state saves 3/4 of it on every replica's
  // tiles, the update computes its share (fewer cycles), and the numbers do not change.
  auto run = [](bool shard, bool on_chip) {
    manual_seed(3);
    nn::Linear lin(nn::LinearOptions(64, 256));
    optim::Adam adam(lin->parameters(), optim::AdamOptions(1e-3));
    auto loss = [](const Tensor& out, const Tensor& y) { return mse_loss(out, y); };
    runtime::Options o = tiny(int64_t{1} << 24).replicationFactor(4);
    o.TensorLocations.setOptimizerLocation(
        runtime::TensorLocationSettings().useOnChipStorage(on_chip).useReplicatedTensorSharding(
            shard));
    auto model = runtime::trainingModel(lin.ptr(), o, adam, loss);
    Generator g(5);
    for (int i = 0; i < 2; ++i) model(randn({16, 64}, &g), randn({16, 256}, &g));
    auto* exe = dynamic_cast<const ipu::IpuBackendExecutable*>(model.step_executable());
    REQUIRE(exe != nullptr);
    struct Out {
      ipu::MemoryReport image;
      int64_t state_bytes = 0;
      double seconds = 0;
      std::vector<float> weight;
      std::string summary;
    } r;
    r.image = exe->program().memory_report();
    for (size_t i = 0; i < adam.parameters().size(); ++i)
      for (auto& [name, t] : adam.state(i))
        if (t.numel() > 1) r.state_bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    r.seconds = *model.last_stats().simulated_seconds;
    r.weight = lin->weight.to_vector<float>();
    std::ostringstream os;
    model.printProfileSummary(os);
    r.summary = os.str();
    return r;
  };
  const auto plain = run(false, true), sharded = run(true, true);
  REQUIRE(plain.state_bytes == 2 * (64 * 256 + 256) * 4);
  CHECK(plain.image.replica_sharding_saved_bytes == 0);
  // 3/4 of Adam's two moments, within the tiles' alignment padding.
  const double saved = static_cast<double>(sharded.image.replica_sharding_saved_bytes);
  CHECK(saved == Approx(0.75 * static_cast<double>(plain.state_bytes)).epsilon(0.02));
  CHECK(sum_category(plain.image, ipu::kState) - sum_category(sharded.image, ipu::kState) ==
        sharded.image.replica_sharding_saved_bytes);
  CHECK(sharded.seconds < plain.seconds);
  CHECK(sharded.weight == plain.weight);
  CHECK_THAT(sharded.summary, Catch::Contains("Replicated tensor sharding"));
  CHECK_THAT(plain.summary, !Catch::Contains("Replicated tensor sharding"));
  // In streaming memory, each replica streams only its share in and out.
  const auto off = run(false, false), off_sharded = run(true, false);
  CHECK(off_sharded.seconds < off.seconds);
  CHECK(off_sharded.weight == plain.weight);
}
