// What emulation costs: for each zoo model, one training step compiled for emulated GC200s and
// for the CPU executor, both run in alternating rounds on the same data. Prints
//   ipuml emulator_cost model=M ipus=N compile_s=C cpu_step_ms=A ipu_step_ms=B ratio=R fits=F
// with R the median over rounds of (emulated step / CPU executor step) wall time.
// Usage: bench_emulator_cost [--models mnist8,mnist64,neuron,resnet50,bert,gpt2] [--rounds N]
//                            [--threads T]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include <CLI/CLI.hpp>

#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/models.hpp>

using namespace ipuml;
using Clock = std::chrono::steady_clock;

namespace {

struct Case {
  ir::Trace trace;
  std::vector<Tensor> inputs;
  int64_t ipus = 1;
};

// Random inputs of each input's shape; integer inputs in [0, high).
std::vector<Tensor> inputs_for(const ir::Graph& g, int64_t high) {
  std::vector<Tensor> xs;
  Generator gen(11);
  for (auto v : g.inputs) {
    const auto& m = g.meta(v);
    xs.push_back(is_integral(m.dtype) ? randint(0, high, m.shape, &gen) : randn(m.shape, &gen));
  }
  return xs;
}

Case make_case(const std::string& name) {
  Case c;
  auto ce = [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
  if (name == "mnist8" || name == "mnist64") {
    const int64_t b = name == "mnist8" ? 8 : 64;
    static auto net = models::MnistCnn();
    static optim::SGD sgd(net->parameters(), optim::SGDOptions(0.05));
    c.trace = runtime::trace_training_step(
        *net, sgd, [&](std::vector<Tensor>& x) { return ce(net(x[0]), x[1]); },
        {{{b, 1, 28, 28}, kFloat32}, {{b}, kInt64}});
    c.inputs = inputs_for(c.trace.graph, 10);
  } else if (name == "neuron") {
    static auto net = models::NeuronInverter(models::NeuronInverterDesign::hpar_gc4());
    static optim::AdamW opt(net->parameters(), optim::AdamWOptions(1e-3));
    c.trace = runtime::trace_training_step(
        *net, opt, [&](std::vector<Tensor>& x) { return mse_loss(net(x[0]), x[1]); },
        {{{192, 1600, 4}, kFloat32}, {{192, 15}, kFloat32}});
    c.inputs = inputs_for(c.trace.graph, 1);
  } else if (name == "resnet50") {
    static auto net = models::resnet50();
    static optim::SGD opt(net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    c.trace = runtime::trace_training_step(
        *net, opt, [&](std::vector<Tensor>& x) { return ce(net(x[0]), x[1]); },
        {{{1, 3, 224, 224}, kFloat32}, {{1}, kInt64}});
    c.inputs = inputs_for(c.trace.graph, 1000);
  } else if (name == "bert") {
    static auto net =
        models::BertForPreTraining(models::BertConfig::base().layers_per_ipu({0, 4, 4, 4}));
    static optim::LAMB opt(net->parameters(), optim::LAMBOptions(1e-3));
    c.trace = runtime::trace_training_step(
        *net, opt,
        [&](std::vector<Tensor>& x) {
          auto [mlm, nsp] = net->forward(x[0], x[1], x[2]);
          return add(ce(reshape(mlm, {-1, mlm.size(2)}), reshape(x[3], {-1})), ce(nsp, x[4]));
        },
        {{{1, 128}, kInt64},
         {{1, 128}, kInt64},
         {{1, 128}, kInt64},
         {{1, 128}, kInt64},
         {{1}, kInt64}});
    c.inputs = inputs_for(c.trace.graph, 2);
    c.ipus = 4;
  } else if (name == "gpt2") {
    static auto net =
        models::GPT2LMHeadModel(models::GPT2Config::small().layers_per_ipu({0, 4, 4, 4}));
    static optim::AdamW opt(net->parameters(), optim::AdamWOptions(1.5e-4));
    c.trace = runtime::trace_training_step(
        *net, opt, [&](std::vector<Tensor>& x) { return models::causal_lm_loss(net(x[0]), x[1]); },
        {{{1, 128}, kInt64}, {{1, 128}, kInt64}}, /*optimizer_off_chip=*/true);
    c.inputs = inputs_for(c.trace.graph, 50257);
    c.ipus = 4;
  } else {
    fail("bench_emulator_cost: unknown model '", name,
         "' (expected mnist8, mnist64, neuron, resnet50, bert or gpt2)");
  }
  return c;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ipuml: wall time of emulated training steps against the CPU executor"};
  std::vector<std::string> names{"mnist8", "mnist64", "neuron", "resnet50", "bert", "gpt2"};
  int rounds = 5, threads = 0;
  std::string only;
  app.add_option("--models", names, "zoo models to run")->delimiter(',');
  app.add_option("--rounds", rounds, "alternating rounds per model")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "oneTBB threads (0: all cores)");
  app.add_option("--only", only,
                 "run only this side, for --rounds seconds, and print nothing (for a profiler)")
      ->check(CLI::IsMember({"cpu", "ipu"}));
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) set_num_threads(threads);
  for (const auto& name : names) {
    Case c = make_case(name);
    auto target = ipu::target_preset("ipu2");
    target.num_ipus = c.ipus;
    ipu::CompileOptions o;
    o.progress = false;
    o.allow_out_of_memory = true;  // the cost of emulation is measured either way
    const auto t0 = Clock::now();
    auto exe = ipu::compile(c.trace.graph, target, o);
    const double compile_s = seconds_since(t0);
    cpu::GraphExecutor ref(c.trace.graph);
    std::vector<Tensor> cpu_states, ipu_states;
    for (auto& s : c.trace.states) {
      cpu_states.push_back(s.clone());
      ipu_states.push_back(s.clone());
    }
    // Steps per round: at least 0.5 s of CPU executor time.
    auto t1 = Clock::now();
    ref.run(c.inputs, cpu_states, 0);
    exe->run(c.inputs, ipu_states, 0);  // both warmed up
    const double one = std::max(1e-4, seconds_since(t1) / 2);
    const int steps = std::max(1, static_cast<int>(0.5 / one));
    if (!only.empty()) {
      for (int i = 0; i < 2 * steps * rounds; ++i) {
        if (only == "cpu")
          ref.run(c.inputs, cpu_states, static_cast<uint64_t>(i + 1));
        else
          exe->run(c.inputs, ipu_states, static_cast<uint64_t>(i + 1));
      }
      continue;
    }
    std::vector<double> ratios, cpu_ms, ipu_ms;
    for (int r = 0; r < rounds; ++r) {
      double a = 0, b = 0;
      for (int first = 0; first < 2; ++first) {  // alternate which side runs first
        const bool cpu_now = (first == 0) == (r % 2 == 0);
        const auto s0 = Clock::now();
        for (int i = 0; i < steps; ++i) {
          if (cpu_now)
            ref.run(c.inputs, cpu_states, static_cast<uint64_t>(i + 1));
          else
            exe->run(c.inputs, ipu_states, static_cast<uint64_t>(i + 1));
        }
        (cpu_now ? a : b) = seconds_since(s0) / steps;
      }
      cpu_ms.push_back(a * 1e3);
      ipu_ms.push_back(b * 1e3);
      ratios.push_back(b / a);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf(
        "ipuml emulator_cost model=%s ipus=%lld compile_s=%.2f cpu_step_ms=%.2f ipu_step_ms=%.2f "
        "ratio=%.2f fits=%s\n",
        name.c_str(), static_cast<long long>(c.ipus), compile_s, median(cpu_ms), median(ipu_ms),
        median(ratios), exe->memory_report().out_of_memory ? "no" : "yes");
    std::fflush(stdout);
  }
  return 0;
}
