// ipuml-mnist: the CNN of PopTorch's MNIST tutorial (mnist_poptorch.py), with its flags, trained
// with plain SGD and evaluated on the test set ("Accuracy on test set: XX.XX%").
//
// The training loop lives in train_epoch() / evaluate(), which take the model, optimizer and
// loaders, so a compiled (emulated-IPU) path can replace the eager step without touching the rest.
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/data/data.hpp>
#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/io/file.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/mnist_cnn.hpp>
#include <ipuml/optim/optim.hpp>

#include <CLI/CLI.hpp>

#include "compile_only.hpp"
#include "example_support.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ipuml;
using examples::Clock;
using examples::fixed;
using examples::Progress;
using examples::seconds_since;

struct Config {
  int64_t batch_size = 8;
  int64_t test_batch_size = 80;
  int64_t epochs = 10;
  double lr = 0.05;
  int64_t device_iterations = 50;
  uint64_t seed = 42;
  std::string data_dir;
  std::string checkpoint;
  int threads = 0;
  int64_t max_batches = 0;
  bool double_softmax = true;
  int64_t prefetch = 2;
  // Where training runs: "ipu" (the emulator, PopTorch's default), "cpu" (the same compiled
  // step on the CPU executor) or "eager" (op by op with autograd).
  std::string device = "ipu";
  std::string target = "ipu2";
  std::vector<std::string> target_overrides;
  int64_t ipus = 1;        // IPUs per replica: the network's blocks spread over them (BeginBlock)
  bool pipelined = false;  // PopTorch's PipelinedExecution instead of ShardedExecution
  int64_t replication_factor = 1;
  int64_t gradient_accumulation = 1;
  bool profile = true;
  bool allow_unverified = false;
  std::string report_dir;     // profile reports, one subdirectory per compiled program
  bool compile_only = false;  // estimate fit and throughput, train nothing
};

// Everything the flags say, checked before any data is read or any work starts: one clear line
// for the first problem.
void validate(const Config& cfg) {
  constexpr int64_t kMaxBatch = int64_t{1} << 31;
  auto bounded = [&](const char* flag, int64_t v) {
    IPUML_CHECK(v >= 1 && v <= kMaxBatch, "ipuml-mnist: ", flag, " ", v, " is outside [1, 2^31]");
  };
  bounded("--batch-size", cfg.batch_size);
  bounded("--test-batch-size", cfg.test_batch_size);
  bounded("--device-iterations", cfg.device_iterations);
  bounded("--replication-factor", cfg.replication_factor);
  bounded("--gradient-accumulation", cfg.gradient_accumulation);
  int64_t host = cfg.batch_size;
  for (int64_t f : {cfg.device_iterations, cfg.replication_factor, cfg.gradient_accumulation})
    IPUML_CHECK(!__builtin_mul_overflow(host, f, &host) && host <= kMaxBatch,
                "ipuml-mnist: --batch-size x --device-iterations x --replication-factor x "
                "--gradient-accumulation is more than 2^31 samples per host batch");
  IPUML_CHECK(std::isfinite(cfg.lr) && cfg.lr >= 0, "ipuml-mnist: --lr ", cfg.lr,
              " must be a finite number >= 0");
  IPUML_CHECK(cfg.epochs >= 1 && cfg.epochs <= 1000000, "ipuml-mnist: --epochs ", cfg.epochs,
              " is outside [1, 10^6]");
  IPUML_CHECK(cfg.threads >= 0 && cfg.threads <= 4096, "ipuml-mnist: --threads ", cfg.threads,
              " is outside [0, 4096]");
  IPUML_CHECK(cfg.prefetch >= 0 && cfg.prefetch <= 1024, "ipuml-mnist: --prefetch ", cfg.prefetch,
              " is outside [0, 1024]");
  // Every pipeline stage needs a micro-batch: 2N - 1 stages for N IPUs (PopTorch's rule).
  IPUML_CHECK(!cfg.pipelined || (cfg.ipus >= 2 && cfg.gradient_accumulation >= 2 * cfg.ipus - 1),
              "ipuml-mnist: --pipelined needs --ipus >= 2 and --gradient-accumulation >= ",
              2 * std::max<int64_t>(cfg.ipus, 2) - 1,
              " (2 x ipus - 1 pipeline stages), got --ipus ", cfg.ipus,
              " and --gradient-accumulation ", cfg.gradient_accumulation);
  // The target and its overrides (ranges included) as the compiler will see them.
  ipu::Target target = ipu::target_preset(cfg.target);
  for (const auto& o : cfg.target_overrides) ipu::apply_override(target, o);
  if (!cfg.data_dir.empty()) {
    std::error_code ec;
    // A missing directory is left to the reader, whose error says how to fetch the data.
    IPUML_CHECK(!std::filesystem::exists(cfg.data_dir, ec) ||
                    std::filesystem::is_directory(cfg.data_dir, ec),
                "ipuml-mnist: --data-dir '", cfg.data_dir, "' is not a directory");
  }
  // The checkpoint is written after the first epoch: an unwritable place is reported now.
  if (!cfg.checkpoint.empty()) io::check_writable_path(cfg.checkpoint, "ipuml-mnist: --checkpoint");
  examples::check_report_dir("ipuml-mnist", cfg.report_dir);
}

// What a resumed run must share with the saved one to continue it bit for bit, and the
// compiled model's run counter (which varies dropout between runs).
nn::StateDict training_state(const Config& cfg, uint64_t run_counter) {
  auto i64 = [](int64_t v) { return full({}, static_cast<double>(v), kInt64); };
  return {{"seed", i64(static_cast<int64_t>(cfg.seed))},
          {"batch_size", i64(cfg.batch_size)},
          {"device_iterations", i64(cfg.device_iterations)},
          {"replication_factor", i64(cfg.replication_factor)},
          {"gradient_accumulation", i64(cfg.gradient_accumulation)},
          {"compiled", i64(cfg.device != "eager")},
          {"run_counter", i64(static_cast<int64_t>(run_counter))}};
}

// Checks a checkpoint's training state against the flags; returns its run counter.
uint64_t resume_state(const Config& cfg, const nn::StateDict& saved) {
  if (saved.empty()) return 0;  // a checkpoint from before run counters were saved
  const nn::StateDict mine = training_state(cfg, 0);
  for (const auto& [key, t] : mine) {
    const Tensor* s = nn::find_in(saved, key);
    IPUML_CHECK(s != nullptr && s->numel() == 1 && s->dtype() == kInt64,
                "ipuml-mnist: --checkpoint '", cfg.checkpoint, "' has no training state '", key,
                "'");
    if (key == "run_counter") continue;
    const int64_t want = s->item<int64_t>(), have = t.item<int64_t>();
    IPUML_CHECK(want == have, "ipuml-mnist: --checkpoint '", cfg.checkpoint, "' was saved with ",
                key, " ", want, " but this run has ", have,
                "; resuming continues the saved run (use the same flags, or another checkpoint)");
  }
  const int64_t runs = nn::find_in(saved, "run_counter")->item<int64_t>();
  IPUML_CHECK(runs >= 0, "ipuml-mnist: --checkpoint '", cfg.checkpoint, "': run_counter ", runs,
              " is negative");
  return static_cast<uint64_t>(runs);
}

// Host batches an epoch or evaluation uses: all of them, or --max-batches.
int64_t batch_limit(const Config& cfg, int64_t available) {
  return cfg.max_batches > 0 ? std::min(cfg.max_batches, available) : available;
}

struct EpochStats {
  double mean_loss = 0;
  int64_t samples = 0;
  int64_t steps = 0;
  double seconds = 0;
};

// One epoch of eager training. Each host batch holds batch_size x device_iterations samples
// and gives device_iterations weight updates of batch_size samples each, as PopTorch does.
template <typename Loader>
EpochStats train_epoch(models::MnistCnnWithLoss& model, optim::Optimizer& optimizer, Loader& loader,
                       const Config& cfg, int64_t epoch, Progress& progress) {
  model->train();
  EpochStats st;
  double loss_sum = 0;
  const auto t0 = Clock::now();
  const int64_t batches = batch_limit(cfg, loader.size());
  int64_t b = 0;
  for (auto& batch : loader) {
    if (b == batches) break;
    const int64_t micro = cfg.batch_size;
    for (int64_t i = 0; i < cfg.device_iterations; ++i) {
      const Tensor x = batch.data.narrow(0, i * micro, micro);
      const Tensor y = batch.target.narrow(0, i * micro, micro);
      optimizer.zero_grad();
      auto [out, loss] = model(x, y);
      loss.backward();
      optimizer.step();
      loss_sum += loss.template item<float>();
      ++st.steps;
    }
    st.samples += batch.data.size(0);
    ++b;
    const double secs = seconds_since(t0);
    progress.update("Epoch ", epoch + 1, "/", cfg.epochs, " [", b, "/", batches, "] loss ",
                    fixed(loss_sum / double(st.steps), 4), "  ",
                    fixed(double(st.samples) / std::max(secs, 1e-9), 0), " samples/s");
  }
  progress.done();
  st.seconds = seconds_since(t0);
  st.mean_loss = st.steps ? loss_sum / double(st.steps) : 0.0;
  return st;
}

// The execution options the flags ask for; also what sizes the training DataLoader's batches.
Options make_options(const Config& cfg) {
  Options opts;
  opts.deviceIterations(cfg.device_iterations)
      .replicationFactor(cfg.replication_factor)
      .randomSeed(cfg.seed)
      .useIpuModel(cfg.device == "ipu")
      .target(cfg.target);
  opts.Training.gradientAccumulation(cfg.gradient_accumulation);
  if (cfg.pipelined) opts.setExecutionStrategy(runtime::ExecutionStrategy::Pipelined);
  if (!cfg.report_dir.empty()) opts.autoReportDirectory(cfg.report_dir);
  examples::apply_target_overrides(opts, cfg.target_overrides, "ipuml-mnist", cfg.ipus);
  return opts;
}

void split_blocks(models::MnistCnn& net, int64_t ipus) {
  if (ipus >= 2) runtime::BeginBlock(net->layer2, 1);
  if (ipus >= 3) runtime::BeginBlock(net->layer3, 2);
  if (ipus >= 4) runtime::BeginBlock(net->layer4, 3);
}

// The original's CrossEntropyLoss on the softmax output; otherwise NLL of log(probs), which
// equals cross-entropy on the logits.
runtime::LossFn mnist_loss(bool double_softmax) {
  return [double_softmax](const Tensor& probs, const Tensor& y) {
    return double_softmax ? cross_entropy(probs, y) : nll_loss(log(probs), y);
  };
}

// --compile-only: traces and compiles the training step the flags describe and prints whether
// it fits and how fast the configuration would train, reading no data and running nothing.
int compile_only(const Config& cfg) {
  manual_seed(cfg.seed);
  models::MnistCnn net;
  optim::SGD optimizer(net->parameters(), optim::SGDOptions(cfg.lr));
  split_blocks(net, cfg.ipus);
  Options opts = make_options(cfg);
  opts.compileOnly(true);
  auto tm = trainingModel(net.ptr(), opts, optimizer, mnist_loss(cfg.double_softmax));
  const int64_t rows = opts.combined_batch(cfg.batch_size);
  examples::print_compile_only(tm, examples::batch_shaped({rows, 1, 28, 28}, kFloat32),
                               examples::batch_shaped({rows}, kInt64));
  return 0;
}

// Graphcore's tutorial comparison: the same training step on one IPU, sharded over --ipus IPUs
// and pipelined over them, one host batch each from the same initial weights, with the
// simulated throughput of each side by side.
void compare_strategies(const Config& cfg, const Tensor& data, const Tensor& labels) {
  struct Row {
    const char* name;
    int64_t ipus;
    bool pipelined;
  };
  const Row rows[] = {
      {"single IPU", 1, false}, {"sharded", cfg.ipus, false}, {"pipelined", cfg.ipus, true}};
  std::cout << "Model parallelism (simulated, " << cfg.target << ", micro-batch " << cfg.batch_size
            << ", gradient accumulation " << cfg.gradient_accumulation << "):\n";
  for (const Row& r : rows) {
    Config c = cfg;
    c.ipus = r.ipus;
    c.pipelined = r.pipelined;
    std::cout << "  " << std::left << std::setw(11) << r.name << std::right;
    if (r.pipelined && c.gradient_accumulation < 2 * c.ipus - 1) {
      std::cout << "  needs --gradient-accumulation >= " << 2 * c.ipus - 1 << "\n";
      continue;
    }
    manual_seed(cfg.seed);
    models::MnistCnn net;
    split_blocks(net, c.ipus);
    optim::SGD opt(net->parameters(), optim::SGDOptions(cfg.lr));
    Options opts = make_options(c);
    opts.showCompilationProgressBar(false);
    opts.modelName(r.pipelined ? "pipelined" : r.ipus > 1 ? "sharded" : "single_ipu");
    auto tm = trainingModel(net.ptr(), opts, opt, [](const Tensor& probs, const Tensor& y) {
      return cross_entropy(probs, y);
    });
    tm(data, labels);
    const auto& st = tm.last_stats();
    std::cout << "  " << r.ipus << " IPU" << (r.ipus > 1 ? "s" : " ") << "  "
              << fixed(st.simulated_samples_per_second().value_or(0), 0) << " samples/s simulated, "
              << fixed(st.wall_samples_per_second(), 0) << " samples/s wall-clock\n";
  }
}

struct CompiledStats : EpochStats {
  double simulated_seconds = 0;
};

// One epoch through a compiled training model (emulated IPU or CPU executor): each host batch
// is one call, i.e. device_iterations weight updates over replicas x accumulation micro-batches.
template <typename Loader>
CompiledStats train_epoch_compiled(runtime::TrainingModel& tm, Loader& loader, const Config& cfg,
                                   int64_t epoch, Progress& progress) {
  CompiledStats st;
  double loss_sum = 0;
  int64_t loss_count = 0;
  const auto t0 = Clock::now();
  const int64_t batches = batch_limit(cfg, loader.size());
  int64_t b = 0;
  for (auto& batch : loader) {
    if (b == batches) break;
    const Tensor losses = tm(batch.data, batch.target);
    for (float l : losses.to_vector<float>()) {
      loss_sum += l;
      ++loss_count;
    }
    st.steps += cfg.device_iterations;
    st.samples += batch.data.size(0);
    if (tm.last_stats().simulated_seconds)
      st.simulated_seconds += *tm.last_stats().simulated_seconds;
    ++b;
    const double secs = seconds_since(t0);
    progress.update("Epoch ", epoch + 1, "/", cfg.epochs, " [", b, "/", batches, "] loss ",
                    fixed(loss_sum / double(std::max<int64_t>(loss_count, 1)), 4), "  ",
                    fixed(double(st.samples) / std::max(secs, 1e-9), 0), " samples/s");
  }
  progress.done();
  st.seconds = seconds_since(t0);
  st.mean_loss = loss_count ? loss_sum / double(loss_count) : 0.0;
  return st;
}

struct Accuracy {
  double percent = 0;
  int64_t samples = 0;
};

// Percentage of correct predictions of `predict` (images -> class probabilities) over every
// sample of the test loader (or --max-batches of it); evaluating nothing is an error, never 0%.
template <typename Loader, typename Predict>
Accuracy accuracy(Loader& loader, const Config& cfg, Progress& progress, Predict&& predict) {
  int64_t correct = 0, total = 0, b = 0;
  const int64_t batches = batch_limit(cfg, loader.size());
  for (auto& batch : loader) {
    if (b == batches) break;
    const Tensor probs = predict(batch.data);
    IPUML_CHECK(probs.dim() == 2 && probs.size(0) == batch.data.size(0),
                "ipuml-mnist: evaluation returned ", shape_str(probs.shape()), " for a batch of ",
                batch.data.size(0), " samples");
    const Tensor pred = argmax(probs, 1);
    correct += sum(eq(pred, batch.target).to(kInt64)).template item<int64_t>();
    total += batch.data.size(0);
    ++b;
    progress.update("Evaluating [", b, "/", batches, "]");
  }
  progress.done();
  IPUML_CHECK(total > 0, "ipuml-mnist: the evaluation covered 0 test samples");
  return {100.0 * double(correct) / double(total), total};
}

// PopTorch's inferenceModel for the test set, compiled for the largest micro-batch up to the
// test batch that fits the device (a batch of 10000 does not fit one IPU's tile memory); each
// test batch runs in pieces of that size, a short last piece padded.
template <typename Loader>
Accuracy evaluate_compiled(models::MnistCnn& net, const Options& opts, Loader& loader,
                           const Config& cfg, int64_t test_samples, Progress& progress) {
  int64_t micro = std::min(cfg.test_batch_size, std::max<int64_t>(test_samples, 1));
  std::optional<runtime::InferenceModel> im;
  for (;;) {
    try {
      im.emplace(inferenceModel(net.ptr(), opts));
      im->compile(zeros({micro, 1, 28, 28}));
      break;
    } catch (const Error& e) {
      if (micro == 1 || std::string(e.what()).find("Out of memory") == std::string::npos) throw;
      micro = (micro + 1) / 2;
    }
  }
  if (micro < cfg.test_batch_size)
    std::cout << "Evaluation micro-batch: " << micro << " (the largest that fits, up to "
              << cfg.test_batch_size << ")\n";
  return accuracy(loader, cfg, progress, [&](const Tensor& x) {
    std::vector<Tensor> parts;
    for (int64_t at = 0; at < x.size(0); at += micro)
      parts.push_back((*im)(x.narrow(0, at, std::min(micro, x.size(0) - at)).contiguous()));
    return parts.size() == 1 ? parts[0] : cat(parts, 0);
  });
}

// The network in eval mode, no grad.
template <typename Loader>
Accuracy evaluate(models::MnistCnn& net, Loader& loader, const Config& cfg, Progress& progress) {
  net->eval();
  NoGradGuard ng;
  return accuracy(loader, cfg, progress, [&](const Tensor& x) { return net(x); });
}

void print_accuracy(const Accuracy& a) {
  std::cout << "Accuracy on test set: " << fixed(a.percent, 2) << "%\n";
  std::cout << "Evaluated " << a.samples << " test samples\n";
}

// The tutorial's flags, then the execution options and the emulated target.
void add_flags(CLI::App& app, Config& cfg, bool& no_double_softmax) {
  app.add_option("--batch-size", cfg.batch_size, "Micro-batch size for training")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--test-batch-size", cfg.test_batch_size, "Batch size for testing")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--epochs", cfg.epochs, "Number of epochs to train")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--lr", cfg.lr, "Learning rate (plain SGD)")
      ->check(examples::number_at_least(0))
      ->capture_default_str();
  app.add_option("--device-iterations", cfg.device_iterations,
                 "Weight updates per host batch (the host batch is batch-size x device-iterations)")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--seed", cfg.seed, "Seed for initialisation, shuffling and dropout")
      ->capture_default_str();
  app.add_option("--data-dir", cfg.data_dir,
                 "MNIST IDX directory (default: the data cache, see scripts/fetch-data.sh mnist)");
  app.add_option("--checkpoint", cfg.checkpoint,
                 "HDF5 checkpoint: saved after each epoch, resumed from if it exists");
  app.add_option("--threads", cfg.threads, "Worker threads (0: all cores)")
      ->check(examples::integer_at_least(0))
      ->capture_default_str();
  app.add_option(
         "--max-batches", cfg.max_batches,
         "Stop each epoch's training and the evaluation after this many host batches (0: all)")
      ->check(examples::integer_at_least(0))
      ->capture_default_str();
  app.add_option("--prefetch", cfg.prefetch, "Host batches assembled ahead of training")
      ->check(examples::integer_at_least(0))
      ->capture_default_str();
  app.add_flag("--no-double-softmax", no_double_softmax,
               "Compute the loss on the logits instead of on the softmax output (the original "
               "applies softmax twice: Softmax layer, then CrossEntropyLoss)");
  app.add_option("--device", cfg.device, "ipu (emulated), cpu (compiled, CPU executor) or eager")
      ->check(CLI::IsMember({"ipu", "cpu", "eager"}))
      ->capture_default_str();
  app.add_option("--target", cfg.target, "Emulated IPU target: ipu1, ipu2, bow, tiny")
      ->capture_default_str();
  app.add_option("--set", cfg.target_overrides,
                 "Override a target field, e.g. --set clock_hz=1.85e9 (repeatable)");
  app.add_option("--ipus", cfg.ipus, "IPUs per replica; the blocks spread over them (BeginBlock)")
      ->check(examples::integer_in(1, 4))
      ->capture_default_str();
  app.add_flag("--pipelined", cfg.pipelined,
               "Pipelined execution over the --ipus IPUs (PopTorch's PipelinedExecution; needs "
               "--gradient-accumulation >= 2 x ipus - 1); without it, sharded");
  app.add_option("--replication-factor", cfg.replication_factor,
                 "Data-parallel replicas, one per IPU (group)")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--gradient-accumulation", cfg.gradient_accumulation,
                 "Micro-batches per weight update")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  bool no_double_softmax = false;
  CLI::App app{"ipuml-mnist: the CNN of PopTorch's MNIST tutorial, trained on an emulated IPU"};
  add_flags(app, cfg, no_double_softmax);
  bool no_profile = false;
  app.add_flag("--no-profile", no_profile, "Skip the profile summary");
  examples::add_report_dir_option(app, cfg.report_dir);
  bool flush_denormal = false;
  app.add_flag("--allow-unverified", cfg.allow_unverified,
               "Resume from a checkpoint without ipuml's integrity record (written by another "
               "tool); its contents are still checked");
  app.add_flag("--compile-only", cfg.compile_only, examples::kCompileOnlyHelp);
  app.add_flag("--flush-denormal", flush_denormal,
               "Flush denormal floats to zero (torch.set_flush_denormal): late epochs run faster");
  if (auto rc = examples::parse_command_line(app, argc, argv, "ipuml-mnist")) return *rc;
  cfg.double_softmax = !no_double_softmax;
  cfg.profile = !no_profile;
  const bool compiled = cfg.device != "eager";
  if (!compiled && (cfg.replication_factor > 1 || cfg.gradient_accumulation > 1 || cfg.ipus > 1))
    return examples::usage_error("ipuml-mnist",
                                 "--replication-factor, --gradient-accumulation and --ipus need "
                                 "--device ipu or cpu");
  if (cfg.compile_only && cfg.device != "ipu")
    return examples::usage_error(
        "ipuml-mnist", "--compile-only estimates the emulated IPU: it needs --device ipu");
  // Every flag is checked before anything is printed or read.
  try {
    validate(cfg);
  } catch (const std::exception& e) {
    return examples::usage_error("ipuml-mnist", e.what());
  }
  if (flush_denormal && !ipuml::set_flush_denormal(true))
    std::cerr << "ipuml-mnist: this CPU cannot flush denormals; --flush-denormal ignored\n";

  try {
    const auto t_start = Clock::now();
    if (cfg.threads > 0) set_num_threads(cfg.threads);
    if (cfg.compile_only) return compile_only(cfg);
    manual_seed(cfg.seed);

    // An explicit --data-dir is taken at its word (a missing file is an error saying how to
    // fetch the data) rather than quietly falling back to the cache.
    const std::string dir = cfg.data_dir.empty() ? datasets::find_mnist_dir() : cfg.data_dir;
    auto train_set = datasets::normalized_mnist(dir, true);
    auto test_set = datasets::normalized_mnist(dir, false);
    // As poptorch.DataLoader: a training host batch carries every device iteration's
    // micro-batch, and incomplete host batches are dropped.
    data::DataLoader train_loader(
        train_set, data::DataLoaderOptions()
                       .batch_size(compiled ? make_options(cfg).combined_batch(cfg.batch_size)
                                            : cfg.batch_size * cfg.device_iterations)
                       .shuffle(true)
                       .seed(cfg.seed)
                       .drop_last(true)
                       .prefetch(cfg.prefetch));
    data::DataLoader test_loader(
        test_set, data::DataLoaderOptions().batch_size(cfg.test_batch_size).prefetch(cfg.prefetch));
    IPUML_CHECK(train_loader.size() > 0, "ipuml-mnist: batch-size x device-iterations = ",
                cfg.batch_size * cfg.device_iterations, " exceeds the ", train_set.size(),
                " training samples");

    models::MnistCnn net;
    models::MnistCnnWithLoss model(net, cfg.double_softmax);
    optim::SGD optimizer(model->parameters(), optim::SGDOptions(cfg.lr));
    std::cout << *model << "\n";
    if (!cfg.double_softmax) std::cout << "(loss on the logits: --no-double-softmax)\n";

    // The checkpoint's step counts finished epochs; each epoch reshuffles and (eager) reseeds
    // dropout from (seed, epoch), and a compiled model continues its run counter (which varies
    // its dropout masks), so a resumed run continues bit for bit as an uninterrupted one.
    int64_t first_epoch = 0;
    uint64_t run_counter = 0;
    std::error_code exists_ec;
    if (!cfg.checkpoint.empty() && std::filesystem::exists(cfg.checkpoint, exists_ec)) {
      nn::StateDict opt_state, saved;
      io::CheckpointReadOptions read_options;
      read_options.allow_unverified = cfg.allow_unverified;
      first_epoch = io::load_checkpoint(cfg.checkpoint, *net, &opt_state, &saved, read_options);
      optimizer.load_state_dict(opt_state);
      run_counter = resume_state(cfg, saved);
      std::cout << "Resumed from " << cfg.checkpoint << " after epoch " << first_epoch << "\n";
    }

    Progress progress;
    if (compiled) {
      // PopTorch's execution options; BeginBlock spreads the blocks over --ipus IPUs.
      const Options opts = make_options(cfg);
      split_blocks(net, cfg.ipus);
      auto tm = trainingModel(net.ptr(), opts, optimizer, mnist_loss(cfg.double_softmax));
      tm.set_run_counter(run_counter);  // dropout continues where the saved run stopped
      double wall = 0, simulated = 0;
      int64_t samples = 0;
      for (int64_t epoch = first_epoch; epoch < cfg.epochs; ++epoch) {
        manual_seed(cfg.seed + 1000003ULL * static_cast<uint64_t>(epoch + 1));
        train_loader.set_epoch(static_cast<uint64_t>(epoch));
        const CompiledStats st = train_epoch_compiled(tm, train_loader, cfg, epoch, progress);
        wall += st.seconds;
        simulated += st.simulated_seconds;
        samples += st.samples;
        std::cout << "Epoch " << epoch + 1 << "/" << cfg.epochs << ": loss "
                  << fixed(st.mean_loss, 4) << ", " << st.steps << " steps, " << st.samples
                  << " samples in " << fixed(st.seconds, 1) << " s ("
                  << fixed(double(st.samples) / std::max(st.seconds, 1e-9), 0) << " samples/s)"
                  << std::endl;
        if (epoch == first_epoch && cfg.profile && cfg.device == "ipu")
          tm.printProfileSummary(std::cout);
        if (!cfg.checkpoint.empty())
          io::save_checkpoint(cfg.checkpoint, *net, optimizer.state_dict(), epoch + 1,
                              training_state(cfg, tm.run_counter()));
      }
      Options eval_opts = Options().useIpuModel(cfg.device == "ipu").target(cfg.target);
      eval_opts.modelName("evaluation");
      if (!cfg.report_dir.empty()) eval_opts.autoReportDirectory(cfg.report_dir);
      examples::apply_target_overrides(eval_opts, cfg.target_overrides, "ipuml-mnist", cfg.ipus);
      eval_opts.showCompilationProgressBar(false);
      const auto t_eval = Clock::now();
      const Accuracy acc = evaluate_compiled(net, eval_opts, test_loader, cfg,
                                             static_cast<int64_t>(test_set.size()), progress);
      std::cout << "Evaluation: " << fixed(seconds_since(t_eval), 1) << " s\n";
      print_accuracy(acc);
      if (samples > 0) {
        std::cout << "Training throughput: " << fixed(double(samples) / std::max(wall, 1e-9), 0)
                  << " samples/s wall-clock";
        if (simulated > 0)
          std::cout << ", " << fixed(double(samples) / simulated, 0) << " samples/s simulated on "
                    << cfg.replication_factor * cfg.ipus << " x " << cfg.target
                    << " (the whole configuration)";
        std::cout << "\n";
      }
      if (cfg.device == "ipu" && cfg.ipus > 1) {
        // One host batch of the training set, the first the loader gives.
        for (auto& batch : train_loader) {
          compare_strategies(cfg, batch.data, batch.target);
          break;
        }
      }
      std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
      return 0;
    }
    for (int64_t epoch = first_epoch; epoch < cfg.epochs; ++epoch) {
      manual_seed(cfg.seed + 1000003ULL * static_cast<uint64_t>(epoch + 1));
      train_loader.set_epoch(static_cast<uint64_t>(epoch));
      const EpochStats st = train_epoch(model, optimizer, train_loader, cfg, epoch, progress);
      std::cout << "Epoch " << epoch + 1 << "/" << cfg.epochs << ": loss " << fixed(st.mean_loss, 4)
                << ", " << st.steps << " steps, " << st.samples << " samples in "
                << fixed(st.seconds, 1) << " s ("
                << fixed(double(st.samples) / std::max(st.seconds, 1e-9), 0) << " samples/s)"
                << std::endl;
      if (!cfg.checkpoint.empty())
        io::save_checkpoint(cfg.checkpoint, *net, optimizer.state_dict(), epoch + 1,
                            training_state(cfg, 0));
    }

    const auto t_eval = Clock::now();
    const Accuracy acc = evaluate(net, test_loader, cfg, progress);
    std::cout << "Evaluation: " << fixed(seconds_since(t_eval), 1) << " s\n";
    print_accuracy(acc);
    std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
  } catch (const std::exception& e) {
    return examples::run_error("ipuml-mnist", e.what());
  }
  return 0;
}
