// ipuml-cerebras-run: the Cerebras modelzoo's run.py on the emulated CS-2 (or the host CPU):
//   ipuml-cerebras-run CSX --params configs/fc_mnist.yaml --num_csx=1 --mode train
//       --model_dir model_dir [--compile_only | --validate_only]
// reads a modelzoo params yaml, builds its model, chooses the execution mode (pipelined when every
// layer fits the wafer, else weight streaming; weight streaming on several CS-2s), splits each
// CS-2's batch into train_input.micro_batch_size micro-batches in weight streaming (auto: the
// largest that fits; explore: the fastest that fits; none; or a size), and trains and
// evaluates with the original's log lines, simulated CS-2 rates beside wall-clock ones, and
// integrity-checked checkpoints in model_dir.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/datasets/generated_masks.hpp>
#include <ipuml/models/bert.hpp>
#include <ipuml/models/fc_mnist.hpp>
#include <ipuml/models/gptj.hpp>
#include <ipuml/models/unet.hpp>

#include "compile_only.hpp"
#include "example_support.hpp"
#include "params.hpp"

using namespace ipuml;
using examples::fixed;
using examples::seconds_since;
using runtime::Tensors;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kWho = "ipuml-cerebras-run";

struct Cli {
  std::string device = "CSX";
  std::string params;
  int64_t num_csx = 1;
  std::string mode = "train";
  std::string model_dir = "model_dir";
  std::string checkpoint_path;
  bool compile_only = false, validate_only = false;
  std::string target = "wse2";
  std::string execution_strategy = "auto";
  std::vector<std::string> target_overrides;
  std::vector<std::string> job_labels, mount_dirs, python_paths;
  int64_t max_steps = 0;  // 0: the params' runconfig
};

// One model of the zoo as the program runs it: the module, its loss, and its batches' shapes.
// fc_mnist trains and evaluates on MNIST (single input, `loss`); every model compiles through
// the multi-tensor form (`forward`, `multi_loss`) on batches of the shapes `shaped` gives.
struct Task {
  std::shared_ptr<nn::Module> model;
  runtime::LossFn loss;
  runtime::ForwardFn forward;
  runtime::MultiLossFn multi_loss;
  std::function<std::pair<Tensors, Tensors>(int64_t batch)> shaped;
  // What it trains and evaluates on: MNIST (fc_mnist), generated images and defect masks
  // (unet, as datasets::GeneratedMasks makes them), or nothing ipuml reads (bert and gptj are
  // sized with --compile_only / --validate_only).
  enum class Data { None, Mnist, Masks } data = Data::None;
  std::optional<models::UNetConfig> unet;  // the segmentation model's config (Data::Masks)
  bool half = false;  // mixed precision: float16 weights and activations, float32 master weights
};

const cerebras::InputParams& train_input(const cerebras::Params& p) {
  IPUML_CHECK(p.train_input.has_value(), p.file, ": training needs a train_input section");
  return *p.train_input;
}
const cerebras::InputParams& eval_input(const cerebras::Params& p) {
  IPUML_CHECK(p.eval_input.has_value(), p.file, ": evaluation needs an eval_input section");
  return *p.eval_input;
}

Task fc_mnist_task(const cerebras::Params& p) {
  Task t;
  models::FcMnistConfig c;
  c.hidden_sizes(p.model.keys.get_int_list("hidden_sizes"))
      .dropout(p.model.dropout)
      .activation_fn(p.model.activation_fn);
  models::FcMnist m(c);
  t.model = m.ptr();
  t.loss = [](const Tensor& out, const Tensor& y) { return models::fc_mnist_loss(out, y); };
  t.forward = [m](const Tensors& in) { return Tensors{m->forward(in[0])}; };
  t.multi_loss = [](const Tensors& out, const Tensors& y) {
    return models::fc_mnist_loss(out[0], y[0]);
  };
  const bool half = p.model.mixed_precision;
  t.shaped = [half](int64_t batch) {
    return std::pair{
        Tensors{examples::batch_shaped({batch, 1, 28, 28}, half ? kFloat16 : kFloat32)},
        Tensors{examples::batch_shaped({batch}, kInt64)}};
  };
  t.data = Task::Data::Mnist;
  return t;
}

// modelzoo's bert pre-training: MLM at train_input.max_predictions_per_seq masked positions
// (gathered before the head, as the CS-2 runs it) plus NSP, on max_sequence_length tokens.
Task bert_task(const cerebras::Params& p) {
  const cerebras::Section& k = p.model.keys;
  const cerebras::Section& in = train_input(p).keys;
  IPUML_CHECK(in.has("max_sequence_length"), in.where("batch_size").str(),
              ": bert needs train_input.max_sequence_length (128 for MSL128)");
  const int64_t seq = in.get_int("max_sequence_length");
  const int64_t masked = in.get_int("max_predictions_per_seq", 20);
  IPUML_CHECK(masked >= 1 && masked <= seq, in.where("batch_size").str(),
              ": train_input.max_predictions_per_seq ", masked, " must be in [1, ", seq,
              "] (max_sequence_length)");
  models::BertConfig c;
  c.vocab_size(k.get_int("vocab_size"))
      .hidden_size(k.get_int("hidden_size"))
      .num_hidden_layers(k.get_int("num_hidden_layers"))
      .num_attention_heads(k.get_int("num_heads"))
      .intermediate_size(k.get_int("filter_size"))
      .max_position_embeddings(k.get_int("max_position_embeddings", 512))
      .type_vocab_size(k.get_int("num_segments", 2))
      .hidden_act(k.get_string("encoder_nonlinearity", "gelu"))
      .hidden_dropout_prob(k.get_float("dropout_rate", 0.1))
      .attention_probs_dropout_prob(k.get_float("attention_dropout_rate", 0.1))
      .layer_norm_eps(k.get_float("layer_norm_epsilon", 1e-5));
  IPUML_CHECK(seq <= c.max_position_embeddings(), in.where("max_sequence_length").str(),
              ": train_input.max_sequence_length ", seq, " exceeds model.max_position_embeddings ",
              c.max_position_embeddings());
  c.validate();
  models::BertForPreTraining m(c);
  Task t;
  t.model = m.ptr();
  t.forward = [m](const Tensors& x) {
    auto [mlm, nsp] = m->forward_masked(x[0], x[1], x[2], x[3]);
    return Tensors{mlm, nsp};
  };
  t.multi_loss = [](const Tensors& out, const Tensors& y) {
    return models::bert_pretraining_loss(out[0], out[1], y[0], y[1]);
  };
  t.shaped = [seq, masked](int64_t batch) {
    const Tensor tokens = examples::batch_shaped({batch, seq}, kInt64);
    const Tensor slots = examples::batch_shaped({batch, masked}, kInt64);
    const Tensor rows = examples::batch_shaped({batch}, kInt64);
    return std::pair{Tensors{tokens, tokens, tokens, slots}, Tensors{slots, rows}};
  };
  return t;
}

// modelzoo's gptj: next-token prediction over train_input.max_sequence_length tokens (HF's
// GPTJForCausalLM with its shifted loss).
Task gptj_task(const cerebras::Params& p) {
  const cerebras::Section& in = train_input(p).keys;
  const models::GPTJConfig c = cerebras::gptj_config(p.model);
  const int64_t seq = in.get_int("max_sequence_length", c.n_positions());
  models::GPTJForCausalLM m(c);
  Task t;
  t.model = m.ptr();
  t.forward = [m](const Tensors& x) { return Tensors{m->forward(x[0])}; };
  t.multi_loss = [](const Tensors& out, const Tensors& y) {
    return models::shifted_causal_lm_loss(out[0], y[0]);
  };
  t.shaped = [seq](int64_t batch) {
    const Tensor tokens = examples::batch_shaped({batch, seq}, kInt64);
    return std::pair{Tensors{tokens}, Tensors{tokens}};
  };
  return t;
}

// modelzoo's unet for binary segmentation: images [B, C, H, W], masks [B, 1, H, W] of 0/1.
Task unet_task(const cerebras::Params& p) {
  const models::UNetConfig c = cerebras::unet_config(p.model);
  IPUML_CHECK(c.num_classes() == 1, p.model.keys.where("num_classes").str(),
              ": ipuml-cerebras-run trains unet for binary segmentation (num_classes: 2 with "
              "loss: bce)");
  models::UNet m(c);
  Task t;
  t.model = m.ptr();
  t.loss = [m](const Tensor& out, const Tensor& y) { return m->loss(out, y); };
  t.forward = [m](const Tensors& x) { return Tensors{m->forward(x[0])}; };
  t.multi_loss = [m](const Tensors& out, const Tensors& y) { return m->loss(out[0], y[0]); };
  const bool half = p.model.mixed_precision;
  t.shaped = [c, half](int64_t batch) {
    const DType dt = half ? kFloat16 : kFloat32;
    return std::pair{
        Tensors{examples::batch_shaped({batch, c.in_channels(), c.height(), c.width()}, dt)},
        Tensors{examples::batch_shaped({batch, 1, c.height(), c.width()}, dt)}};
  };
  t.data = Task::Data::Masks;
  t.unet = c;
  return t;
}

Task make_task(const cerebras::Params& p) {
  Task t;
  if (p.model.name == "fc_mnist")
    t = fc_mnist_task(p);
  else if (p.model.name == "bert")
    t = bert_task(p);
  else if (p.model.name == "gptj")
    t = gptj_task(p);
  else if (p.model.name == "unet")
    t = unet_task(p);
  else
    fail(p.model.keys.where("name").str(), ": model.name '", p.model.name,
         "' has no ipuml model yet (this program runs fc_mnist, bert, gptj and unet)");
  t.half = p.model.mixed_precision;
  if (t.half) t.model->half();
  return t;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const cerebras::Params& p, const Task& t) {
  const auto& o = p.optimizer;
  auto params = t.model->parameters();
  std::unique_ptr<optim::Optimizer> opt;
  if (o.optimizer_type == "SGD") {
    opt = std::make_unique<optim::SGD>(
        params,
        optim::SGDOptions(o.learning_rate).momentum(o.momentum).weight_decay(o.weight_decay_rate));
  } else if (o.optimizer_type == "Adam") {
    opt = std::make_unique<optim::Adam>(params, optim::AdamOptions(o.learning_rate)
                                                    .betas({o.beta1, o.beta2})
                                                    .eps(o.eps)
                                                    .weight_decay(o.weight_decay_rate));
  } else {
    opt = std::make_unique<optim::AdamW>(params, optim::AdamWOptions(o.learning_rate)
                                                     .betas({o.beta1, o.beta2})
                                                     .eps(o.eps)
                                                     .weight_decay(o.weight_decay_rate));
  }
  if (t.half) opt->keep_master_weights();
  opt->set_loss_scaling(o.loss_scaling_factor);
  return opt;
}

// The runtime's options for a run of `accumulation` micro-batches per weight update on each CS-2
// (gradient accumulation: the combined batch stays train_input.batch_size), under `strategy`
// (the command line's unless the micro-batch search has settled the mode).
Options make_options(const Cli& cli, const cerebras::Params& p, int64_t accumulation = 1,
                     const std::string& strategy = "") {
  Options o;
  o.showCompilationProgressBar(true).randomSeed(
      static_cast<uint64_t>(p.runconfig.seed.value_or(0)));
  if (cli.device == "CPU") {
    o.backend("cpu");
    return o;
  }
  o.backend("cerebras").replicationFactor(cli.num_csx).gradientAccumulation(accumulation);
  o.backendOption("cerebras", "target", cli.target);
  o.backendOption("cerebras", "execution_strategy",
                  strategy.empty() ? cli.execution_strategy : strategy);
  std::string overrides;
  for (auto& s : cli.target_overrides) overrides += (overrides.empty() ? "" : ";") + s;
  if (!overrides.empty()) o.backendOption("cerebras", "target_overrides", overrides);
  return o;
}

// The newest checkpoint_<step>.h5 of model_dir, or "" when there is none.
std::string latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return "";
  const std::regex name("checkpoint_([0-9]{1,15})\\.h5");
  int64_t best = -1;
  std::string path;
  for (auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (!std::regex_match(f, m, name)) continue;
    const int64_t step = std::stoll(m[1].str());
    if (step > best) best = step, path = e.path().string();
  }
  return path;
}

std::string checkpoint_name(const std::string& dir, int64_t step) {
  return (std::filesystem::path(dir) / ("checkpoint_" + std::to_string(step) + ".h5")).string();
}

// The modelzoo's data_dir when it holds MNIST's IDX files (as given, relative to where the
// program runs), else ipuml's MNIST cache (scripts/fetch-data.sh), whose error says how to fetch.
std::string mnist_dir(const std::string& data_dir) {
  std::error_code ec;
  if (!data_dir.empty() &&
      std::filesystem::exists(std::filesystem::path(data_dir) / "train-images-idx3-ubyte", ec))
    return data_dir;
  return datasets::find_mnist_dir();
}

// "| Train Device=CSX, Step=100, Loss=0.21875, Rate=5312.52 samples/sec, GlobalRate=5210.96
// samples/sec", then the emulated machine's rates.
void log_line(const char* phase, const Cli& cli, int64_t step, double loss, double rate,
              double global_rate, double sim_rate, double sim_global) {
  std::cout << "| " << phase << " Device=" << cli.device << ", Step=" << step
            << ", Loss=" << fixed(loss, 5) << ", Rate=" << fixed(rate, 2)
            << " samples/sec, GlobalRate=" << fixed(global_rate, 2) << " samples/sec";
  if (sim_rate > 0)
    std::cout << " (simulated CS-2: Rate=" << fixed(sim_rate, 2)
              << " samples/sec, GlobalRate=" << fixed(sim_global, 2) << " samples/sec)";
  std::cout << std::endl;
}

// ---- micro-batches (train_input.micro_batch_size) -------------------------------------------
// Weight streaming splits the batch one CS-2 runs (batch_size / num_csx) into micro-batches run
// one after another, their gradients accumulated before the weight update, so that the
// activations fit the wafer. Pipelined execution streams the samples through its layers and has
// no micro-batches.

// The estimate's target line names the mode after the wafer, then says why in parentheses, where
// the other mode may be named too ("weight streaming (pipelined execution would need ...)").
size_t pipelined_at(const runtime::Estimate& e) {
  const size_t p = e.target.find(", pipelined execution"), w = e.target.find(", weight streaming");
  return p != std::string::npos && (w == std::string::npos || p < w) ? p + 2 : std::string::npos;
}
bool pipelined(const runtime::Estimate& e) { return pipelined_at(e) != std::string::npos; }

int64_t per_csx_batch(const Cli& cli, const cerebras::Params& p) {
  return train_input(p).batch_size / cli.num_csx;
}

// What the params ask: "auto" (also when the key is absent), "explore", "none", or "" with a
// fixed size.
std::string micro_batch_mode(const cerebras::Params& p) {
  const auto& in = train_input(p);
  if (in.micro_batch_size) return "";
  return in.micro_batch_mode.empty() ? "auto" : in.micro_batch_mode;
}

// The micro-batch sizes auto and explore try: the per-CS-2 batch, then its power-of-two divisors
// below it, largest first, at most 12 (each is a compile).
std::vector<int64_t> micro_batch_candidates(int64_t per_csx) {
  std::vector<int64_t> c{per_csx};
  for (int64_t m = per_csx & -per_csx; m >= 1 && c.size() < 12; m /= 2)
    if (m < per_csx) c.push_back(m);
  return c;
}

// An estimate of the training step at micro-batch `micro` (`force_ws`: under
// execution_strategy weight_streaming, once the full batch has settled the mode).
using EstimateAt = std::function<runtime::Estimate(int64_t micro, bool force_ws)>;

struct MicroBatchChoice {
  int64_t micro = 0;
  runtime::Estimate estimate;  // at `micro`
};

// Chooses the micro-batch as the params ask and prints the one line that says which (and
// explore's table). Throws for a fixed size the mode cannot take.
MicroBatchChoice choose_micro_batch(const Cli& cli, const cerebras::Params& p,
                                    const EstimateAt& estimate_at) {
  const int64_t per = per_csx_batch(cli, p);
  const std::string mode = micro_batch_mode(p);
  const cerebras::Section& in = train_input(p).keys;
  if (mode.empty()) {
    const int64_t micro = *train_input(p).micro_batch_size;
    runtime::Estimate e = estimate_at(micro, false);
    if (pipelined(e))
      in.fail("micro_batch_size",
              std::to_string(micro) +
                  " is a weight-streaming setting, but the wafer runs this model in " +
                  e.target.substr(pipelined_at(e)) +
                  ", which streams the samples through the wafer without micro-batches; remove "
                  "the key, or run with --execution_strategy weight_streaming");
    std::cout << "micro_batch_size: " << micro << " (the per-CS-X batch " << per << " in "
              << per / micro << " micro-batch" << (per / micro == 1 ? "" : "es") << ")\n";
    return {micro, e};
  }
  const runtime::Estimate whole = estimate_at(per, false);
  if (pipelined(whole)) {
    std::cout << "micro_batch_size " << mode << ": " << per
              << " (pipelined execution streams the per-CS-X batch through the wafer; "
                 "micro-batches are a weight-streaming setting)\n";
    return {per, whole};
  }
  if (mode == "none") {
    std::cout << "micro_batch_size none: " << per << " (the per-CS-X batch in one pass)\n";
    return {per, whole};
  }
  // Weight streaming: the full batch settled the mode, the smaller micro-batches keep it (on one
  // CS-2 a small enough micro-batch could fit a pipelined layout, which has no micro-batches).
  const std::vector<int64_t> candidates = micro_batch_candidates(per);
  auto at = [&](int64_t micro) {
    if (micro == per) return whole;
    runtime::Estimate e = estimate_at(micro, true);
    e.target = whole.target;  // the mode and why, as the full batch chose it
    return e;
  };
  if (mode == "auto") {
    runtime::Estimate e;
    for (const int64_t micro : candidates) {
      e = at(micro);
      if (!e.memory.fits) continue;
      std::cout << "micro_batch_size auto: " << micro << " (the largest of the per-CS-X batch "
                << per << "'s divisors that fits the wafer)\n";
      return {micro, e};
    }
    std::cout << "micro_batch_size auto: none fits the wafer (tried the per-CS-X batch " << per
              << "'s divisors " << candidates.front() << " down to " << candidates.back() << ")\n";
    return {candidates.back(), e};
  }
  // explore: every candidate, then the fastest that fits.
  std::cout << "micro_batch_size explore: the per-CS-X batch " << per << "'s divisors\n"
            << "  micro-batch  fits  projected samples/sec\n";
  std::optional<MicroBatchChoice> best;
  MicroBatchChoice last;
  for (const int64_t micro : candidates) {
    runtime::Estimate e = at(micro);
    const std::string rate = fixed(e.samples_per_second(), 2);
    std::cout << "  " << std::string(11 - std::min<size_t>(11, std::to_string(micro).size()), ' ')
              << micro << "  " << (e.memory.fits ? " yes" : "  no") << "  "
              << std::string(21 - std::min<size_t>(21, rate.size()), ' ') << rate << "\n";
    if (e.memory.fits && (!best || e.samples_per_second() > best->estimate.samples_per_second()))
      best = MicroBatchChoice{micro, e};
    last = {micro, std::move(e)};
  }
  if (!best) {
    std::cout << "micro_batch_size explore: none fits the wafer\n";
    return last;
  }
  std::cout << "micro_batch_size explore: " << best->micro
            << " (the fastest that fits: " << fixed(best->estimate.samples_per_second(), 2)
            << " samples/sec)\n";
  return *best;
}

int compile_or_validate(const Cli& cli, const cerebras::Params& p, Task& task,
                        optim::Optimizer& optimizer) {
  const auto t0 = Clock::now();
  const auto [x, y] = task.shaped(train_input(p).batch_size);
  const int64_t per = per_csx_batch(cli, p);
  // Each estimate compiles a fresh training model at its micro-batch.
  EstimateAt estimate_at = [&](int64_t micro, bool force_ws) {
    Options o = make_options(cli, p, per / micro, force_ws ? "weight_streaming" : "");
    o.compileOnly(true);
    auto tm = trainingModel(task.model, o, optimizer, task.forward, task.multi_loss);
    return tm.estimate(x, y);
  };
  if (cli.validate_only) {
    // Tracing and support do not depend on the micro-batch: the given one, else none.
    const runtime::Estimate e = estimate_at(train_input(p).micro_batch_size.value_or(per), false);
    std::cout << "Validated " << p.model.name << " on " << e.target << "\n";
    std::cout << "Validation took " << fixed(seconds_since(t0), 2) << " seconds.\n";
    return 0;
  }
  const MicroBatchChoice c = choose_micro_batch(cli, p, estimate_at);
  const runtime::Estimate& e = c.estimate;
  runtime::print_estimate(std::cout, e);
  std::cout << "Projected: " << fixed(e.samples_per_second(), 2) << " samples/sec on "
            << cli.num_csx << " x CS-2 (" << (e.memory.fits ? "fits" : "does not fit") << ")\n";
  return e.memory.fits ? 0 : examples::kExitFailure;
}

// Generated images and defect masks for unet (datasets::GeneratedMasks): the training set and a
// held-out set of other samples (another seed), as the model's config shapes them.
datasets::GeneratedMasks masks(const Task& t, const cerebras::Params& p, bool train) {
  datasets::GeneratedMasksOptions o;
  o.channels = t.unet->in_channels();
  o.height = t.unet->height();
  o.width = t.unet->width();
  const auto seed = static_cast<uint64_t>(p.runconfig.seed.value_or(0));
  o.seed = train ? seed : seed + 0x5eed;
  o.size = train ? 8192 : 512;  // an epoch of num_epochs
  return datasets::GeneratedMasks(o);
}

// What the data sets are: MNIST from data_dir or ipuml's cache, or generated masks.
template <typename Fn>
auto with_data(const Task& t, const cerebras::Params& p, bool train, Fn fn) {
  if (t.data == Task::Data::Masks) return fn(masks(t, p, train));
  const auto& in = train ? train_input(p) : eval_input(p);
  return fn(datasets::normalized_mnist(mnist_dir(in.data_dir), train));
}

int train(const Cli& cli, const cerebras::Params& p, Task& task, optim::Optimizer& optimizer,
          int64_t max_steps) {
  const int64_t batch = train_input(p).batch_size;
  const int64_t log_steps = p.runconfig.log_steps, ckpt_steps = p.runconfig.checkpoint_steps;
  std::filesystem::create_directories(cli.model_dir);
  int64_t step = 0;
  const std::string resume =
      cli.checkpoint_path.empty() ? latest_checkpoint(cli.model_dir) : cli.checkpoint_path;
  if (!resume.empty()) {
    nn::StateDict opt_state;
    step = io::load_checkpoint(resume, *task.model, &opt_state);
    optimizer.load_state_dict(opt_state);
    std::cout << "Loaded checkpoint " << resume << " at global step " << step << "\n";
  }
  if (step >= max_steps) {
    std::cout << "Training Complete. Completed 0 sample(s) in 0.00 seconds.\n";
    return 0;
  }
  return with_data(task, p, true, [&](const auto& train_set) {
    data::DataLoader loader(train_set,
                            data::DataLoaderOptions()
                                .batch_size(batch)
                                .shuffle(train_input(p).shuffle)
                                .seed(static_cast<uint64_t>(p.runconfig.seed.value_or(0)))
                                .drop_last(true));
    IPUML_CHECK(loader.size() > 0, kWho, ": train_input.batch_size ", batch, " exceeds the ",
                train_set.size(), " training samples");
    // The micro-batch as the params ask, chosen on the estimates of training models that then
    // run: the one chosen is kept (auto stops at it), else made again (explore).
    std::unique_ptr<runtime::TrainingModel> built;
    int64_t built_micro = 0;
    auto build = [&](int64_t micro, bool force_ws) {
      built = std::make_unique<runtime::TrainingModel>(
          task.model,
          make_options(cli, p, batch / cli.num_csx / micro, force_ws ? "weight_streaming" : ""),
          optimizer, task.loss);
      built_micro = micro;
    };
    const auto [x, y] = task.shaped(batch);
    if (cli.device == "CSX") {
      const MicroBatchChoice c = choose_micro_batch(cli, p, [&](int64_t micro, bool force_ws) {
        build(micro, force_ws);
        return built->estimate(x[0], y[0]);
      });
      // Only explore ends on another than the last built: a weight-streaming candidate, made as
      // it was estimated (below the per-CS-2 batch, under execution_strategy weight_streaming).
      if (built_micro != c.micro) build(c.micro, c.micro != per_csx_batch(cli, p));
    } else {
      build(batch, false);
    }
    runtime::TrainingModel& tm = *built;
    const auto t0 = Clock::now();
    auto t_log = t0;
    double sim = 0, sim_log = 0, loss_log = 0;
    int64_t samples = 0, samples_log = 0;
    examples::Progress progress;
    while (step < max_steps) {
      for (auto& b : loader) {
        if (step >= max_steps) break;
        const Tensor loss =
            task.half ? tm(b.data.to(kFloat16),
                           b.target.dtype() == kFloat32 ? b.target.to(kFloat16) : b.target)
                      : tm(b.data, b.target);
        ++step;
        samples += batch;
        samples_log += batch;
        loss_log = loss.to(kFloat32).mean().template item<float>();
        const auto& st = tm.last_stats();
        if (st.simulated_seconds) sim += *st.simulated_seconds, sim_log += *st.simulated_seconds;
        progress.update("Step ", step, "/", max_steps, " loss ", fixed(loss_log, 5));
        if (step % log_steps == 0 || step == max_steps) {
          progress.done();
          const double wall = seconds_since(t_log), all = seconds_since(t0);
          log_line("Train", cli, step, loss_log, double(samples_log) / std::max(wall, 1e-9),
                   double(samples) / std::max(all, 1e-9),
                   sim_log > 0 ? double(samples_log) / sim_log : 0, sim > 0 ? samples / sim : 0);
          t_log = Clock::now();
          sim_log = 0;
          samples_log = 0;
        }
        // Every checkpoint_steps steps, and always at the end (checkpoint_steps 0: only then).
        if ((ckpt_steps > 0 && step % ckpt_steps == 0) || step == max_steps) {
          progress.done();
          std::cout << "Saving checkpoint at global step " << step << std::endl;
          io::save_checkpoint(checkpoint_name(cli.model_dir, step), *task.model,
                              optimizer.state_dict(), step);
        }
      }
    }
    progress.done();
    const double wall = seconds_since(t0);
    std::cout << "Training Complete. Completed " << samples << " sample(s) in " << fixed(wall, 2)
              << " seconds.";
    if (sim > 0) std::cout << " (simulated on the CS-2: " << fixed(sim, 4) << " seconds)";
    std::cout << std::endl;
    return 0;
  });
}

int evaluate(const Cli& cli, const cerebras::Params& p, Task& task) {
  const std::string ck =
      cli.checkpoint_path.empty() ? latest_checkpoint(cli.model_dir) : cli.checkpoint_path;
  IPUML_CHECK(!ck.empty(), kWho, ": --mode eval needs a checkpoint: none in --model_dir '",
              cli.model_dir, "' (train first, or give --checkpoint_path)");
  const int64_t step = io::load_checkpoint(ck, *task.model);
  const int64_t batch = eval_input(p).batch_size;
  Options o = make_options(cli, p);
  o.modelName("evaluation");
  task.model->eval();
  auto im = inferenceModel(task.model, o);
  return with_data(task, p, false, [&](const auto& test_set) {
    data::DataLoader loader(test_set, data::DataLoaderOptions().batch_size(batch).drop_last(
                                          eval_input(p).drop_last_batch));
    double loss_sum = 0, sim = 0;
    int64_t correct = 0, total = 0, steps = 0;
    models::SegmentationCounts counts;
    const auto t0 = Clock::now();
    for (auto& b : loader) {
      const Tensor out = im(task.half ? b.data.to(kFloat16) : b.data).to(kFloat32);
      const double rows = double(b.data.size(0));
      if (task.data == Task::Data::Masks) {
        loss_sum += task.loss(out, b.target).template item<float>() * rows;
        const auto c = models::segmentation_counts(out, b.target);
        counts.intersection += c.intersection;
        counts.predicted += c.predicted;
        counts.actual += c.actual;
      } else {
        loss_sum += nll_loss(out, b.target).template item<float>() * rows;
        correct += sum(eq(argmax(out, 1), b.target).to(kInt64)).template item<int64_t>();
      }
      total += b.data.size(0);
      ++steps;
      if (im.last_stats().simulated_seconds) sim += *im.last_stats().simulated_seconds;
    }
    IPUML_CHECK(total > 0, kWho, ": the evaluation covered 0 samples (eval_input.batch_size ",
                batch, " with drop_last_batch over ", test_set.size(), " samples)");
    const double wall = seconds_since(t0);
    log_line("Eval", cli, steps, loss_sum / double(total), double(total) / std::max(wall, 1e-9),
             double(total) / std::max(wall, 1e-9), sim > 0 ? total / sim : 0,
             sim > 0 ? total / sim : 0);
    std::cout << "Avg Eval Loss: " << fixed(loss_sum / double(total), 6) << "\n";
    // modelzoo's metric names: unet's DiceCoefficient and MeanIOU, fc_mnist's accuracy.
    if (task.data == Task::Data::Masks)
      std::cout << "Eval metrics at global step " << step
                << ": eval/dice_coefficient = " << fixed(counts.dice(), 4)
                << ", eval/mean_iou = " << fixed(counts.iou(), 4) << "\n";
    else
      std::cout << "Eval metrics at global step " << step
                << ": eval/accuracy = " << fixed(double(correct) / double(total), 4) << "\n";
    return 0;
  });
}

}  // namespace

int main(int argc, char** argv) {
  Cli cli;
  CLI::App app{"ipuml-cerebras-run: the Cerebras modelzoo's run.py on an emulated CS-2"};
  // Checked after parsing, so that an unknown option is the error CLI11 reports first.
  app.add_option("device", cli.device, "Where to run: CSX (the emulated CS-2) or CPU");
  app.add_option("-p,--params", cli.params, "The modelzoo params yaml (required)");
  app.add_option("--num_csx", cli.num_csx, "CS-2 systems, data parallel (weight streaming)")
      ->check(CLI::Range(int64_t{1}, int64_t{192}));
  app.add_option("-m,--mode", cli.mode, "train, eval or train_and_eval")
      ->check(CLI::IsMember({"train", "eval", "train_and_eval"}));
  app.add_option("-o,--model_dir", cli.model_dir, "Where checkpoints go (and come from)");
  app.add_option("--checkpoint_path", cli.checkpoint_path,
                 "Start from this checkpoint instead of model_dir's newest");
  app.add_flag("--compile_only", cli.compile_only,
               "Compile the training step and print the execution mode, the fit and the "
               "projected throughput, without reading data or training");
  app.add_flag("--validate_only", cli.validate_only,
               "Check that the model traces and every operation is supported, without placing it");
  app.add_option("--max_steps", cli.max_steps, "Overrides runconfig.max_steps");
  app.add_option("--target", cli.target, "The emulated wafer: wse2 (CS-2), wse1 (CS-1) or tiny");
  app.add_option("--execution_strategy", cli.execution_strategy,
                 "auto (pipeline when the model fits the wafer), pipeline or weight_streaming")
      ->check(CLI::IsMember({"auto", "pipeline", "weight_streaming"}));
  app.add_option("--set", cli.target_overrides, "Override a target field: --set clock_hz=0.85e9");
  app.add_option("--job_labels", cli.job_labels, "Accepted as run.py takes them (printed)");
  app.add_option("--mount_dirs", cli.mount_dirs, "Accepted; the emulator reads paths directly");
  app.add_option("--python_paths", cli.python_paths, "Accepted; the emulator reads paths directly");
  examples::add_version_flag(app, kWho);
  if (auto rc = examples::parse_command_line(app, argc, argv, kWho)) return *rc;
  if (cli.device != "CSX" && cli.device != "CPU")
    return examples::usage_error(kWho, "the device must be CSX or CPU, got '" + cli.device + "'");
  if (cli.params.empty()) return examples::usage_error(kWho, "--params is required");
  if (cli.compile_only && cli.validate_only)
    return examples::usage_error(kWho, "--compile_only and --validate_only exclude each other");
  if (cli.device == "CPU" && (cli.compile_only || cli.validate_only || cli.num_csx > 1))
    return examples::usage_error(kWho,
                                 "--compile_only, --validate_only and --num_csx need device CSX");
  cerebras::Params p;
  try {
    p = cerebras::read_params(cli.params);
    if (p.train_input)
      IPUML_CHECK(p.train_input->batch_size % cli.num_csx == 0, p.file, ": train_input.batch_size ",
                  p.train_input->batch_size, " is the batch of all ", cli.num_csx,
                  " CS-2s together and must divide by --num_csx");
    if (p.train_input && p.train_input->micro_batch_size) {
      const int64_t micro = *p.train_input->micro_batch_size,
                    per = p.train_input->batch_size / cli.num_csx;
      if (per % micro != 0)
        p.train_input->keys.fail("micro_batch_size",
                                 std::to_string(micro) + " must divide the per-CS-X batch " +
                                     std::to_string(per) + " (train_input.batch_size " +
                                     std::to_string(p.train_input->batch_size) + " / num_csx " +
                                     std::to_string(cli.num_csx) + ")");
      if (cli.execution_strategy == "pipeline")
        p.train_input->keys.fail(
            "micro_batch_size",
            std::to_string(micro) +
                " is a weight-streaming setting; --execution_strategy pipeline streams the "
                "samples through the wafer without micro-batches (remove the key, or run with "
                "--execution_strategy weight_streaming)");
    }
  } catch (const std::exception& e) {
    return examples::usage_error(kWho, e.what());
  }
  try {
    const auto t_start = Clock::now();
    manual_seed(static_cast<uint64_t>(p.runconfig.seed.value_or(0)));
    for (auto& w : p.warnings) std::cout << "Note: " << w << "\n";
    if (p.eval_input && p.eval_input->keys.has("micro_batch_size") && cli.mode != "train")
      std::cout << "Note: " << p.eval_input->keys.where("micro_batch_size").str()
                << ": eval_input.micro_batch_size: evaluation runs each batch whole (ipuml's "
                   "inference has no micro-batches); ignored\n";
    if (!cli.job_labels.empty()) {
      std::cout << "Job labels:";
      for (auto& l : cli.job_labels) std::cout << " " << l;
      std::cout << "\n";
    }
    if (cli.compile_only || cli.validate_only) {
      // Sizing needs shapes only: the model and its optimizer state are made on the meta device,
      // so GPT-J 6B (24 GB of float32 weights) is sized in the memory of a laptop.
      std::optional<DefaultDeviceGuard> meta(std::in_place, kMeta);
      Task task = make_task(p);
      auto optimizer = make_optimizer(p, task);
      meta.reset();
      return compile_or_validate(cli, p, task, *optimizer);
    }
    Task task = make_task(p);
    IPUML_CHECK(task.data != Task::Data::None, p.model.keys.where("name").str(), ": model '",
                p.model.name,
                "' is sized here, not trained: ipuml does not read its data sets; run it with "
                "--compile_only (fit, execution mode, projected samples/sec) or --validate_only");
    auto optimizer = make_optimizer(p, task);
    int64_t max_steps = cli.max_steps;
    if (max_steps == 0 && p.runconfig.max_steps) max_steps = *p.runconfig.max_steps;
    if (max_steps == 0 && p.runconfig.num_epochs && p.train_input)
      max_steps = *p.runconfig.num_epochs *
                  ((task.data == Task::Data::Masks ? 8192 : 60000) / p.train_input->batch_size);
    IPUML_CHECK(max_steps > 0 || cli.mode == "eval", p.file,
                ": runconfig needs max_steps or num_epochs (or give --max_steps)");
    if (cli.mode != "eval") {
      if (int rc = train(cli, p, task, *optimizer, max_steps)) return rc;
    }
    if (cli.mode != "train") evaluate(cli, p, task);
    std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
  } catch (const std::exception& e) {
    return examples::run_error(kWho, e.what());
  }
  return 0;
}
