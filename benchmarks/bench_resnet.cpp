// ResNet-50 (torchvision layout, 224x224, 1000 classes) on the CPU: the training step (cross
// entropy, SGD momentum 0.9, weight decay 1e-4) eager and traced once for the CPU executor, and
// inference in eval mode, eager (no grad) and traced (inferenceModel). Prints
// "ipuml resnet50 train|infer batch=B threads=T mode=M samples_per_s=X"; with --profile, the
// traced step's time per op kind (the CPU executor's op timing) after each graph line.
// Usage: bench_resnet [--task train|infer] [--batch 4] [--threads T] [--seconds S]
//                     [--modes eager,graph] [--profile]
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>

#include <CLI/CLI.hpp>

#include <ipuml/backends/cpu/op_profile.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/resnet.hpp>

#include "print_op_profile.hpp"
#include "peak.hpp"
#include "threads.hpp"
#include "timing.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ipuml ResNet-50 training step and inference throughput"};
  std::string task = "train";
  int64_t batch = 4;
  int threads = 1;
  double seconds = 3.0;
  bool profile = false;
  std::vector<std::string> modes{"graph"};
  app.add_option("--task", task, "train or infer")->check(CLI::IsMember({"train", "infer"}));
  app.add_option("--batch", batch, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "oneTBB threads")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "time per mode");
  app.add_option("--modes", modes, "eager, graph (CPU executor)")->delimiter(',');
  app.add_flag("--profile", profile, "print the traced step's time per op kind");
  CLI11_PARSE(app, argc, argv);
  return bench::with_threads(threads, [&] {
    using namespace ipuml;
    const bool train = task == "train";
    for (const auto& mode : modes) {
      manual_seed(0);
      auto net = models::resnet50();
      optim::SGD sgd(net->parameters(), optim::SGDOptions(0.01).momentum(0.9).weight_decay(1e-4));
      Tensor x = randn({batch, 3, 224, 224});
      Tensor y = randint(0, 1000, {batch});
      auto loss = [](const Tensor& out, const Tensor& t) { return cross_entropy(out, t); };
      std::function<void()> step;
      std::unique_ptr<runtime::TrainingModel> tm;
      std::unique_ptr<runtime::InferenceModel> im;
      const Options opts = Options().useIpuModel(false).showCompilationProgressBar(false);
      if (!train) net->eval();
      if (mode == "eager" && train) {
        step = [&] {
          sgd.zero_grad();
          loss(net(x), y).backward();
          sgd.step();
        };
      } else if (mode == "eager") {
        step = [&] {
          NoGradGuard no_grad;
          net(x);
        };
      } else if (train) {
        tm = std::make_unique<runtime::TrainingModel>(net.ptr(), opts, sgd, loss);
        step = [&] { (*tm)(x, y); };
      } else {
        im = std::make_unique<runtime::InferenceModel>(net.ptr(), opts);
        step = [&] { (*im)(x); };
      }
      const bool prof = profile && mode == "graph";
      int64_t reps = 0;
      const double elapsed = time_profiled(step, seconds, reps, prof);
      std::printf("ipuml resnet50 %s batch=%lld threads=%d mode=%s samples_per_s=%.2f\n",
                  task.c_str(), static_cast<long long>(batch), threads, mode.c_str(),
                  static_cast<double>(reps * batch) / elapsed);
      if (tm)
        bench::print_peak_fraction(("resnet50 train batch=" + std::to_string(batch)).c_str(),
                                   bench::graph_flops(tm->step_graph()),
                                   static_cast<double>(reps) / elapsed, threads);
      if (prof) print_op_profile(static_cast<double>(reps + 1));  // + the warm-up call
      std::fflush(stdout);
    }
    return 0;
  });
}
