// Neuron-Inverter (hpar_gc4, 2,980,203 parameters) training throughput at the original's local
// batch 192 with AdamW and MSE: eager steps, and the step traced once and run by the CPU executor.
// Prints "ipuml neuron_inverter train batch=B threads=T mode=M samples_per_s=X".
// Usage: bench_neuron_train [--batch 192] [--threads T] [--seconds S] [--modes eager,graph]
#include <cstdio>
#include <functional>

#include <CLI/CLI.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/models/neuron_inverter.hpp>

#include "timing.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ipuml Neuron-Inverter training throughput"};
  int64_t batch = 192;
  int threads = 1;
  double seconds = 3.0;
  std::vector<std::string> modes{"eager", "graph"};
  app.add_option("--batch", batch, "local batch size")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "oneTBB threads")->check(CLI::PositiveNumber);
  app.add_option("--seconds", seconds, "time per mode");
  app.add_option("--modes", modes, "eager, graph (CPU executor)")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  ipuml::set_num_threads(threads);
  using namespace ipuml;
  for (const auto& mode : modes) {
    manual_seed(0);
    models::NeuronInverter net(models::NeuronInverterDesign::hpar_gc4());
    optim::AdamW adamw(net->parameters(), optim::AdamWOptions(1e-3));
    Tensor x = randn({batch, 1600, 4});
    Tensor y = rand({batch, 15});
    std::function<void()> step;
    std::unique_ptr<runtime::TrainingModel> tm;
    if (mode == "eager") {
      step = [&] {
        adamw.zero_grad();
        models::neuron_inverter_loss(net(x), y).backward();
        adamw.step();
      };
    } else {
      Options opts = Options().useIpuModel(false).showCompilationProgressBar(false);
      tm = std::make_unique<runtime::TrainingModel>(net.ptr(), opts, adamw,
                                                    models::neuron_inverter_loss);
      step = [&] { (*tm)(x, y); };
    }
    int64_t reps = 0;
    const double elapsed = time_repeated(step, seconds, reps);
    std::printf("ipuml neuron_inverter train batch=%lld threads=%d mode=%s samples_per_s=%.1f\n",
                static_cast<long long>(batch), threads, mode.c_str(),
                static_cast<double>(reps * batch) / elapsed);
    std::fflush(stdout);
  }
  return 0;
}
