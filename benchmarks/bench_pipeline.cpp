// Model and data parallelism on the emulated IPU, wall clock and simulated, in one run:
// a network split over 2 IPUs trained single-IPU, sharded and pipelined (the wall-clock ratio
// shows the pipeline's stages really overlap on this host), and replica scaling 1-2-4-8 (the
// simulated throughput shows the cost of the gradient all-reduce).
//
//   build/benchmarks/bench_pipeline [--width 512] [--micro 16] [--accumulation 16] [--seconds 3]
//                                   [--threads N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <ipuml/backends/ipu/ipu_backend.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/nn/nn.hpp>
#include <ipuml/optim/optim.hpp>
#include <ipuml/runtime/block.hpp>
#include <ipuml/runtime/training_model.hpp>

#include "timing.hpp"

using namespace ipuml;

namespace {

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

struct Result {
  double wall_per_step = 0;
  double simulated_rate = 0;
};

Result measure(int64_t w, int64_t micro, int64_t g, int64_t r, int64_t ipus, bool pipelined,
               double seconds, int64_t host_replica_threads = 0) {
  manual_seed(1);
  Tower t(w);
  if (ipus > 1) runtime::BeginBlock(t->l4, 1);
  optim::SGD opt(t->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  Options o = Options()
                  .showCompilationProgressBar(false)
                  .gradientAccumulation(g)
                  .replicationFactor(r)
                  .hostReplicaThreads(host_replica_threads)
                  .setTargetOption("num_ipus", std::to_string(std::max<int64_t>(8, r * ipus)));
  if (pipelined) o.setExecutionStrategy(runtime::ExecutionStrategy::Pipelined);
  auto model = trainingModel(
      t.ptr(), o, opt, [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); });
  Generator gen(2);
  Tensor x = randn({micro * g * r, w}, &gen);
  Tensor y = randint(0, 10, {micro * g * r}, &gen);
  int64_t reps = 0;
  const double s = time_repeated([&] { model(x, y); }, seconds, reps);
  Result res;
  res.wall_per_step = s / static_cast<double>(reps);
  res.simulated_rate = model.last_stats().simulated_samples_per_second().value_or(0);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t w = 512, micro = 16, g = 16;
  double seconds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i];
    if (f == "--width")
      w = std::atoll(argv[i + 1]);
    else if (f == "--micro")
      micro = std::atoll(argv[i + 1]);
    else if (f == "--accumulation")
      g = std::atoll(argv[i + 1]);
    else if (f == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (f == "--threads")
      set_num_threads(std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "bench_pipeline: unknown flag %s\n", f.c_str());
      return 2;
    }
  }
  std::printf(
      "# tower of 4 x Linear(%lld) + head, micro-batch %lld, gradient accumulation %lld, "
      "%d threads\n",
      static_cast<long long>(w), static_cast<long long>(micro), static_cast<long long>(g),
      get_num_threads());
  const Result single = measure(w, micro, g, 1, 1, false, seconds);
  const Result sharded = measure(w, micro, g, 1, 2, false, seconds);
  const Result piped = measure(w, micro, g, 1, 2, true, seconds);
  auto line = [&](const char* name, const Result& r) {
    std::printf("%-22s wall %8.2f ms/step  simulated %10.0f samples/s\n", name,
                r.wall_per_step * 1e3, r.simulated_rate);
  };
  line("single IPU", single);
  line("sharded, 2 IPUs", sharded);
  line("pipelined, 2 IPUs", piped);
  std::printf("pipelined / sharded: wall-clock speed-up %.2fx, simulated %.2fx\n",
              sharded.wall_per_step / piped.wall_per_step,
              piped.simulated_rate / sharded.simulated_rate);
  std::printf("pipelined / single IPU: simulated %.2fx\n",
              piped.simulated_rate / single.simulated_rate);
  std::printf(
      "# replicas (single-IPU replicas, one all-reduce per update); wall: the replicas one at a "
      "time (hostReplicaThreads(1)) and at the same time (one per host core)\n");
  double base = 0;
  for (int64_t r : {1, 2, 4, 8}) {
    const Result res = measure(w, micro, g, r, 1, false, seconds / 2);
    const Result serial = r > 1 ? measure(w, micro, g, r, 1, false, seconds / 2, 1) : res;
    if (r == 1) base = res.simulated_rate;
    std::printf(
        "replicas %lld: simulated %10.0f samples/s  (%.2fx of 1 replica, %.0f%% of linear)  "
        "wall %8.2f ms/step one at a time, %8.2f at once (%.2fx)\n",
        static_cast<long long>(r), res.simulated_rate, res.simulated_rate / base,
        100.0 * res.simulated_rate / (base * static_cast<double>(r)), serial.wall_per_step * 1e3,
        res.wall_per_step * 1e3, serial.wall_per_step / res.wall_per_step);
  }
  return 0;
}
