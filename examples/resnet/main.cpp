// ipuml-resnet: torchvision's ResNets trained as Graphcore's vision/cnns/pytorch trains them
// (its flags where they apply), on generated images or a real image set with augmentation, on
// the CPU (eager or compiled) or emulated IPUs with replicas, accumulation and pipeline splits.
//
// The recipe: SGD with momentum (optionally Nesterov), weight decay on conv and linear weights
// only, label smoothing, linear warm-up then a cosine schedule stepped per weight update, loss
// scaling for the 16-bit precisions. Evaluation runs in eval mode with the running statistics.
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/data/data.hpp>
#include <ipuml/datasets/generated_images.hpp>
#include <ipuml/datasets/image_sets.hpp>
#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/io/file.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/resnet.hpp>
#include <ipuml/optim/optim.hpp>

#include <CLI/CLI.hpp>

#include "compile_only.hpp"
#include "config_presets.hpp"
#include "example_support.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ipuml;
using examples::Clock;
using examples::fixed;
using examples::Progress;
using examples::seconds_since;

constexpr const char* kWho = "ipuml-resnet";

struct Config {
  std::string model = "cifar_resnet18";
  std::string data = "generated";
  int64_t image_size = 0;   // 0: 32 for the CIFAR models, 224 for the others
  int64_t num_classes = 0;  // generated data only; 0: 10 for CIFAR models, 1000 otherwise
  int64_t micro_batch = 16;
  int64_t gradient_accumulation = 1;
  int64_t replicas = 1;
  int64_t device_iterations = 1;
  std::vector<std::string> pipeline_splits;
  std::string execution = "pipelined";
  std::string precision = "32.32";
  std::string norm_type = "batch";
  int64_t norm_groups = 32;
  double lr = 0.1;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 1e-4;
  double label_smoothing = 0.1;
  double loss_scaling = 0;  // 0: 128 for the 16-bit precisions, 1 for 32.32
  std::string lr_schedule = "cosine";
  double epochs = 1;
  double warmup_epochs = 0;
  int64_t samples_per_epoch = 0;  // 0: the whole set (generated: 1024)
  int64_t eval_samples = 0;       // 0: the whole test set (generated: 256)
  int64_t eval_batch = 64;
  std::string validation = "after";
  bool recompute = false;
  // Share of tile memory for convolution and matmul temporaries: one value, or one per IPU.
  // Empty: 0.15 for the 16-bit precisions on an IPU, the library's 0.6 otherwise.
  std::vector<double> available_memory_proportion;
  bool optimizer_state_offchip = false, replicated_tensor_sharding = false;
  uint64_t seed = 42;
  std::string device = "ipu";
  std::string target = "ipu2";
  std::vector<std::string> target_overrides;
  std::string report_dir;  // profile reports, one subdirectory per compiled program
  int threads = 0;
  int64_t prefetch = 4;
  std::string checkpoint;
  bool allow_unverified = false;
  bool bench_loader = false;
  bool compare_strategies = false;
  bool profile = true;
  std::string config;
  bool compile_only = false;

  bool cifar() const { return model.rfind("cifar_", 0) == 0; }
  bool half() const { return precision != "32.32"; }
  bool compiled() const { return device != "eager"; }
  bool generated() const { return data == "generated"; }
  std::string torchvision_name() const { return cifar() ? model.substr(6) : model; }
  int64_t ipus_per_replica() const { return static_cast<int64_t>(pipeline_splits.size()) + 1; }
  bool pipelined() const { return !pipeline_splits.empty() && execution == "pipelined"; }
  int64_t epochs_whole() const { return static_cast<int64_t>(std::ceil(epochs)); }
};

// Everything the flags say, checked before any data is read: one clear line for the first
// problem.
void validate(const Config& c) {
  examples::check_report_dir(kWho, c.report_dir);
  const std::vector<std::string> models = {
      "resnet18",       "resnet34",       "resnet50",       "resnet101",       "resnet152",
      "cifar_resnet18", "cifar_resnet34", "cifar_resnet50", "cifar_resnet101", "cifar_resnet152"};
  IPUML_CHECK(std::find(models.begin(), models.end(), c.model) != models.end(), kWho, ": --model '",
              c.model, "' is not one of resnet18|34|50|101|152 or cifar_resnet18|34|50|101|152");
  for (double p : c.available_memory_proportion)
    IPUML_CHECK(p > 0 && p <= 1, kWho, ": --available-memory-proportion ", p, " is not in (0, 1]");
  const auto proportions = static_cast<int64_t>(c.available_memory_proportion.size());
  IPUML_CHECK(proportions <= 1 || proportions == c.ipus_per_replica(), kWho,
              ": --available-memory-proportion takes one value or one per IPU (",
              c.ipus_per_replica(), " with these --pipeline-splits), got ", proportions);
  IPUML_CHECK(c.precision == "16.16" || c.precision == "16.32" || c.precision == "32.32", kWho,
              ": --precision '", c.precision, "' is not one of 16.16, 16.32, 32.32");
  IPUML_CHECK(c.norm_type == "batch" || c.norm_type == "group", kWho, ": --norm-type '",
              c.norm_type, "' is not one of batch, group");
  constexpr int64_t kMax = int64_t{1} << 31;
  auto bounded = [&](const char* flag, int64_t v, int64_t lo) {
    IPUML_CHECK(v >= lo && v <= kMax, kWho, ": ", flag, " ", v, " is outside [", lo, ", 2^31]");
  };
  bounded("--micro-batch-size", c.micro_batch, 1);
  bounded("--gradient-accumulation", c.gradient_accumulation, 1);
  bounded("--replicas", c.replicas, 1);
  bounded("--device-iterations", c.device_iterations, 1);
  bounded("--eval-batch-size", c.eval_batch, 1);
  bounded("--samples-per-epoch", c.samples_per_epoch, 0);
  bounded("--eval-samples", c.eval_samples, 0);
  bounded("--num-classes", c.num_classes, 0);
  IPUML_CHECK(c.image_size == 0 || (c.image_size >= 8 && c.image_size <= 1024), kWho,
              ": --image-size ", c.image_size, " is outside [8, 1024]");
  int64_t host = c.micro_batch;
  for (int64_t f : {c.device_iterations, c.replicas, c.gradient_accumulation})
    IPUML_CHECK(!__builtin_mul_overflow(host, f, &host) && host <= kMax, kWho,
                ": --micro-batch-size x --device-iterations x --replicas x "
                "--gradient-accumulation is more than 2^31 samples per host batch");
  IPUML_CHECK(std::isfinite(c.lr) && c.lr >= 0, kWho, ": --lr ", c.lr,
              " must be a finite number >= 0");
  IPUML_CHECK(std::isfinite(c.momentum) && c.momentum >= 0 && c.momentum < 1, kWho, ": --momentum ",
              c.momentum, " is outside [0, 1)");
  IPUML_CHECK(!c.nesterov || c.momentum > 0, kWho, ": --nesterov needs --momentum > 0");
  IPUML_CHECK(std::isfinite(c.weight_decay) && c.weight_decay >= 0, kWho, ": --weight-decay ",
              c.weight_decay, " must be a finite number >= 0");
  IPUML_CHECK(c.label_smoothing >= 0 && c.label_smoothing < 1, kWho, ": --label-smoothing ",
              c.label_smoothing, " is outside [0, 1)");
  IPUML_CHECK(c.loss_scaling == 0 || (std::isfinite(c.loss_scaling) && c.loss_scaling > 0), kWho,
              ": --loss-scaling ", c.loss_scaling, " must be a finite number > 0");
  IPUML_CHECK(std::isfinite(c.epochs) && c.epochs > 0 && c.epochs <= 100000, kWho, ": --epoch ",
              c.epochs, " is outside (0, 100000]");
  IPUML_CHECK(std::isfinite(c.warmup_epochs) && c.warmup_epochs >= 0 && c.warmup_epochs < c.epochs,
              kWho, ": --warmup-epoch ", c.warmup_epochs, " must be >= 0 and below --epoch ",
              c.epochs);
  IPUML_CHECK(c.threads >= 0 && c.threads <= 4096, kWho, ": --threads ", c.threads,
              " is outside [0, 4096]");
  IPUML_CHECK(c.prefetch >= 0 && c.prefetch <= 1024, kWho, ": --prefetch ", c.prefetch,
              " is outside [0, 1024]");
  if (!c.compiled())
    IPUML_CHECK(c.replicas == 1 && c.gradient_accumulation == 1 && c.pipeline_splits.empty() &&
                    !c.optimizer_state_offchip && !c.replicated_tensor_sharding,
                kWho,
                ": --replicas, --gradient-accumulation, --pipeline-splits, "
                "--optimizer-state-offchip and --replicated-tensor-sharding need --device ipu or "
                "cpu");
  IPUML_CHECK(c.pipeline_splits.empty() || c.device == "ipu", kWho,
              ": --pipeline-splits places layers on IPUs; it needs --device ipu");
  const int64_t stages = 2 * c.ipus_per_replica() - 1;
  IPUML_CHECK(!c.pipelined() || c.gradient_accumulation >= stages, kWho, ": --pipeline-splits ",
              c.pipeline_splits.size(), " (", c.ipus_per_replica(), " IPUs, ", stages,
              " pipeline stages) needs --gradient-accumulation >= ", stages, ", got ",
              c.gradient_accumulation, " (or --execution sharded)");
  IPUML_CHECK(!c.compare_strategies || (c.device == "ipu" && !c.pipeline_splits.empty()), kWho,
              ": --compare-strategies needs --device ipu and --pipeline-splits");
  IPUML_CHECK(!c.compile_only || c.device == "ipu", kWho,
              ": --compile-only estimates the emulated IPU: it needs --device ipu");
  ipu::Target target = ipu::target_preset(c.target);
  for (const auto& o : c.target_overrides) ipu::apply_override(target, o);
  if (!c.checkpoint.empty()) io::check_writable_path(c.checkpoint, "ipuml-resnet: --checkpoint");
}

int64_t image_size(const Config& c) { return c.image_size ? c.image_size : c.cifar() ? 32 : 224; }

models::ResNet make_net(const Config& c, int64_t classes, const std::vector<std::string>& splits) {
  models::ResNetOptions o;
  o.num_classes(classes)
      .cifar_stem(c.cifar())
      .norm(models::resnet_norm_from_name(c.norm_type))
      .norm_groups(c.norm_groups)
      .pipeline_splits(splits)
      .recompute_blocks(c.recompute);
  auto net = models::resnet(c.torchvision_name(), o);
  if (c.half()) net->half();
  return net;
}

// Graphcore's recipe: SGD, weight decay on conv and linear weights only, loss scaling, float32
// master weights for 16.32.
std::unique_ptr<optim::SGD> make_optimizer(const Config& c, models::ResNet& net) {
  auto opt = optim::make_with_decay_groups<optim::SGD>(net->parameters(),
                                                       optim::SGDOptions(c.lr)
                                                           .momentum(c.momentum)
                                                           .nesterov(c.nesterov)
                                                           .weight_decay(c.weight_decay));
  if (c.precision == "16.32") opt->keep_master_weights();
  return opt;
}

double loss_scaling(const Config& c) {
  return c.loss_scaling > 0 ? c.loss_scaling : c.half() ? 128.0 : 1.0;
}

Options make_options(const Config& c, bool pipelined) {
  Options o;
  o.deviceIterations(c.device_iterations)
      .replicationFactor(c.replicas)
      .randomSeed(c.seed)
      .useIpuModel(c.device == "ipu")
      .target(c.target);
  o.Training.gradientAccumulation(c.gradient_accumulation);
  if (c.precision == "16.16") o.Precision.setPartialsType(kFloat16);
  // ResNet-50's convolutions need a smaller share of tile memory for temporaries to fit
  // (Graphcore's --available-memory-proportion); the planner trades it for cycles.
  if (c.available_memory_proportion.size() == 1) {
    o.setAvailableMemoryProportion(c.available_memory_proportion[0]);
  } else if (!c.available_memory_proportion.empty()) {
    examples::set_memory_proportion_per_ipu(o, c.available_memory_proportion);
  } else if (c.device == "ipu" && c.half()) {
    o.setAvailableMemoryProportion(0.15);
  }
  o.TensorLocations.setOptimizerLocation(
      runtime::TensorLocationSettings()
          .useOnChipStorage(!c.optimizer_state_offchip)
          .useReplicatedTensorSharding(c.replicated_tensor_sharding));
  o.setExecutionStrategy(pipelined ? runtime::ExecutionStrategy::Pipelined
                                   : runtime::ExecutionStrategy::Sharded);
  examples::apply_target_overrides(o, c.target_overrides, kWho, c.ipus_per_replica());
  if (!c.report_dir.empty()) o.autoReportDirectory(c.report_dir);
  return o;
}

// The loss on float32 logits whatever the model's precision.
runtime::LossFn make_loss(double smoothing) {
  return [smoothing](const Tensor& out, const Tensor& y) {
    return cross_entropy(out.dtype() == kFloat32 ? out : cast(out, kFloat32), y, Reduction::Mean,
                         smoothing);
  };
}

Tensor to_model_dtype(const Config& c, const Tensor& x) { return c.half() ? cast(x, kFloat16) : x; }

// What a resumed run must share with the saved one to continue it.
nn::StateDict training_state(const Config& c, uint64_t run_counter, int64_t updates) {
  auto i64 = [](int64_t v) { return full({}, static_cast<double>(v), kInt64); };
  return {{"seed", i64(static_cast<int64_t>(c.seed))},
          {"micro_batch_size", i64(c.micro_batch)},
          {"device_iterations", i64(c.device_iterations)},
          {"replicas", i64(c.replicas)},
          {"gradient_accumulation", i64(c.gradient_accumulation)},
          {"image_size", i64(image_size(c))},
          {"compiled", i64(c.compiled())},
          {"run_counter", i64(static_cast<int64_t>(run_counter))},
          {"updates", i64(updates)}};
}

struct Resumed {
  uint64_t run_counter = 0;
  int64_t updates = 0;
};

Resumed resume_state(const Config& c, const nn::StateDict& saved) {
  const nn::StateDict mine = training_state(c, 0, 0);
  for (const auto& [key, t] : mine) {
    const Tensor* s = nn::find_in(saved, key);
    IPUML_CHECK(s != nullptr && s->numel() == 1 && s->dtype() == kInt64, kWho, ": --checkpoint '",
                c.checkpoint, "' has no training state '", key, "'");
    if (key == "run_counter" || key == "updates") continue;
    const int64_t want = s->item<int64_t>(), have = t.item<int64_t>();
    IPUML_CHECK(want == have, kWho, ": --checkpoint '", c.checkpoint, "' was saved with ", key, " ",
                want, " but this run has ", have,
                "; resuming continues the saved run (use the same flags, or another checkpoint)");
  }
  Resumed r;
  const int64_t runs = nn::find_in(saved, "run_counter")->item<int64_t>();
  r.updates = nn::find_in(saved, "updates")->item<int64_t>();
  IPUML_CHECK(runs >= 0 && r.updates >= 0, kWho, ": --checkpoint '", c.checkpoint,
              "': negative run_counter or updates");
  r.run_counter = static_cast<uint64_t>(runs);
  return r;
}

// The learning rate per weight update: linear warm-up then half a cosine, or constant.
std::unique_ptr<optim::LRScheduler> make_schedule(const Config& c, optim::Optimizer& opt,
                                                  int64_t updates_per_epoch) {
  if (c.lr_schedule == "constant") return nullptr;
  const auto total = std::max<int64_t>(
      2, static_cast<int64_t>(std::llround(c.epochs * static_cast<double>(updates_per_epoch))));
  const auto warmup = std::min<int64_t>(
      total - 1,
      static_cast<int64_t>(std::llround(c.warmup_epochs * static_cast<double>(updates_per_epoch))));
  return std::make_unique<optim::CosineWithWarmup>(opt, warmup, total);
}

struct EpochStats {
  double loss = 0;
  int64_t samples = 0, updates = 0;
  double seconds = 0, data_wait = 0, simulated = 0;
  bool have_simulated = false;
};

struct Accuracy {
  double percent = 0;
  int64_t samples = 0;
};

// The training loop shared by every device: `step(batch)` runs one host batch and returns its
// losses; the loader's waits are timed so a starved step shows.
template <typename Loader, typename Step>
EpochStats run_epoch(Loader& loader, int64_t batches, const Config& c, int64_t epoch,
                     Progress& progress, optim::LRScheduler* sched, int64_t updates_per_batch,
                     Step&& step) {
  EpochStats st;
  double loss_sum = 0;
  int64_t losses = 0;
  const auto t0 = Clock::now();
  auto wait0 = Clock::now();
  int64_t b = 0;
  for (auto it = loader.begin(); !(it == loader.end()) && b < batches; ++it) {
    st.data_wait += seconds_since(wait0);
    const data::Example& batch = *it;
    for (float l : step(batch)) {
      loss_sum += l;
      ++losses;
    }
    st.samples += batch.data.size(0);
    st.updates += updates_per_batch;
    for (int64_t u = 0; sched && u < updates_per_batch; ++u) sched->step();
    ++b;
    const double secs = seconds_since(t0);
    progress.update("Epoch ", epoch + 1, "/", c.epochs_whole(), " [", b, "/", batches, "] loss ",
                    fixed(loss_sum / double(std::max<int64_t>(losses, 1)), 4), "  ",
                    fixed(double(st.samples) / std::max(secs, 1e-9), 1), " img/s");
    wait0 = Clock::now();
  }
  progress.done();
  st.seconds = seconds_since(t0);
  st.loss = losses ? loss_sum / double(losses) : 0.0;
  return st;
}

// Accuracy of `predict` (images -> logits) over the evaluation loader.
template <typename Loader, typename Predict>
Accuracy accuracy(Loader& loader, int64_t limit, Progress& progress, Predict&& predict) {
  int64_t correct = 0, total = 0, b = 0;
  for (auto& batch : loader) {
    if (total >= limit) break;
    const int64_t take = std::min(batch.data.size(0), limit - total);
    const Tensor x = batch.data.narrow(0, 0, take).contiguous();
    const Tensor y = batch.target.narrow(0, 0, take);
    Tensor logits = predict(x);
    if (logits.dtype() != kFloat32) logits = cast(logits, kFloat32);
    IPUML_CHECK(logits.dim() == 2 && logits.size(0) == take, kWho, ": evaluation returned ",
                shape_str(logits.shape()), " for ", take, " images");
    correct += sum(eq(argmax(logits, 1), y).to(kInt64)).template item<int64_t>();
    total += take;
    progress.update("Evaluating [", ++b, "] ", total, "/", limit, " images");
  }
  progress.done();
  IPUML_CHECK(total > 0, kWho, ": the evaluation covered 0 images");
  return {100.0 * double(correct) / double(total), total};
}

// The loader alone, as fast as it goes: images per second with augmentation, on the
// prefetcher's oneTBB workers.
template <typename Loader>
void bench_loader(Loader& loader, int64_t batches, const Config& c) {
  for (int threads : {1, 0}) {
    if (threads) set_num_threads(threads);
    int64_t images = 0, b = 0;
    const auto t0 = Clock::now();
    for (auto& batch : loader) {
      if (b++ == batches) break;
      images += batch.data.size(0);
    }
    const double s = seconds_since(t0);
    set_num_threads(c.threads);
    std::cout << "Loader: " << images << " images in " << fixed(s, 2)
              << " s = " << fixed(double(images) / std::max(s, 1e-9), 0) << " images/s ("
              << (threads ? "1 thread" : std::to_string(get_num_threads()) + " threads")
              << ", prefetch " << c.prefetch << ")\n";
  }
}

// The deck's experiment: one host batch through the model on one IPU, split at the pipeline
// splits and run sharded, and pipelined, each from the same initial weights; simulated
// throughput side by side.
void compare_strategies(const Config& c, int64_t classes, const Tensor& x, const Tensor& y) {
  struct Row {
    const char* name;
    bool split, pipelined;
  };
  const Row rows[] = {
      {"single IPU", false, false}, {"sharded", true, false}, {"pipelined", true, true}};
  std::string splits;
  for (auto& s : c.pipeline_splits) splits += (splits.empty() ? "" : " ") + s;
  std::cout << "Model parallelism (" << c.model << ", simulated on " << c.target << ", micro-batch "
            << c.micro_batch << ", gradient accumulation " << c.gradient_accumulation
            << ", precision " << c.precision << ", splits " << splits << "):\n";
  for (const Row& r : rows) {
    const int64_t ipus = r.split ? c.ipus_per_replica() : 1;
    std::cout << "  " << std::left << std::setw(11) << r.name << std::right << "  " << ipus
              << " IPU" << (ipus > 1 ? "s" : " ");
    if (r.pipelined && c.gradient_accumulation < 2 * ipus - 1) {
      std::cout << "  needs --gradient-accumulation >= " << 2 * ipus - 1 << "\n";
      continue;
    }
    manual_seed(c.seed);
    auto net = make_net(c, classes, r.split ? c.pipeline_splits : std::vector<std::string>{});
    auto opt = make_optimizer(c, net);
    opt->set_loss_scaling(loss_scaling(c));
    Options o = make_options(c, r.pipelined);
    o.showCompilationProgressBar(false);
    auto tm = trainingModel(net.ptr(), o, *opt, make_loss(c.label_smoothing));
    const auto t0 = Clock::now();
    tm.compile(x, y);
    const double compile_s = seconds_since(t0);
    tm(x, y);
    const auto& st = tm.last_stats();
    std::cout << "  " << std::setw(9) << fixed(st.simulated_samples_per_second().value_or(0), 1)
              << " images/s simulated, " << fixed(st.wall_samples_per_second(), 2)
              << " images/s wall-clock (compiled in " << fixed(compile_s, 1) << " s)" << std::endl;
  }
}

// --compile-only: the training step the flags describe, traced, compiled and estimated.
int compile_only(const Config& c, int64_t classes) {
  manual_seed(c.seed);
  auto net = make_net(c, classes, c.pipeline_splits);
  auto opt = make_optimizer(c, net);
  opt->set_loss_scaling(loss_scaling(c));
  Options o = make_options(c, c.pipelined());
  o.compileOnly(true);
  auto tm = trainingModel(net.ptr(), o, *opt, make_loss(c.label_smoothing));
  const int64_t rows = o.combined_batch(c.micro_batch), S = image_size(c);
  const auto e = examples::print_compile_only(
      tm, examples::batch_shaped({rows, 3, S, S}, c.half() ? kFloat16 : kFloat32),
      examples::batch_shaped({rows}, kInt64));
  std::cout << "Projected: " << fixed(e.samples_per_second(), 1) << " images/s on "
            << c.replicas * c.ipus_per_replica() << " x " << c.target << "\n";
  return 0;
}

// Graphcore's configs.yml names for ResNet-50 (vision/cnns/pytorch), as far as ipuml's flags
// express them: replicas, micro-batch, accumulation, fp16 with half partials, recomputation per
// block, the momentum sharded over the replicas (without it a replica's fullest tile is 3 % over).
const std::vector<examples::ConfigPreset>& presets() {
  static const std::vector<examples::ConfigPreset> p = {
      {"resnet50-pod4",
       "ResNet-50 on 4 IPUs: 4 replicas x micro-batch 18 x accumulation 228 (global batch 16416), "
       "16.16",
       {{"--model", "resnet50"},
        {"--replicas", "4"},
        {"--micro-batch-size", "18"},
        {"--gradient-accumulation", "228"},
        {"--precision", "16.16"},
        {"--recompute"},
        {"--replicated-tensor-sharding"},
        {"--label-smoothing", "0.1"}}},
      {"resnet50-pod16",
       "ResNet-50 on 16 IPUs: 16 replicas x micro-batch 18 x accumulation 57 (the same global "
       "batch, 16416), 16.16",
       {{"--model", "resnet50"},
        {"--replicas", "16"},
        {"--micro-batch-size", "18"},
        {"--gradient-accumulation", "57"},
        {"--precision", "16.16"},
        {"--recompute"},
        {"--replicated-tensor-sharding"},
        {"--label-smoothing", "0.1"}}},
  };
  return p;
}

// The flags, named as Graphcore's vision/cnns/pytorch names them where it has them.
void add_flags(CLI::App& app, Config& c) {
  app.add_option("--model", c.model,
                 "resnet18|34|50|101|152 (ImageNet stem) or cifar_resnet18|34|50|101|152 (3x3 "
                 "stem, no max-pool, for 32x32 images)")
      ->capture_default_str();
  app.add_option("--data", c.data,
                 "generated (random images), fashion-mnist, mnist (scripts/fetch-data.sh) or a "
                 "directory of MNIST-layout IDX files")
      ->capture_default_str();
  app.add_option("--image-size", c.image_size,
                 "Side of the square images the model sees (0: 32 for cifar_ models, else 224)")
      ->capture_default_str();
  app.add_option("--num-classes", c.num_classes,
                 "Classes of generated data (0: 10 for cifar_ models, else 1000)")
      ->capture_default_str();
  app.add_option("--micro-batch-size", c.micro_batch, "Images per replica per step")
      ->capture_default_str();
  app.add_option("--gradient-accumulation", c.gradient_accumulation,
                 "Micro-batches per weight update")
      ->capture_default_str();
  app.add_option("--replicas,--replication-factor", c.replicas, "Data-parallel replicas")
      ->capture_default_str();
  app.add_option("--device-iterations", c.device_iterations, "Weight updates per host batch")
      ->capture_default_str();
  app.add_option("--pipeline-splits", c.pipeline_splits,
                 "Where each further IPU starts, e.g. layer4 or layer3/1 layer4 (BeginBlock)");
  app.add_option("--execution", c.execution,
                 "With --pipeline-splits: pipelined (PopTorch's PipelinedExecution) or sharded")
      ->check(CLI::IsMember({"pipelined", "sharded"}))
      ->capture_default_str();
  app.add_option("--precision", c.precision,
                 "16.16 (fp16, half partials), 16.32 (fp16 with float32 master weights) or 32.32")
      ->capture_default_str();
  app.add_option("--norm-type", c.norm_type, "batch or group")->capture_default_str();
  app.add_option("--norm-num-groups", c.norm_groups, "Groups of --norm-type group")
      ->capture_default_str();
  app.add_option("--lr", c.lr, "Peak learning rate")->capture_default_str();
  app.add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str();
  app.add_flag("--nesterov", c.nesterov, "Nesterov momentum");
  app.add_option("--weight-decay", c.weight_decay,
                 "L2 weight decay on conv and linear weights (not on norms or biases)")
      ->capture_default_str();
  app.add_option("--label-smoothing", c.label_smoothing, "Label smoothing of the loss")
      ->capture_default_str();
  app.add_option("--loss-scaling", c.loss_scaling,
                 "Loss scaling (0: 128 for 16.x precisions, 1 for 32.32)")
      ->capture_default_str();
  app.add_option("--lr-schedule", c.lr_schedule,
                 "cosine (linear warm-up, then cosine, per update) or constant")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  app.add_option("--epoch,--epochs", c.epochs, "Epochs to train (may be fractional)")
      ->capture_default_str();
  app.add_option("--warmup-epoch", c.warmup_epochs, "Epochs of linear warm-up")
      ->capture_default_str();
  app.add_option("--samples-per-epoch", c.samples_per_epoch,
                 "Training images per epoch (0: the whole set; generated: 1024)")
      ->capture_default_str();
  app.add_option("--eval-samples", c.eval_samples,
                 "Test images evaluated (0: the whole test set; generated: 256)")
      ->capture_default_str();
  app.add_option("--eval-batch-size", c.eval_batch, "Images per evaluation batch")
      ->capture_default_str();
  app.add_option("--validation-mode", c.validation, "after (evaluate after training) or none")
      ->check(CLI::IsMember({"after", "none"}))
      ->capture_default_str();
  app.add_flag("--recompute", c.recompute,
               "A recomputation checkpoint after every residual block (Graphcore's "
               "--recompute-mode auto)");
  app.add_option("--available-memory-proportion", c.available_memory_proportion,
                 "Share of tile memory for convolution temporaries, one value or one per IPU "
                 "(default 0.15 in 16-bit precision on an IPU, else 0.6)")
      ->expected(1, 64);
  app.add_flag("--optimizer-state-offchip", c.optimizer_state_offchip,
               "The momentum in streaming memory, not on the tiles (IPU)");
  app.add_flag("--replicated-tensor-sharding", c.replicated_tensor_sharding,
               "The momentum sharded over the replicas, each holding 1/R (IPU)");
  app.add_option("--seed", c.seed, "Seed for initialisation, shuffling and augmentation")
      ->capture_default_str();
  app.add_option("--device", c.device, "ipu (emulated), cpu (compiled, CPU executor) or eager")
      ->check(CLI::IsMember({"ipu", "cpu", "eager"}))
      ->capture_default_str();
  app.add_option("--target", c.target, "Emulated IPU target: ipu1, ipu2, bow, tiny")
      ->capture_default_str();
  app.add_option("--set", c.target_overrides, "Override a target field (repeatable)");
  examples::add_report_dir_option(app, c.report_dir);
  app.add_option("--threads", c.threads, "Worker threads (0: all cores)")->capture_default_str();
  app.add_option("--prefetch", c.prefetch, "Host batches assembled ahead of training")
      ->capture_default_str();
  app.add_option("--checkpoint", c.checkpoint,
                 "HDF5 checkpoint: saved after each epoch, resumed from if it exists");
  app.add_flag("--allow-unverified", c.allow_unverified,
               "Resume from a checkpoint without ipuml's integrity record");
  app.add_flag("--bench-loader", c.bench_loader,
               "Measure the training loader alone (images/s with augmentation) and exit");
  app.add_flag("--compare-strategies", c.compare_strategies,
               "Run one host batch on one IPU, sharded and pipelined over --pipeline-splits, "
               "print the simulated throughput of each and exit");
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{
      "ipuml-resnet: ResNets trained as Graphcore's vision/cnns/pytorch does, on generated or "
      "real images, on the CPU or emulated IPUs"};
  add_flags(app, c);
  bool no_profile = false;
  app.add_flag("--no-profile", no_profile, "Skip the profile summary");
  app.add_flag("--compile-only", c.compile_only, examples::kCompileOnlyHelp);
  examples::add_config_option(app, c.config, presets());
  if (auto rc = examples::parse_command_line(app, argc, argv, kWho, presets(), c.config))
    return *rc;
  c.profile = !no_profile;
  try {
    validate(c);
  } catch (const std::exception& e) {
    return examples::usage_error(kWho, e.what());
  }

  try {
    const auto t_start = Clock::now();
    if (c.threads > 0) set_num_threads(c.threads);
    manual_seed(c.seed);
    const int64_t S = image_size(c);

    // The data: generated images, or a real set with Graphcore's augmentation for training
    // (random resized crop, horizontal flip) and a plain resize for evaluation, both
    // normalised with the training set's statistics; one-channel sets become RGB.
    std::optional<datasets::ImageSet> set;
    int64_t classes = c.num_classes ? c.num_classes : c.cifar() ? 10 : 1000;
    if (!c.generated()) {
      IPUML_CHECK(c.num_classes == 0, kWho, ": --num-classes is for --data generated only");
      set = datasets::load_image_set(c.data);
      classes = static_cast<int64_t>(set->class_names.size());
    }
    if (c.compile_only) return compile_only(c, classes);
    datasets::GeneratedImagesOptions gen;
    gen.size = c.samples_per_epoch ? c.samples_per_epoch : 1024;
    gen.height = gen.width = S;
    gen.num_classes = classes;
    gen.seed = c.seed;
    datasets::GeneratedImagesOptions gen_eval = gen;
    gen_eval.size = c.eval_samples ? c.eval_samples : 256;
    gen_eval.seed = c.seed + 1;
    using namespace data::transforms;
    auto train_set = [&] {
      const datasets::ImageSet& s = *set;
      return data::augment(datasets::MnistDataset(s.train),
                           Compose(RandomResizedCrop(S, S, {0.35, 1.0}), RandomHorizontalFlip(),
                                   RepeatChannels(3), Normalize(s.mean, s.stddev)),
                           c.seed);
    };
    auto eval_set = [&] {
      const datasets::ImageSet& s = *set;
      return datasets::MnistDataset(s.test)
          .map(Resize(S, S))
          .map(RepeatChannels(3))
          .map(Normalize(s.mean, s.stddev));
    };

    const Options opts = make_options(c, c.pipelined());
    const int64_t host_batch =
        c.compiled() ? opts.combined_batch(c.micro_batch) : c.micro_batch * c.device_iterations;
    auto loader_options = data::DataLoaderOptions()
                              .batch_size(host_batch)
                              .shuffle(true)
                              .seed(c.seed)
                              .drop_last(true)
                              .prefetch(c.prefetch);
    auto eval_options = data::DataLoaderOptions().batch_size(c.eval_batch).prefetch(c.prefetch);

    auto run = [&](auto train_loader, auto eval_loader, int64_t train_size, int64_t eval_size) {
      const int64_t per_epoch =
          c.samples_per_epoch ? std::min(c.samples_per_epoch, train_size) : train_size;
      const int64_t batches = per_epoch / host_batch;
      IPUML_CHECK(batches > 0, kWho, ": a host batch of ", host_batch,
                  " images (micro-batch x device iterations x replicas x accumulation) is more "
                  "than the ",
                  per_epoch, " training images of an epoch");
      const int64_t eval_limit = c.eval_samples ? std::min(c.eval_samples, eval_size) : eval_size;
      if (c.bench_loader) {
        bench_loader(train_loader, batches, c);
        return 0;
      }
      if (c.compare_strategies) {
        for (auto& b : train_loader) {
          compare_strategies(c, classes, to_model_dtype(c, b.data), b.target);
          break;
        }
        std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
        return 0;
      }

      auto net = make_net(c, classes, c.pipeline_splits);
      auto opt = make_optimizer(c, net);
      // Compiled: the gradient seed is the scale; eager: the loss is multiplied below. Either
      // way the optimizer divides the scale out again.
      const double scaling = loss_scaling(c);
      opt->set_loss_scaling(scaling);
      std::cout << "Model " << c.model << " (" << net->parameters().size() << " tensors, ";
      int64_t n_params = 0;
      for (auto& p : net->parameters()) n_params += p.numel();
      std::cout << n_params << " parameters), " << classes << " classes, " << S << "x" << S
                << " images, precision " << c.precision << ", device " << c.device
                << (c.device == "ipu" ? " (" + c.target + ")" : "") << "\n";
      std::cout << "Data: " << (set ? set->name + " from " + set->dir : std::string("generated"))
                << ", " << per_epoch << " training images per epoch, " << eval_limit
                << " evaluated; host batch " << host_batch << "\n";
      const int64_t updates_per_batch = c.device_iterations;
      const int64_t updates_per_epoch = batches * updates_per_batch;
      auto sched = make_schedule(c, *opt, updates_per_epoch);

      int64_t first_epoch = 0;
      Resumed resumed;
      std::error_code ec;
      if (!c.checkpoint.empty() && std::filesystem::exists(c.checkpoint, ec)) {
        nn::StateDict opt_state, saved;
        io::CheckpointReadOptions ro;
        ro.allow_unverified = c.allow_unverified;
        first_epoch = io::load_checkpoint(c.checkpoint, *net, &opt_state, &saved, ro);
        resumed = resume_state(c, saved);
        for (int64_t u = 0; sched && u < resumed.updates; ++u) sched->step();
        opt->load_state_dict(opt_state);
        std::cout << "Resumed from " << c.checkpoint << " after epoch " << first_epoch << " ("
                  << resumed.updates << " updates)\n";
      }

      Progress progress;
      std::optional<runtime::TrainingModel> tm;
      if (c.compiled()) {
        tm.emplace(trainingModel(net.ptr(), opts, *opt, make_loss(c.label_smoothing)));
        tm->set_run_counter(resumed.run_counter);
      }
      const auto loss_fn = make_loss(c.label_smoothing);
      double wall = 0, simulated = 0, data_wait = 0;
      int64_t samples = 0, updates = resumed.updates;
      bool have_sim = c.device == "ipu";
      for (int64_t epoch = first_epoch; epoch < c.epochs_whole(); ++epoch) {
        // A fractional last epoch runs that share of the batches.
        const double share = std::min(1.0, c.epochs - static_cast<double>(epoch));
        const int64_t epoch_batches =
            std::max<int64_t>(1, static_cast<int64_t>(std::llround(share * double(batches))));
        train_loader.set_epoch(static_cast<uint64_t>(epoch));
        net->train();
        EpochStats st;
        if (tm) {
          double sim = 0;
          st = run_epoch(train_loader, epoch_batches, c, epoch, progress, sched.get(),
                         updates_per_batch, [&](const data::Example& b) {
                           const Tensor l = (*tm)(to_model_dtype(c, b.data), b.target);
                           if (tm->last_stats().simulated_seconds)
                             sim += *tm->last_stats().simulated_seconds;
                           return cast(l, kFloat32).to_vector<float>();
                         });
          st.simulated = sim;
        } else {
          st = run_epoch(train_loader, epoch_batches, c, epoch, progress, sched.get(),
                         updates_per_batch, [&](const data::Example& b) {
                           std::vector<float> out;
                           for (int64_t i = 0; i < c.device_iterations; ++i) {
                             const Tensor x = b.data.narrow(0, i * c.micro_batch, c.micro_batch);
                             const Tensor y = b.target.narrow(0, i * c.micro_batch, c.micro_batch);
                             opt->zero_grad();
                             const Tensor loss = loss_fn(net(to_model_dtype(c, x)), y);
                             (scaling != 1.0 ? mul(loss, scaling) : loss).backward();
                             opt->step();
                             out.push_back(loss.item<float>());
                           }
                           return out;
                         });
        }
        wall += st.seconds;
        simulated += st.simulated;
        data_wait += st.data_wait;
        samples += st.samples;
        updates += st.updates;
        std::cout << "Epoch " << epoch + 1 << "/" << c.epochs_whole() << ": loss "
                  << fixed(st.loss, 4) << ", lr " << fixed(opt->get_lr(0), 5) << ", " << st.updates
                  << " updates, " << st.samples << " images in " << fixed(st.seconds, 1) << " s ("
                  << fixed(double(st.samples) / st.seconds, 1) << " img/s wall";
        if (have_sim && st.simulated > 0)
          std::cout << ", " << fixed(double(st.samples) / st.simulated, 1) << " img/s simulated";
        std::cout << "; waited " << fixed(st.data_wait, 2) << " s for data)" << std::endl;
        if (tm && epoch == first_epoch && c.profile && c.device == "ipu")
          tm->printProfileSummary(std::cout);
        if (!c.checkpoint.empty())
          io::save_checkpoint(c.checkpoint, *net, opt->state_dict(), epoch + 1,
                              training_state(c, tm ? tm->run_counter() : 0, updates));
      }
      if (samples > 0) {
        std::cout << "Training throughput: " << fixed(double(samples) / std::max(wall, 1e-9), 1)
                  << " images/s wall-clock";
        if (have_sim && simulated > 0)
          std::cout << ", " << fixed(double(samples) / simulated, 1) << " images/s simulated on "
                    << c.replicas * c.ipus_per_replica() << " x " << c.target
                    << " (the whole configuration)";
        std::cout << "; the loader kept up: " << fixed(100.0 * data_wait / std::max(wall, 1e-9), 1)
                  << " % of the time waiting for data\n";
      }

      if (c.validation == "after") {
        // Eval mode: BatchNorm normalises with its running statistics.
        const auto t_eval = Clock::now();
        net->eval();
        Accuracy acc;
        if (c.compiled()) {
          Options eo = Options().useIpuModel(c.device == "ipu").target(c.target);
          examples::apply_target_overrides(eo, c.target_overrides, kWho, c.ipus_per_replica());
          if (!c.report_dir.empty()) eo.autoReportDirectory(c.report_dir).modelName("evaluation");
          if (c.precision == "16.16") eo.Precision.setPartialsType(kFloat16);
          eo.showCompilationProgressBar(false);
          auto im = inferenceModel(net.ptr(), eo);
          acc = accuracy(eval_loader, eval_limit, progress,
                         [&](const Tensor& x) { return im(to_model_dtype(c, x)); });
        } else {
          NoGradGuard ng;
          acc = accuracy(eval_loader, eval_limit, progress,
                         [&](const Tensor& x) { return net(to_model_dtype(c, x)); });
        }
        std::cout << "Evaluation (eval mode, running statistics): "
                  << fixed(seconds_since(t_eval), 1) << " s\n";
        std::cout << "Accuracy on test set: " << fixed(acc.percent, 2) << "% of " << acc.samples
                  << " images (chance " << fixed(100.0 / double(classes), 2) << "%)\n";
      }
      std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
      return 0;
    };

    if (set) {
      const auto train_size = static_cast<int64_t>(set->train.count);
      const auto eval_size = static_cast<int64_t>(set->test.count);
      return run(data::DataLoader(train_set(), loader_options),
                 data::DataLoader(eval_set(), eval_options), train_size, eval_size);
    }
    return run(data::DataLoader(datasets::GeneratedImages(gen), loader_options),
               data::DataLoader(datasets::GeneratedImages(gen_eval), eval_options), gen.size,
               gen_eval.size);
  } catch (const std::exception& e) {
    return examples::run_error(kWho, e.what());
  }
}
