// The Cerebras CS-2 as a target of the emulator core: its presets and overrides, its costs
// written out by hand, weight streaming through the core (a weight streams in for every layer
// that reads it, hidden behind the layer before except at the iteration's start), the pipelined
// layout of a step's layers on the wafer, the choice between the two modes, and training steps
// through the cerebras backend that equal the CPU's.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include <catch2/catch.hpp>

#include <ipuml/backends/cerebras/cerebras_backend.hpp>
#include <ipuml/backends/cerebras/layer_pipeline.hpp>
#include <ipuml/backends/cerebras/wse_model.hpp>
#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/models/gptj.hpp>
#include <ipuml/ipuml.hpp>

#include "../support/error_of.hpp"

using namespace ipuml;
using cerebras::ExecutionMode;
using testing::error_of;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

emu::CompileOptions quiet() {
  emu::CompileOptions o;
  o.progress = false;
  return o;
}

struct MlpImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr};
  MlpImpl(int64_t in, int64_t hidden) : nn::Module("Mlp") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(in, hidden)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(hidden, 10)));
  }
  Tensor forward(const Tensor& x) override { return l2(relu(l1(x))); }
};
IPUML_MODULE(Mlp);

struct DeepImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr}, head{nullptr};
  explicit DeepImpl(int64_t w) : nn::Module("Deep") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(w, w)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(w, w)));
    l3 = register_module("l3", nn::Linear(nn::LinearOptions(w, w)));
    head = register_module("head", nn::Linear(nn::LinearOptions(w, 10)));
  }
  Tensor forward(const Tensor& x) override { return head(relu(l3(relu(l2(relu(l1(x))))))); }
};
IPUML_MODULE(Deep);

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

Options cerebras_options(const std::string& strategy, const std::string& target = "wse2") {
  Options o;
  o.showCompilationProgressBar(false).backend("cerebras");
  o.backendOption("cerebras", "execution_strategy", strategy);
  o.backendOption("cerebras", "target", target);
  return o;
}

}  // namespace

TEST_CASE("cerebras target: the wse2 preset is the CS-2's published wafer", "[cerebras]") {
  const auto t = cerebras::target_preset("wse2");
  CHECK(t.pes() == 750 * 994);  // the SDK's user rectangle
  CHECK(t.bytes_per_pe == 48 * 1024);
  CHECK(t.wafer_bytes() == Approx(745500.0 * 49152.0));
  // The derived peak: 8 fp16 FLOPs per PE per cycle (4-wide FMAC) at 1.1 GHz.
  CHECK(static_cast<double>(t.pes()) * t.flops_per_cycle_fp16 * t.clock_hz ==
        Approx(6.56e15).epsilon(1e-3));
  CHECK(t.blocks() == 93 * 124);
  CHECK(cerebras::target_preset("tiny").blocks() == 16);
  CHECK(cerebras::target_preset("wse1").pes() == 600 * 595);
}

TEST_CASE("cerebras target: overrides and JSON round-trip and bad values are refused",
          "[cerebras]") {
  auto t = cerebras::target_preset("wse2");
  cerebras::apply_override(t, "clock_hz=0.85e9");
  CHECK(t.clock_hz == 0.85e9);
  cerebras::apply_override(t, " pe_block = 16 ");
  CHECK(t.blocks() == 46 * 62);
  const auto back = cerebras::target_from_json(cerebras::to_json(t));
  CHECK(cerebras::to_json(back) == cerebras::to_json(t));
  const auto before = cerebras::to_json(t);
  CHECK(contains(error_of([&] { cerebras::apply_override(t, "pes=3"); }),
                 "unknown field 'pes'; valid fields: name, fabric_columns"));
  CHECK(contains(error_of([&] { cerebras::apply_override(t, "pe_block=0"); }), "pe_block"));
  CHECK(contains(error_of([&] { cerebras::apply_override(t, "pe_block=900"); }),
                 "must fit the fabric"));
  CHECK(contains(error_of([&] { cerebras::apply_override(t, "pe_block=1"); }), "planning blocks"));
  CHECK(contains(error_of([&] { cerebras::apply_override(t, "clock_hz=fast"); }),
                 "clock_hz expects a number, got 'fast'"));
  CHECK(cerebras::to_json(t) == before);  // unchanged by the refused overrides
  CHECK(contains(error_of([] { cerebras::target_preset("wse9"); }),
                 "expected one of: wse2, wse1, tiny"));
}

TEST_CASE("cerebras target: a PE block's costs written out by hand", "[cerebras]") {
  const auto t = cerebras::target_preset("tiny");  // 16 x 16 PEs in 4 x 4 blocks
  const cerebras::WseModel m(t, ExecutionMode::WeightStreaming);
  CHECK(m.machine().units_per_device == 16);
  CHECK(m.machine().mesh_columns == 4);
  CHECK(m.machine().bytes_per_unit == 16 * 49152);
  // 16 PEs x 8 fp16 FLOPs a cycle: 1600 FLOPs take ceil(12.5) = 13 cycles, after the launch.
  CHECK(m.compute_cycles(1600, 0, DType::Float16, true, 1 << 20) == 20 + 13);
  // Elementwise fp32, one value a PE a cycle, or the SRAM's 24 B a PE a cycle if slower.
  CHECK(m.compute_cycles(64, 4800, DType::Float32, false, 16) == 20 + 13);
  CHECK(m.compute_cycles(2, 0, DType::Float32, false, 2) == 20 + 1);  // two PEs busy
  CHECK(m.peak_flops_per_cycle(DType::Float16) == 128);
  // 800 B over two sides of 4 links of 4 B (25 cycles), across a 2 x 3 block region
  // ((2 + 3) x 4 - 2 = 18 hops) and a ramp off and on (2 x 2).
  CHECK(m.region_exchange_cycles(800, 2, 3) == 25 + 18 + 4);
  CHECK(m.sync_cycles() == 4);  // no barrier: a ramp on and off
  // MemoryX and the worker nodes at the CS-2's 150 GB/s: 150 kB in 1 us = 1100 cycles.
  CHECK(m.streaming_cycles(150e3) == 1100);
  CHECK(m.host_cycles(150e3, 4) == 1100);
  // SwarmX sums 4 CS-2s' gradients in a tree of 2 levels of 2 us.
  CHECK(m.allreduce_cycles(1e6, 4, 1) == 2 * 2200);
  CHECK(m.allreduce_cycles(1e6, 1, 1) == 0);
  CHECK(m.streaming().per_read);
  CHECK(m.streaming().prefetch);
  const cerebras::WseModel lp(t, ExecutionMode::Pipelined);
  CHECK_FALSE(lp.streaming().per_read);
  CHECK_FALSE(lp.streaming().prefetch);
  CHECK(contains(lp.to_json(), "\"execution_mode\":\"pipeline\""));
}

TEST_CASE(
    "cerebras target: weight streaming streams a weight for each read behind the layer "
    "before",
    "[cerebras]") {
  const auto t = cerebras::target_preset("tiny");
  Generator gen(1);
  Tensor w = randn({64, 64}, &gen);
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{64, 64}, DType::Float32});
  auto trace = tracer.finish({matmul(matmul(x, w), w)});
  ir::Graph g = trace.graph;
  REQUIRE(g.states.size() == 1);
  g.values[static_cast<size_t>(g.states[0])].offchip = true;
  auto model = std::make_shared<const cerebras::WseModel>(t, ExecutionMode::WeightStreaming);
  const emu::Plan p = emu::plan_graph(g, model, quiet());
  const double io = model->host_cycles(64 * 64 * 4, 1);  // x in, the result out
  const double stream = model->streaming_cycles(64 * 64 * 4);
  // The first matmul's 2 x 64^3 FLOPs take far longer than w's second trip: only the first
  // (the iteration's start, nothing computing ahead of it) shows.
  double first = 0;
  for (auto& s : p.supersteps)
    if (s.node >= 0 && g.nodes[static_cast<size_t>(s.node)].kind == ir::OpKind::MatMul) {
      first = s.compute + s.exchange + s.sync;
      break;
    }
  REQUIRE(first > stream);
  REQUIRE(p.cycles.per_device.size() == 1);
  CHECK(p.cycles.per_device[0].host == 2 * io + stream);
  // No weight is resident: it is on the wafer only while a layer reads it.
  for (auto& u : p.memory.units) CHECK(u.bytes[emu::kState] == 0);
  // The same program with the weight on the wafer streams nothing.
  auto lp = std::make_shared<const cerebras::WseModel>(t, ExecutionMode::Pipelined);
  const emu::Plan on_chip = emu::plan_graph(trace.graph, lp, quiet());
  CHECK(on_chip.cycles.per_device[0].host == 2 * io);
}

TEST_CASE("cerebras layer pipeline: one matrix layer takes the wafer at its rate", "[cerebras]") {
  const auto t = cerebras::target_preset("wse2");
  Generator gen(2);
  Tensor w = randn({256, 512}, &gen);
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{32, 256}, DType::Float32});
  auto trace = tracer.finish({matmul(x, w)});
  const auto l = cerebras::plan_layer_pipeline(trace.graph, t, 32);
  REQUIRE(l.fits);
  REQUIRE(l.kernels.size() == 1);
  const auto& k = l.kernels[0];
  // 2 x 32 x 256 x 512 FLOPs at 2 a PE a cycle (fp32), per sample of 32.
  const double work = 2.0 * 32 * 256 * 512 / 2.0 / 32;
  CHECK(k.work_cycles == Approx(work));
  CHECK(k.state_bytes == 256 * 512 * 4);
  CHECK(k.pes <= t.pes());
  CHECK(k.pes >= t.pes() - 1);  // alone, it takes the wafer
  CHECK(l.sample_cycles == Approx(work / static_cast<double>(k.pes)));
  CHECK(l.step_cycles == Approx(32 * l.sample_cycles + l.fill_cycles));
}

TEST_CASE("cerebras layer pipeline: a training step's regions share the wafer by their work",
          "[cerebras]") {
  manual_seed(3);
  Mlp model(784, 128);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto step = runtime::trace_training_step(
      *model, sgd,
      [&](const std::vector<Tensor>& in) { return cross_entropy(model(in[0]), in[1]); },
      {ir::TensorMeta{{64, 784}, DType::Float32}, ir::TensorMeta{{64}, DType::Int64}});
  const auto t = cerebras::target_preset("wse2");
  const auto l = cerebras::plan_layer_pipeline(step.graph, t, 64);
  REQUIRE(l.fits);
  CHECK(l.kernels.size() >= 4);  // forward and backward matrix ops each start a region
  int64_t used = 0;
  double params = 0;
  for (auto& p : model->parameters()) params += static_cast<double>(p.numel()) * 4;
  for (auto& k : l.kernels) {
    used += k.pes;
    CHECK(k.pes >= k.min_pes);
    CHECK(k.cycles_per_sample <= l.sample_cycles * (1 + 1e-12));
  }
  CHECK(used == l.pes_used);
  CHECK(used <= t.pes());
  CHECK(l.kernels[static_cast<size_t>(l.slowest)].cycles_per_sample == l.sample_cycles);
  // Weights and momentum stay on the wafer, and the gradients summed over the batch that go
  // back to another region.
  CHECK(l.state_bytes >= 2 * params);
  CHECK(l.state_bytes <= 3 * params);
  CHECK(l.step_cycles == Approx(64 * l.sample_cycles + l.fill_cycles + std::ceil(l.update_cycles)));
  CHECK(l.update_cycles > 0);
}

TEST_CASE("cerebras layer pipeline: a model too large for the wafer names its layers",
          "[cerebras]") {
  Generator gen(5);
  Tensor w = randn({2048, 2048}, &gen);  // 16.8 MB; the tiny wafer holds 12.6 MB
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{4, 2048}, DType::Float32});
  auto trace = tracer.finish({matmul(x, w)});
  const auto l = cerebras::plan_layer_pipeline(trace.graph, cerebras::target_preset("tiny"), 4);
  CHECK_FALSE(l.fits);
  CHECK(l.pes_needed > 256);
  CHECK(contains(l.message, "does not fit the tiny wafer"));
  CHECK(contains(l.message, "layer 0 (MatMul"));
  CHECK(contains(l.message, "Weight streaming (execution_strategy weight_streaming)"));
}

TEST_CASE("cerebras backend: training on a CS-2 equals the CPU in both execution modes",
          "[cerebras]") {
  const std::string strategy = GENERATE("auto", "weight_streaming");
  INFO(strategy);
  Generator gen(6);
  Tensor x = randn({16, 32}, &gen), y = randint(0, 10, {16}, &gen);
  manual_seed(7);
  Mlp on_cpu(32, 24);
  manual_seed(7);
  Mlp on_csx(32, 24);
  optim::SGD sgd_cpu(on_cpu->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD sgd_csx(on_csx->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Options cpu;
  cpu.backend("cpu");
  auto a = trainingModel(on_cpu.ptr(), cpu, sgd_cpu, ce());
  auto b = trainingModel(on_csx.ptr(), cerebras_options(strategy, "tiny"), sgd_csx, ce());
  for (int i = 0; i < 3; ++i) {
    const Tensor la = a(x, y), lb = b(x, y);
    CHECK(lb.item<float>() == Approx(la.item<float>()).epsilon(1e-5));
  }
  for (size_t k = 0; k < on_cpu->parameters().size(); ++k) {
    const auto pa = on_cpu->parameters()[k].to_vector<float>();
    const auto pb = on_csx->parameters()[k].to_vector<float>();
    for (size_t i = 0; i < pa.size(); ++i) CHECK(pb[i] == Approx(pa[i]).margin(1e-5));
  }
  const auto e = b.estimate(x, y);
  CHECK(e.memory.fits);
  CHECK(e.micro_batch_seconds > 0);
  if (strategy == "auto") {
    CHECK(contains(e.target, "pipelined execution (every layer fits the wafer at once"));
    CHECK(e.memory.unit == "PE");
  } else {
    CHECK(contains(e.target, "weight streaming (execution_strategy weight_streaming)"));
    CHECK(e.memory.unit == "PE block");
    CHECK(e.step_split.host > 0);  // the weights' first trip from MemoryX
  }
}

TEST_CASE("cerebras backend: several CS-2s run weight streaming and pipelining refuses them",
          "[cerebras]") {
  Generator gen(8);
  Tensor x = randn({16, 32}, &gen), y = randint(0, 10, {16}, &gen);
  manual_seed(9);
  Mlp model(32, 24);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1));
  Options o = cerebras_options("auto", "tiny");
  o.replicationFactor(2).compileOnly(true);
  auto tm = trainingModel(model.ptr(), o, sgd, ce());
  const auto e = tm.estimate(x, y);
  CHECK(contains(e.target, "num_csx=2: only weight streaming runs data parallel across CS-2s"));
  CHECK(e.allreduce_seconds == Approx(2e-6).epsilon(1e-3));  // one SwarmX level
  Options forced = cerebras_options("pipeline", "tiny");
  forced.replicationFactor(2).compileOnly(true);
  auto tp = trainingModel(model.ptr(), forced, sgd, ce());
  CHECK(contains(error_of([&] { tp.estimate(x, y); }), "pipelined execution runs on one CS-2"));
}

TEST_CASE(
    "cerebras backend: a step too large to pipeline streams its weights, and forcing the "
    "pipeline says why",
    "[cerebras]") {
  // Three layers of 1.6 MB with SGD's momentum and gradients: 14.8 MB at once do not fit the
  // tiny wafer's 12.6 MB, but one layer's weights, momentum and gradient at a time do.
  Generator gen(10);
  Tensor x = randn({8, 640}, &gen), y = randint(0, 10, {8}, &gen);
  manual_seed(11);
  Deep model(640);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  Options o = cerebras_options("auto", "tiny");
  o.compileOnly(true);
  auto tm = trainingModel(model.ptr(), o, sgd, ce());
  const auto e = tm.estimate(x, y);
  CHECK(contains(e.target, "weight streaming (pipelined execution would need"));
  INFO(e.memory.message);
  CHECK(e.memory.fits);
  // Forced, the pipeline is reported not to fit by the estimate and refused by a run.
  Options forced = cerebras_options("pipeline", "tiny");
  forced.compileOnly(true);
  auto tp = trainingModel(model.ptr(), forced, sgd, ce());
  const auto ep = tp.estimate(x, y);
  CHECK_FALSE(ep.memory.fits);
  CHECK(contains(ep.memory.message, "pipelined execution does not fit the tiny wafer"));
  CHECK(contains(ep.memory.message, "Weight streaming (execution_strategy weight_streaming)"));
  auto run = trainingModel(model.ptr(), cerebras_options("pipeline", "tiny"), sgd, ce());
  const std::string err = error_of([&] { run(x, y); });
  CHECK(contains(err, "pipelined execution does not fit the tiny wafer"));
}

TEST_CASE("cerebras backend: bad options are refused by name", "[cerebras]") {
  auto be = backend::get_backend("cerebras");
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{2, 3}, DType::Float32});
  auto trace = tracer.finish({relu(x)});
  CHECK(contains(error_of([&] {
                   be->compile(trace.graph, {{"execution_strategy", "fast"}});
                 }),
                 "execution_strategy must be auto, pipeline or weight_streaming, got 'fast'"));
  CHECK(contains(error_of([&] {
                   be->compile(trace.graph, {{"num_ipus", "2"}});
                 }),
                 "unknown compile option 'num_ipus'"));
  CHECK(contains(error_of([&] {
                   be->compile(trace.graph, {{"target", "wse9"}});
                 }),
                 "unknown Cerebras target 'wse9'"));
  backend::ProgramOptions many;
  many.replicas = 500;
  CHECK(contains(error_of([&] { be->compile(trace.graph, many, {}); }),
                 "num_csx (500) must be in [1, 192]"));
}

TEST_CASE("cerebras target: in weight streaming MemoryX runs the optimizer off the wafer",
          "[cerebras]") {
  manual_seed(4);
  Mlp model(256, 128);
  optim::Adam adam(model->parameters(), optim::AdamOptions(1e-3));
  auto step = runtime::trace_training_step(
      *model, adam,
      [&](const std::vector<Tensor>& in) { return cross_entropy(model(in[0]), in[1]); },
      {ir::TensorMeta{{32, 256}, DType::Float32}, ir::TensorMeta{{32}, DType::Int64}});
  ir::Graph g = step.graph;
  for (auto v : g.states) g.values[static_cast<size_t>(v)].offchip = true;
  auto t = cerebras::target_preset("wse2");
  const auto fast = std::make_shared<const cerebras::WseModel>(t, ExecutionMode::WeightStreaming);
  const emu::Plan p = emu::plan_graph(g, fast, quiet());
  // No optimizer update runs on the wafer, and none takes its memory.
  int updates = 0;
  for (auto& n : g.nodes) updates += ir::is_elementwise_update(n.kind);
  REQUIRE(updates == 4);  // two weights and two biases
  for (auto& s : p.supersteps)
    if (s.node >= 0)
      CHECK_FALSE(ir::is_elementwise_update(g.nodes[static_cast<size_t>(s.node)].kind));
  // Its time is MemoryX's: Adam reads a weight, its gradient and two moments and writes the
  // weight and the moments back, 7 x 4 bytes a parameter; with MemoryX made slow that is the
  // step's tail, beyond everything the wafer does.
  double params = 0;
  for (auto& q : model->parameters()) params += static_cast<double>(q.numel());
  t.memoryx_bytes_per_second = 1e6;
  const auto slow = std::make_shared<const cerebras::WseModel>(t, ExecutionMode::WeightStreaming);
  const emu::Plan ps = emu::plan_graph(g, slow, quiet());
  const double exposed = ps.cycles.per_device[0].host - p.cycles.per_device[0].host;
  const double expect = 28 * params / t.memoryx_bytes_per_second * t.clock_hz;
  CHECK(exposed >= expect * 0.99);
  CHECK(exposed <= expect * 1.01);
  // Pipelined, the same step updates its weights in their regions: nothing runs off the wafer.
  const auto lp = std::make_shared<const cerebras::WseModel>(t, ExecutionMode::Pipelined);
  const emu::Plan on_chip = emu::plan_graph(step.graph, lp, quiet());
  int on_wafer = 0;
  for (auto& s : on_chip.supersteps)
    on_wafer += s.node >= 0 && ir::is_elementwise_update(g.nodes[static_cast<size_t>(s.node)].kind);
  CHECK(on_wafer == 4);
}

TEST_CASE(
    "cerebras weight streaming: the activations kept for the backward pass spread over the "
    "wafer",
    "[cerebras]") {
  // Each layer's results stay live from the forward pass to the backward one, and where each
  // goes on the mesh is the placement's choice: counting where those bytes already lie (not
  // only how many regions cover a PE block) keeps them from piling onto the same blocks.
  manual_seed(3);
  const int64_t seq = 512;
  models::GPTJForCausalLM net(models::GPTJConfig()
                                  .vocab_size(512)
                                  .n_positions(seq)
                                  .n_embd(512)
                                  .n_layer(8)
                                  .n_head(8)
                                  .rotary_dim(16));
  optim::SGD sgd(net->parameters(), optim::SGDOptions(0.01));
  auto step =
      runtime::trace_training_step(*net, sgd,
                                   [&](const std::vector<Tensor>& in) {
                                     return models::shifted_causal_lm_loss(net(in[0]), in[0]);
                                   },
                                   {ir::TensorMeta{{2, seq}, DType::Int64}});
  ir::Graph g = step.graph;
  for (auto v : g.states) g.values[static_cast<size_t>(v)].offchip = true;
  const auto wse = std::make_shared<const cerebras::WseModel>(cerebras::target_preset("wse2"),
                                                              ExecutionMode::WeightStreaming);
  const emu::Plan p = emu::plan_graph(g, wse, quiet());
  // Each block's activations at its own peak: the fullest 1 % of blocks near the mean (6.4x it
  // when only regions were counted). One op's result on one block may still stand out.
  std::vector<double> act;
  for (const auto& u : p.memory.units)
    act.push_back(static_cast<double>(u.bytes[emu::kActivations]));
  std::sort(act.begin(), act.end());
  const double mean =
      std::accumulate(act.begin(), act.end(), 0.0) / static_cast<double>(act.size());
  const double p99 = act[act.size() * 99 / 100];
  INFO("activations on a PE block: mean " << mean << " bytes, 99th percentile " << p99);
  CHECK(p99 < 2 * mean);
}
