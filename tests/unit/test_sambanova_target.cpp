// The SambaNova RDU as a target of the emulator core: its presets and overrides, its costs
// written out by hand, the section plan (o0 and o1, operators tiled over weights that exceed the
// PMUs, the DDR between sections and its capacity), and training steps through the sambanova
// backend that equal the CPU's.
#include <cmath>
#include <string>

#include <catch2/catch.hpp>

#include <ipuml/backends/emu/node_roles.hpp>
#include <ipuml/backends/sambanova/sambanova_backend.hpp>
#include <ipuml/ipuml.hpp>

#include "../support/error_of.hpp"

using namespace ipuml;
using sambanova::Optimization;
using testing::error_of;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct RduMlpImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr};
  RduMlpImpl(int64_t in, int64_t hidden) : nn::Module("RduMlp") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(in, hidden)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(hidden, 10)));
  }
  Tensor forward(const Tensor& x) override { return l2(relu(l1(x))); }
};
IPUML_MODULE(RduMlp);

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

Options rdu_options(const std::string& target, const std::string& optimization,
                    const std::string& tiles = "") {
  Options o;
  o.showCompilationProgressBar(false).backend("sambanova");
  o.backendOption("sambanova", "target", target);
  o.backendOption("sambanova", "optimization", optimization);
  if (!tiles.empty()) o.backendOption("sambanova", "num_tiles", tiles);
  return o;
}

// One matrix product x [m, k] @ w [k, n] with w captured as a state.
ir::Graph one_matmul(int64_t m, int64_t k, int64_t n) {
  Generator gen(2);
  Tensor w = randn({k, n}, &gen);
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{m, k}, DType::Float32});
  return tracer.finish({matmul(x, w)}).graph;
}

}  // namespace

TEST_CASE("sambanova target: the presets are the published RDUs", "[sambanova]") {
  const auto sn30 = sambanova::target_preset("sn30");
  CHECK(sn30.tiles_per_rdu == 8);
  CHECK(sn30.pcus_per_rdu() == 1280);
  // The published peaks: 688 TFLOP/s bf16 for an SN30 RDU, 320 for an SN10's.
  CHECK(static_cast<double>(sn30.pcus_per_rdu()) * sn30.flops_per_cycle_bf16 * sn30.clock_hz ==
        Approx(688e12));
  const auto sn10 = sambanova::target_preset("sn10");
  CHECK(sn10.tiles_per_rdu == 4);
  CHECK(static_cast<double>(sn10.pcus_per_rdu()) * sn10.flops_per_cycle_bf16 * sn10.clock_hz ==
        Approx(320e12));
  CHECK(sn10.sram_bytes_per_rdu() == Approx(320e6));  // 640 PMUs: 320 MB on chip
  CHECK(sn30.sram_bytes_per_rdu() == Approx(640e6));
  CHECK(sn10.ddr_bytes_per_second == Approx(6 * 8 * 2.667e9).epsilon(1e-3));  // 6 x DDR4-2667
  CHECK(sambanova::target_preset("tiny").pcus_per_rdu() == 8);
}

TEST_CASE("sambanova target: overrides and JSON round-trip and bad values are refused",
          "[sambanova]") {
  auto t = sambanova::target_preset("sn30");
  sambanova::apply_override(t, "section_switch_seconds=5e-6");
  CHECK(t.section_switch_seconds == 5e-6);
  const auto back = sambanova::target_from_json(sambanova::to_json(t));
  CHECK(sambanova::to_json(back) == sambanova::to_json(t));
  const auto before = sambanova::to_json(t);
  CHECK(contains(error_of([&] { sambanova::apply_override(t, "pcus=3"); }),
                 "unknown field 'pcus'; valid fields: name, tiles_per_rdu"));
  CHECK(contains(error_of([&] { sambanova::apply_override(t, "tiles_per_rdu=0"); }),
                 "tiles_per_rdu"));
  CHECK(contains(error_of([&] { sambanova::apply_override(t, "ddr_bytes=lots"); }),
                 "ddr_bytes expects a number, got 'lots'"));
  CHECK(sambanova::to_json(t) == before);
  CHECK(contains(error_of([] { sambanova::target_preset("sn99"); }),
                 "expected one of: sn30, sn10, tiny"));
}

TEST_CASE("sambanova target: a PCU's costs written out by hand", "[sambanova]") {
  const sambanova::RduModel m(sambanova::target_preset("sn30"), 4, Optimization::O1);
  CHECK(m.machine().units_per_device == 640);
  CHECK(m.machine().bytes_per_unit == 500000);
  CHECK(m.share() == 0.5);  // 4 of the RDU's 8 tiles
  // 1075 fp32 FLOPs at 107.5 a cycle; bf16 at 430; elementwise fp32 at 16 lanes, or the PMU's
  // 187 B a cycle if slower.
  CHECK(m.compute_cycles(1075, 0, DType::Float32, true, 1) == 10);
  CHECK(m.compute_cycles(4300, 0, DType::BFloat16, true, 1) == 10);
  CHECK(m.compute_cycles(160, 0, DType::Float32, false, 1) == 10);
  CHECK(m.compute_cycles(16, 1870, DType::Float32, false, 1) == 10);
  // Half the RDU's 256 GB/s of DDR, 80 % of it sustained: 102.4e9 B take one second.
  CHECK(m.ddr_cycles(102.4e9) == Approx(1.25e9));
  CHECK(m.section_switch_cycles() == 25000);  // 20 us
  CHECK(contains(
      error_of([] { sambanova::RduModel(sambanova::target_preset("sn10"), 8, Optimization::O0); }),
      "num_tiles must be in [1, 4]"));
}

TEST_CASE("sambanova sections: one matrix product takes the tiles at their rate", "[sambanova]") {
  // 8192^3 in fp32 (sized on the meta device: 268 MB of weights, never allocated) reads and
  // writes 805 MB of DDR in 9.8 M cycles and computes for 16.0 M: compute-bound.
  const ir::Graph g = [] {
    DefaultDeviceGuard meta(kMeta);
    return one_matmul(8192, 8192, 8192);
  }();
  const sambanova::RduModel m(sambanova::target_preset("sn30"), 4, Optimization::O0);
  const auto p = sambanova::plan_sections(g, m);
  REQUIRE(p.fits);
  REQUIRE(p.sections.size() == 1);
  const auto& s = p.sections[0];
  REQUIRE(s.ops.size() == 1);
  const double n = 8192, flops = 2.0 * n * n * n, bytes = n * n * 4.0;
  CHECK(s.flops == flops);
  CHECK(s.pcus == 640);  // alone, it takes every PCU of its tiles
  CHECK(s.compute_cycles == std::ceil(flops / 107.5 / 640));
  // Reads x and w from DDR, writes the product back, at 80 % of half the RDU's 256 GB/s.
  CHECK(s.ddr_read_bytes == 2 * bytes);
  CHECK(s.ddr_write_bytes == bytes);
  CHECK(s.ddr_cycles == std::ceil(3 * bytes / 102.4e9 * 1.25e9));
  CHECK(s.resident_bytes == bytes);
  CHECK(s.pmus == 2 + 537);  // x and the product flow through; the weights fill 537 PMUs
  CHECK(s.cycles == s.compute_cycles + 25000);
  CHECK(s.bound == "compute");
  CHECK(p.step_cycles == s.cycles);
  CHECK(p.state_bytes == bytes);
  CHECK(p.ddr_peak_bytes == bytes + 2 * bytes);  // the weights, x and the product
  // At 512 rows the same product is DDR-bound (arithmetic intensity 205 FLOPs a byte against
  // the tiles' 840).
  const auto q = sambanova::plan_sections(one_matmul(512, 1024, 1024), m);
  CHECK(q.sections[0].bound == "DDR");
  CHECK(q.sections[0].cycles == q.sections[0].ddr_cycles + 25000);
}

TEST_CASE("sambanova sections: weights larger than the PMUs are tiled into passes", "[sambanova]") {
  // tiny: 2 tiles of 4 PMUs of 64 KiB. 1 MiB of weights beside 2 streams: 6 PMUs (384 KiB) for
  // them, so 3 passes over x.
  const auto g = one_matmul(4, 512, 512);
  const sambanova::RduModel m(sambanova::target_preset("tiny"), 2, Optimization::O0);
  const auto p = sambanova::plan_sections(g, m);
  REQUIRE(p.fits);
  const auto& op = p.sections[0].ops[0];
  CHECK(op.passes == 3);
  CHECK(p.sections[0].pmus == 8);
  CHECK(p.sections[0].ddr_read_bytes == 3 * (4 * 512 * 4.0) + 512 * 512 * 4.0);
  // One PMU and two streams: no room for the weights at all.
  auto t = sambanova::target_preset("tiny");
  sambanova::apply_override(t, "pmus_per_tile=1");
  const sambanova::RduModel small(t, 1, Optimization::O0);
  const auto q = sambanova::plan_sections(g, small);
  CHECK_FALSE(q.fits);
  CHECK(contains(q.message, "section 0 (MatMul, node"));
  CHECK(contains(q.message, "needs 2 PMU buffers"));
  CHECK(contains(q.message, "--num-tiles, at most 2"));
}

TEST_CASE("sambanova sections: o1 fuses what o0 keeps apart and saves DDR traffic", "[sambanova]") {
  manual_seed(3);
  RduMlp model(784, 128);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto step = runtime::trace_training_step(
      *model, sgd,
      [&](const std::vector<Tensor>& in) { return cross_entropy(model(in[0]), in[1]); },
      {ir::TensorMeta{{64, 784}, DType::Float32}, ir::TensorMeta{{64}, DType::Int64}});
  const auto t = sambanova::target_preset("sn30");
  const auto o0 = sambanova::plan_sections(step.graph, sambanova::RduModel(t, 4, Optimization::O0));
  const auto o1 = sambanova::plan_sections(step.graph, sambanova::RduModel(t, 4, Optimization::O1));
  REQUIRE(o0.fits);
  REQUIRE(o1.fits);
  size_t active = 0;
  for (auto& n : step.graph.nodes) active += emu::idle_node(step.graph, n) ? 0 : 1;
  CHECK(o0.sections.size() == active);  // one operator each
  CHECK(o1.sections.size() < o0.sections.size());
  CHECK(o1.ddr_bytes_moved < o0.ddr_bytes_moved);
  CHECK(o1.step_cycles < o0.step_cycles);
  CHECK(o1.flops == Approx(o0.flops));
  for (const auto& s : o1.sections) {
    CHECK(s.pcus <= o1.pcus_total);
    CHECK(s.pmus <= o1.pmus_total);
    double sum = 0;
    for (auto& op : s.ops) sum += op.stage_cycles;
    const double slowest = s.ops[static_cast<size_t>(s.slowest_op)].stage_cycles;
    CHECK(s.compute_cycles == std::ceil(slowest + (sum - slowest) / 64.0));
  }
  // Weights and momentum stay in DDR; what waits there between sections is added at its peak.
  double params = 0;
  for (auto& prm : model->parameters()) params += static_cast<double>(prm.numel()) * 4;
  CHECK(o1.state_bytes == Approx(2 * params));
  CHECK(o1.ddr_peak_bytes > o1.state_bytes);
  CHECK(o1.ddr_capacity_bytes == 0.5e12);
  const std::string text = sambanova::describe(o1);
  CHECK(contains(text, "Sections on sn30 (4 tiles, o1)"));
  CHECK(contains(sambanova::sections_json(o1), "\"schema\":\"ipuml.sections/1\""));
}

TEST_CASE("sambanova sections: a program larger than its DDR share says what would help",
          "[sambanova]") {
  const auto g = one_matmul(4, 2048, 2048);  // 16.8 MB of weights
  auto t = sambanova::target_preset("tiny");
  sambanova::apply_override(t, "ddr_bytes=2e7");  // 10 MB for one of the 2 tiles
  const auto p = sambanova::plan_sections(g, sambanova::RduModel(t, 1, Optimization::O1));
  CHECK_FALSE(p.fits);
  CHECK(contains(p.message, "does not fit the DDR of its 1 tile of tiny"));
  CHECK(contains(p.message, "16.8 MB of weights and optimizer state"));
  CHECK(contains(p.message, "share of the RDU's DDR is 10.0 MB"));
  CHECK(contains(p.message, "more tiles (--num-tiles)"));
  CHECK(sambanova::plan_sections(g, sambanova::RduModel(t, 2, Optimization::O1)).fits);
}

TEST_CASE("sambanova backend: training on an RDU equals the CPU in o0 and o1", "[sambanova]") {
  const std::string opt = GENERATE("o0", "o1");
  INFO(opt);
  Generator gen(6);
  Tensor x = randn({16, 32}, &gen), y = randint(0, 10, {16}, &gen);
  manual_seed(7);
  RduMlp on_cpu(32, 24);
  manual_seed(7);
  RduMlp on_rdu(32, 24);
  optim::SGD sgd_cpu(on_cpu->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD sgd_rdu(on_rdu->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Options cpu;
  cpu.backend("cpu");
  auto a = trainingModel(on_cpu.ptr(), cpu, sgd_cpu, ce());
  auto b = trainingModel(on_rdu.ptr(), rdu_options("tiny", opt), sgd_rdu, ce());
  for (int i = 0; i < 3; ++i) {
    const Tensor la = a(x, y), lb = b(x, y);
    CHECK(lb.item<float>() == Approx(la.item<float>()).epsilon(1e-5));
  }
  for (size_t k = 0; k < on_cpu->parameters().size(); ++k) {
    const auto pa = on_cpu->parameters()[k].to_vector<float>();
    const auto pb = on_rdu->parameters()[k].to_vector<float>();
    for (size_t i = 0; i < pa.size(); ++i) CHECK(pb[i] == Approx(pa[i]).margin(1e-5));
  }
  const auto e = b.estimate(x, y);
  CHECK(e.memory.fits);
  CHECK(e.memory.device == "RDU");
  CHECK(contains(e.target, "tiny: RDU of 2 tiles"));
  CHECK(contains(e.target, opt));
  CHECK(e.micro_batch_seconds > 0);
}

TEST_CASE("sambanova backend: the estimate is the section plan's time", "[sambanova]") {
  Generator gen(8);
  Tensor x = randn({32, 64}, &gen), y = randint(0, 10, {32}, &gen);
  manual_seed(9);
  RduMlp model(64, 48);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1));
  Options o = rdu_options("sn30", "o1", "4");
  o.compileOnly(true);
  auto tm = trainingModel(model.ptr(), o, sgd, ce());
  const auto e = tm.estimate(x, y);
  auto step = runtime::trace_training_step(
      *model, sgd,
      [&](const std::vector<Tensor>& in) { return cross_entropy(model(in[0]), in[1]); },
      {ir::TensorMeta{{32, 64}, DType::Float32}, ir::TensorMeta{{32}, DType::Int64}});
  const auto t = sambanova::target_preset("sn30");
  const auto p = sambanova::plan_sections(step.graph, sambanova::RduModel(t, 4, Optimization::O1));
  // The step's time is its sections' plus the host's streams (inputs over PCIe).
  CHECK(e.micro_batch_seconds >= p.step_cycles / t.clock_hz);
  CHECK(e.micro_batch_seconds <= p.step_cycles / t.clock_hz * 1.01 + 1e-6);
  // Two data-parallel instances reduce their gradients over the RDU links, ring-wise.
  Options two = rdu_options("sn30", "o1", "4");
  two.replicationFactor(2).compileOnly(true);
  auto t2 = trainingModel(model.ptr(), two, sgd, ce());
  const auto e2 = t2.estimate(x, y);
  double grads = 0;
  for (auto& prm : model->parameters()) grads += static_cast<double>(prm.numel()) * 4;
  const double expect = (std::ceil(grads / 32e9 * 1.25e9) + 2 * 25000) / 1.25e9;
  CHECK(e2.allreduce_seconds == Approx(expect).epsilon(1e-6));
}

TEST_CASE("sambanova backend: bad options are refused by name", "[sambanova]") {
  auto be = backend::get_backend("sambanova");
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{2, 3}, DType::Float32});
  auto trace = tracer.finish({relu(x)});
  CHECK(contains(error_of([&] {
                   be->compile(trace.graph, {{"optimization", "o3"}});
                 }),
                 "optimization must be o0 or o1, got 'o3'"));
  CHECK(contains(error_of([&] {
                   be->compile(trace.graph, {{"num_ipus", "2"}});
                 }),
                 "unknown compile option 'num_ipus'"));
  CHECK(contains(error_of([&] {
                   be->compile(trace.graph, {{"target", "sn99"}});
                 }),
                 "unknown SambaNova target 'sn99'"));
  CHECK(contains(error_of([&] {
                   be->compile(trace.graph, {{"num_tiles", "12"}});
                 }),
                 "num_tiles must be a whole number of tiles in [1, 8] (the tiles of one sn30 "
                 "RDU), got '12'"));
  CHECK(contains(error_of([&] { be->compile(trace.graph, {{"num_tiles", "4x"}}); }), "got '4x'"));
  backend::ProgramOptions many;
  many.replicas = 5000;
  CHECK(contains(error_of([&] { be->compile(trace.graph, many, {}); }),
                 "5000 data-parallel instances of 8 tiles need more than the 64 RDUs"));
}
