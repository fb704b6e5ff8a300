// MNIST CNN training throughput (the PopTorch tutorial network, plain SGD, double softmax as
// the original): eager steps, and the same step traced once and run by a compiled backend.
// Prints "ipuml mnist_cnn train batch=B threads=T mode=M samples_per_s=X" for mode eager and
// graph (CPU executor), and ipu (the IPU emulator) when that backend is registered.
// With --profile, the graph mode's line is followed by its time per op kind (print_op_profile.hpp).
// Usage: bench_mnist_train [--batch B] [--threads T] [--seconds S] [--modes eager,graph,ipu]
//                          [--profile]
#include <cstdio>
#include <functional>

#include <CLI/CLI.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/models/mnist_cnn.hpp>

#include "peak.hpp"
#include "print_op_profile.hpp"
#include "threads.hpp"
#include "timing.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ipuml MNIST CNN training throughput"};
  int64_t batch = 8;
  int threads = 1;
  double seconds = 3.0;
  std::vector<std::string> modes{"eager", "graph", "ipu"};
  app.add_option("--batch", batch, "micro-batch size")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "oneTBB threads")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "time per mode");
  app.add_option("--modes", modes, "eager, graph (CPU executor), ipu (emulator)")->delimiter(',');
  bool profile = false;
  app.add_flag("--profile", profile, "print the traced step's time per op kind");
  CLI11_PARSE(app, argc, argv);
  return bench::with_threads(threads, [&] {
    using namespace ipuml;
    auto ce = [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
    for (const auto& mode : modes) {
      if (mode == "ipu" && backend::registry().count("ipu") == 0) continue;
      manual_seed(0);
      models::MnistCnn net;
      optim::SGD sgd(net->parameters(), optim::SGDOptions(0.03));
      Tensor x = randn({batch, 1, 28, 28});
      Tensor y = randint(0, 10, {batch});
      std::function<void()> step;
      std::unique_ptr<runtime::TrainingModel> tm;
      if (mode == "eager") {
        step = [&] {
          sgd.zero_grad();
          cross_entropy(net(x), y).backward();
          sgd.step();
        };
      } else {
        Options opts = Options().useIpuModel(mode == "ipu").showCompilationProgressBar(false);
        tm = std::make_unique<runtime::TrainingModel>(net.ptr(), opts, sgd, ce);
        step = [&] { (*tm)(x, y); };
      }
      const bool prof = profile && mode == "graph";
      int64_t reps = 0;
      const double elapsed = time_profiled(step, seconds, reps, prof);
      std::printf("ipuml mnist_cnn train batch=%lld threads=%d mode=%s samples_per_s=%.1f\n",
                  static_cast<long long>(batch), threads, mode.c_str(),
                  static_cast<double>(reps * batch) / elapsed);
      if (mode == "graph")
        bench::print_peak_fraction(("mnist_cnn train batch=" + std::to_string(batch)).c_str(),
                                   bench::graph_flops(tm->step_graph()),
                                   static_cast<double>(reps) / elapsed, threads);
      if (prof) print_op_profile(static_cast<double>(reps + 1));  // + the warm-up call
      std::fflush(stdout);
    }
    return 0;
  });
}
