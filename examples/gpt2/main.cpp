// ipuml-gpt2: Graphcore's train_gpt2.py (nlp/gpt2/pytorch) with the flags that make sense here:
// GPT-2 language-model training on random token ids (--dataset generated, a throughput test) or
// on Debian's fortunes (--dataset fortunes, tokenized with GPT-2's BPE), eagerly, compiled on
// the CPU or on emulated IPUs with --layers-per-ipu; validation perplexity next to the unigram
// baseline; HDF5 checkpoints; and two more modes:
//   ipuml-gpt2 generate --checkpoint-output-dir DIR --prompt "..." [--max-new-tokens N ...]
//   ipuml-gpt2 --tokenize FILE     (the GPT-2 ids of each line, space-separated)
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/datasets/gpt2_bpe.hpp>
#include <ipuml/datasets/text_data.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/io/file.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/gpt2.hpp>
#include <ipuml/optim/optim.hpp>

#include <CLI/CLI.hpp>

#include "compile_only.hpp"
#include "config_presets.hpp"
#include "example_support.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ipuml;
using examples::Clock;
using examples::fixed;
using examples::Progress;
using examples::seconds_since;

constexpr const char* kWho = "ipuml-gpt2";

struct Config {
  std::string model = "gpt2-tiny";
  std::vector<int64_t> layers_per_ipu;
  int64_t ipus_per_replica = 1;
  int64_t replication_factor = 1;
  int64_t gradient_accumulation = 1;
  int64_t device_iterations = 1;
  int64_t batch_size = 8;
  int64_t max_len = 64;
  std::string optimizer = "AdamW";
  double learning_rate = 1e-3;
  double weight_decay = 0.01;
  std::string lr_schedule = "cosine";
  double lr_warmup = 0.01;
  std::string dataset = "generated";
  std::string data_dir;       // fortunes directory
  std::string tokenizer_dir;  // encoder.json + vocab.bpe
  int64_t epochs = 1;
  int64_t training_steps = 0;  // weight updates; 0: epochs decide
  bool recompute_checkpoint_every_layer = false;
  int64_t embedding_serialization_factor = 1;
  bool enable_half_partials = false;
  bool optimizer_state_offchip = false;
  bool replicated_tensor_sharding = false;
  std::vector<double> matmul_proportion;
  std::string checkpoint_output_dir;
  std::string device = "cpu";
  std::string target = "ipu2";
  std::vector<std::string> target_overrides;
  std::string report_dir;  // profile reports, one subdirectory per compiled program
  uint64_t seed = 42;
  int threads = 0;
  double dropout = 0.0;
  int64_t val_sequences = 256;
  int64_t log_steps = 10;
  bool profile = false;
  bool half_weights = false;          // fp16 weights and activations (model.half())
  std::string execution = "sharded";  // over --ipus-per-replica: sharded or pipelined
  double loss_scaling = 1;
  bool compile_only = false;
  std::string config;
  // generate
  std::string prompt = "";
  int64_t max_new_tokens = 50;
  double temperature = 0.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  bool no_cache = false;
};

std::string checkpoint_path(const Config& cfg) {
  return cfg.checkpoint_output_dir.empty() ? std::string()
                                           : cfg.checkpoint_output_dir + "/checkpoint.h5";
}

models::GPT2Config model_config(const Config& cfg, int64_t vocab);

void validate(const Config& cfg) {
  examples::check_report_dir(kWho, cfg.report_dir);
  auto positive = [](const char* flag, int64_t v) {
    IPUML_CHECK(v >= 1 && v <= (int64_t{1} << 31), kWho, ": ", flag, " ", v,
                " is outside [1, 2^31]");
  };
  positive("--batch-size", cfg.batch_size);
  positive("--device-iterations", cfg.device_iterations);
  positive("--replication-factor", cfg.replication_factor);
  positive("--gradient-accumulation", cfg.gradient_accumulation);
  positive("--ipus-per-replica", cfg.ipus_per_replica);
  positive("--epochs", cfg.epochs);
  IPUML_CHECK(cfg.max_len >= 2, kWho, ": --max-len ", cfg.max_len, " must be >= 2");
  IPUML_CHECK(cfg.optimizer == "AdamW", kWho, ": --optimizer '", cfg.optimizer,
              "' is not supported (expected AdamW, train_gpt2.py's choice)");
  examples::check_schedule(kWho, cfg.learning_rate, cfg.lr_warmup, cfg.training_steps, cfg.dropout);
  examples::check_layers_per_ipu(kWho, cfg.layers_per_ipu, cfg.ipus_per_replica);
  if (cfg.device == "eager")
    IPUML_CHECK(cfg.replication_factor == 1 && cfg.gradient_accumulation == 1 &&
                    cfg.layers_per_ipu.empty() && !cfg.enable_half_partials &&
                    !cfg.optimizer_state_offchip && !cfg.replicated_tensor_sharding,
                kWho,
                ": --replication-factor, --gradient-accumulation, --layers-per-ipu, "
                "--enable-half-partials, --optimizer-state-offchip and "
                "--replicated-tensor-sharding need --device cpu or ipu");
  IPUML_CHECK(!cfg.compile_only || cfg.device == "ipu", kWho,
              ": --compile-only estimates the emulated IPU: it needs --device ipu");
  ipu::Target target = ipu::target_preset(cfg.target);
  for (const auto& o : cfg.target_overrides) ipu::apply_override(target, o);
  if (!cfg.checkpoint_output_dir.empty())
    io::check_writable_path(checkpoint_path(cfg), std::string(kWho) + ": --checkpoint-output-dir",
                            true);
  // The model's own checks (layers per IPU, serialization factor) before any data is read, at
  // the vocabulary the data will have: the preset's when generated, GPT-2's BPE (50257) else.
  model_config(cfg, cfg.dataset == "generated" ? models::GPT2Config::preset(cfg.model).vocab_size()
                                               : int64_t{50257});
}

models::GPT2Config model_config(const Config& cfg, int64_t vocab) {
  auto c = models::GPT2Config::preset(cfg.model);
  c.vocab_size(vocab)
      .n_positions(std::max<int64_t>(c.n_positions(), cfg.max_len))
      .dropout(cfg.dropout)
      .layers_per_ipu(cfg.layers_per_ipu)
      .recompute_checkpoint_every_layer(cfg.recompute_checkpoint_every_layer)
      .embedding_serialization_factor(cfg.embedding_serialization_factor);
  c.validate();
  return c;
}

// Sizes that generate needs to rebuild the model, saved with the weights.
// The model's sizes (generate reads them), the flags a resumed run must share with the saved
// one, and where dropout's random numbers stood: the default generator's position (eager) and
// the compiled model's run counter, so that a resumed run continues bit for bit.
nn::StateDict training_state(const models::GPT2Config& c, int64_t step, const Config& cfg,
                             uint64_t rng_position, uint64_t run_counter) {
  auto i64 = [](int64_t v) { return full({}, static_cast<double>(v), kInt64); };
  return {{"vocab_size", i64(c.vocab_size())},
          {"n_positions", i64(c.n_positions())},
          {"n_embd", i64(c.n_embd())},
          {"n_layer", i64(c.n_layer())},
          {"n_head", i64(c.n_head())},
          {"updates", i64(step)},
          {"seed", i64(static_cast<int64_t>(cfg.seed))},
          {"generated", i64(cfg.dataset == "generated")},
          {"batch_size", i64(cfg.batch_size)},
          {"max_len", i64(cfg.max_len)},
          {"device_iterations", i64(cfg.device_iterations)},
          {"replication_factor", i64(cfg.replication_factor)},
          {"gradient_accumulation", i64(cfg.gradient_accumulation)},
          {"compiled", i64(cfg.device != "eager")},
          {"rng_position", i64(static_cast<int64_t>(rng_position))},
          {"run_counter", i64(static_cast<int64_t>(run_counter))}};
}

int64_t state_int(const nn::StateDict& s, const std::string& key, const std::string& path) {
  const Tensor* t = nn::find_in(s, key);
  IPUML_CHECK(t && t->numel() == 1 && t->dtype() == kInt64, kWho, ": checkpoint '", path,
              "' has no training state '", key, "' (not written by ipuml-gpt2?)");
  return t->item<int64_t>();
}

// ---- data ----------------------------------------------------------------------------------

struct Data {
  Tensor train, validation;  // [N, max_len + 1]
  int64_t vocab = 0;
  std::optional<double> unigram_ppl;
  std::string what;
};

Data load_data(const Config& cfg, int64_t combined) {
  Data d;
  const int64_t len = cfg.max_len + 1;
  if (cfg.dataset == "generated") {
    d.vocab = models::GPT2Config::preset(cfg.model).vocab_size();
    const int64_t rows = std::max<int64_t>(combined * 8, 64);
    d.train = datasets::generated_tokens(rows, len, d.vocab, cfg.seed);
    d.validation =
        datasets::generated_tokens(std::max<int64_t>(rows / 8, 8), len, d.vocab, cfg.seed + 1);
    d.what = "generated: uniformly random ids in [1, " + std::to_string(d.vocab) + ")";
    return d;
  }
  const auto tok = datasets::Gpt2Tokenizer::load(cfg.tokenizer_dir);
  const auto docs = datasets::read_fortunes(datasets::find_fortunes_dir(cfg.data_dir));
  const auto split = datasets::split_documents(docs);
  auto encode = [&](std::string_view s) { return tok.encode(s); };
  const auto train_tokens = datasets::tokenize_documents(split.train, encode, tok.eos_token_id());
  const auto val_tokens =
      datasets::tokenize_documents(split.validation, encode, tok.eos_token_id());
  d.vocab = tok.vocab_size();
  d.train = datasets::pack_sequences(train_tokens, len);
  d.validation = datasets::pack_sequences(val_tokens, len);
  if (d.validation.size(0) > cfg.val_sequences)
    d.validation = contiguous(slice(d.validation, 0, 0, cfg.val_sequences));
  d.unigram_ppl = datasets::UnigramModel(train_tokens, d.vocab).perplexity(d.validation);
  d.what = "fortunes: " + std::to_string(docs.size()) + " documents, " +
           std::to_string(train_tokens.size()) + " training and " +
           std::to_string(val_tokens.size()) + " validation tokens (GPT-2 BPE)";
  return d;
}

// Rows of `data` in an order fixed by (seed, epoch).
Tensor shuffled(const Tensor& data, uint64_t seed, int64_t epoch) {
  const int64_t n = data.size(0);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const RandomStream rs{seed, 0x7368756666ULL + static_cast<uint64_t>(epoch)};
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)],
              order[static_cast<size_t>(rs.integer(static_cast<uint64_t>(i), 0, i + 1))]);
  return index_select(data, 0, from_vector<int64_t>(order, {n}));
}

// Mean next-token loss over the validation rows, eagerly and without gradients.
double validation_loss(models::GPT2LMHeadModel& model, const Tensor& val, int64_t batch) {
  model->eval();
  NoGradGuard ng;
  double sum = 0;
  int64_t count = 0;
  for (int64_t at = 0; at < val.size(0); at += batch) {
    const Tensor rows = slice(val, 0, at, std::min(at + batch, val.size(0)));
    auto [x, y] = models::shift_tokens(rows);
    const double l = models::causal_lm_loss(model(x), y).item<float>();
    sum += l * double(rows.size(0));
    count += rows.size(0);
  }
  model->train();
  return sum / double(std::max<int64_t>(count, 1));
}

// ---- modes ---------------------------------------------------------------------------------

int tokenize_file(const std::string& path, const std::string& tokenizer_dir) {
  const auto tok = datasets::Gpt2Tokenizer::load(tokenizer_dir);
  const auto bytes =
      io::read_regular_file(path, std::string(kWho) + ": --tokenize", uint64_t{1} << 32);
  const std::string text(bytes.begin(), bytes.end());
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    const auto ids = tok.encode(std::string_view(text).substr(at, nl - at));
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
    std::cout << '\n';
    at = nl + 1;
  }
  return 0;
}

int generate(const Config& cfg) {
  const std::string path = checkpoint_path(cfg);
  IPUML_CHECK(!path.empty(), kWho,
              ": generate needs --checkpoint-output-dir (the directory a "
              "training run saved checkpoint.h5 in)");
  const auto ck = io::read_checkpoint(path);
  auto c = models::GPT2Config()
               .vocab_size(state_int(ck.training, "vocab_size", path))
               .n_positions(state_int(ck.training, "n_positions", path))
               .n_embd(state_int(ck.training, "n_embd", path))
               .n_layer(state_int(ck.training, "n_layer", path))
               .n_head(state_int(ck.training, "n_head", path))
               .dropout(0.0);
  models::GPT2LMHeadModel model(c);
  io::load_checkpoint(path, *model);
  const bool generated = state_int(ck.training, "generated", path) != 0;
  std::optional<datasets::Gpt2Tokenizer> tok;
  std::vector<int64_t> prompt;
  if (!generated) {
    tok = datasets::Gpt2Tokenizer::load(cfg.tokenizer_dir);
    prompt = tok->encode(cfg.prompt);
    IPUML_CHECK(!prompt.empty() || tok->eos_token_id() >= 0, kWho, ": --prompt is empty");
    if (prompt.empty()) prompt.push_back(tok->eos_token_id());
  } else {
    // A model trained on random ids: the prompt is read as ids.
    std::istringstream in(cfg.prompt);
    for (int64_t id; in >> id;) prompt.push_back(id);
    IPUML_CHECK(!prompt.empty(), kWho,
                ": this checkpoint was trained on generated ids; give "
                "--prompt as space-separated ids");
  }
  const auto t0 = Clock::now();
  const auto out = models::generate(model, prompt,
                                    models::GPT2GenerateOptions()
                                        .max_new_tokens(cfg.max_new_tokens)
                                        .temperature(cfg.temperature)
                                        .top_k(cfg.top_k)
                                        .top_p(cfg.top_p)
                                        .seed(cfg.seed)
                                        .use_cache(!cfg.no_cache)
                                        .eos_token_id(tok ? tok->eos_token_id() : -1));
  const double secs = seconds_since(t0);
  if (tok) {
    // The end-of-text token ends the text; it is not printed.
    auto text = out;
    if (!text.empty() && text.back() == tok->eos_token_id()) text.pop_back();
    std::cout << cfg.prompt << tok->decode(text) << "\n";
  } else {
    for (int64_t id : out) std::cout << id << " ";
    std::cout << "\n";
  }
  std::cerr << "Generated " << out.size() << " tokens in " << fixed(secs, 2) << " s ("
            << fixed(double(out.size()) / std::max(secs, 1e-9), 1) << " tokens/s"
            << (cfg.no_cache ? ", no KV cache" : ", KV cache") << ")\n";
  return 0;
}

Options make_options(const Config& cfg) {
  Options opts;
  opts.deviceIterations(cfg.device_iterations)
      .replicationFactor(cfg.replication_factor)
      .randomSeed(cfg.seed)
      .useIpuModel(cfg.device == "ipu")
      .target(cfg.target);
  opts.Training.gradientAccumulation(cfg.gradient_accumulation);
  if (cfg.enable_half_partials) opts.Precision.setPartialsType(kFloat16);
  if (cfg.execution == "pipelined")
    opts.setExecutionStrategy(runtime::ExecutionStrategy::Pipelined);
  opts.TensorLocations.setOptimizerLocation(
      TensorLocationSettings()
          .useOnChipStorage(!cfg.optimizer_state_offchip)
          .useReplicatedTensorSharding(cfg.replicated_tensor_sharding));
  if (!cfg.matmul_proportion.empty())
    examples::set_memory_proportion_per_ipu(opts, cfg.matmul_proportion);
  examples::apply_target_overrides(opts, cfg.target_overrides, kWho, cfg.ipus_per_replica);
  if (!cfg.report_dir.empty()) opts.autoReportDirectory(cfg.report_dir);
  return opts;
}

runtime::LossFn lm_loss() {
  return [](const Tensor& logits, const Tensor& y) { return models::causal_lm_loss(logits, y); };
}

// --compile-only: the training step the flags describe, traced, compiled and estimated, at the
// vocabulary the data would have (the preset's when generated, GPT-2's BPE otherwise).
int compile_only(const Config& cfg) {
  manual_seed(cfg.seed);
  const auto mc = model_config(cfg, cfg.dataset == "generated"
                                        ? models::GPT2Config::preset(cfg.model).vocab_size()
                                        : int64_t{50257});
  models::GPT2LMHeadModel model(mc);
  if (cfg.half_weights) model->half();
  optim::AdamW optimizer(model->parameters(),
                         optim::AdamWOptions(cfg.learning_rate).weight_decay(cfg.weight_decay));
  optimizer.set_loss_scaling(cfg.loss_scaling);
  Options opts = make_options(cfg);
  opts.compileOnly(true);
  auto tm = trainingModel(model.ptr(), opts, optimizer, lm_loss());
  const int64_t rows = opts.combined_batch(cfg.batch_size);
  const auto e =
      examples::print_compile_only(tm, examples::batch_shaped({rows, cfg.max_len}, kInt64),
                                   examples::batch_shaped({rows, cfg.max_len}, kInt64));
  std::cout << "Projected: " << fixed(e.samples_per_second(), 2) << " sequences/s ("
            << fixed(e.samples_per_second() * double(cfg.max_len), 0) << " tokens/s) on "
            << cfg.replication_factor * cfg.ipus_per_replica << " x " << cfg.target << "\n";
  return 0;
}

// After validate(cfg).
int train(const Config& cfg) {
  if (cfg.compile_only) return compile_only(cfg);
  const auto t_start = Clock::now();
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  manual_seed(cfg.seed);
  const bool compiled = cfg.device != "eager";
  const Options opts = make_options(cfg);
  const int64_t combined =
      cfg.batch_size * cfg.device_iterations * cfg.replication_factor * cfg.gradient_accumulation;
  const int64_t micro_per_call = cfg.replication_factor * cfg.gradient_accumulation;
  (void)micro_per_call;

  Data data = load_data(cfg, combined);
  std::cout << "Dataset " << data.what << "\n";
  std::cout << "  " << data.train.size(0) << " training and " << data.validation.size(0)
            << " validation sequences of " << cfg.max_len << "+1 tokens\n";
  const int64_t host_batches = data.train.size(0) / combined;
  IPUML_CHECK(host_batches >= 1, kWho, ": a host batch of ", combined,
              " sequences (batch-size x device-iterations x replication-factor x "
              "gradient-accumulation) exceeds the ",
              data.train.size(0), " training sequences");

  const auto mc = model_config(cfg, data.vocab);
  models::GPT2LMHeadModel model(mc);
  if (cfg.half_weights) model->half();
  int64_t n_params = 0;
  for (const auto& p : model->parameters()) n_params += p.numel();
  std::cout << "Model " << cfg.model << ": " << mc.n_layer() << " layers, n_embd " << mc.n_embd()
            << ", " << mc.n_head() << " heads, vocab " << mc.vocab_size() << ", " << n_params
            << " parameters\n";

  optim::AdamW optimizer(model->parameters(),
                         optim::AdamWOptions(cfg.learning_rate).weight_decay(cfg.weight_decay));
  optimizer.set_loss_scaling(cfg.loss_scaling);
  const int64_t updates_per_epoch = host_batches * cfg.device_iterations;
  const int64_t total_updates =
      cfg.training_steps > 0 ? cfg.training_steps : updates_per_epoch * cfg.epochs;
  const int64_t warmup = static_cast<int64_t>(std::floor(cfg.lr_warmup * double(total_updates)));
  std::unique_ptr<optim::LRScheduler> scheduler;
  if (cfg.lr_schedule == "cosine")
    scheduler = std::make_unique<optim::CosineWithWarmup>(optimizer, warmup,
                                                          std::max(total_updates, warmup + 1));
  else
    scheduler = std::make_unique<optim::LambdaLR>(
        optimizer, [warmup](int64_t e) { return e < warmup ? double(e) / double(warmup) : 1.0; });

  int64_t done = 0;
  uint64_t rng_position = default_generator().position(), run_counter = 0;
  const std::string ck = checkpoint_path(cfg);
  std::error_code ec;
  if (!ck.empty() && std::filesystem::exists(ck, ec)) {
    nn::StateDict opt_state, saved;
    done = io::load_checkpoint(ck, *model, &opt_state, &saved);
    optimizer.load_state_dict(opt_state);
    // Resuming continues the saved run: the flags that shape it must be the same.
    const nn::StateDict mine = training_state(mc, done, cfg, 0, 0);
    for (const auto& [key, t] : mine) {
      if (key == "updates" || key == "rng_position" || key == "run_counter") continue;
      const int64_t want = state_int(saved, key, ck), have = t.item<int64_t>();
      IPUML_CHECK(want == have, kWho, ": checkpoint '", ck, "' was saved with ", key, " ", want,
                  " but this run has ", have,
                  "; resuming continues the saved run (use the same flags, or another "
                  "--checkpoint-output-dir)");
    }
    const int64_t pos = state_int(saved, "rng_position", ck),
                  runs = state_int(saved, "run_counter", ck);
    IPUML_CHECK(pos >= 0 && runs >= 0, kWho, ": checkpoint '", ck,
                "': negative rng_position or run_counter");
    rng_position = static_cast<uint64_t>(pos);
    run_counter = static_cast<uint64_t>(runs);
    for (int64_t i = 0; i < done; ++i) scheduler->step();
    std::cout << "Resumed from " << ck << " after " << done << " weight updates\n";
  }
  // Dropout continues where the saved run stopped.
  default_generator().set_position(rng_position);

  std::optional<runtime::TrainingModel> tm;
  if (compiled) {
    tm.emplace(trainingModel(model.ptr(), opts, optimizer, lm_loss()));
    tm->set_run_counter(run_counter);
  }

  Progress progress;
  double wall = 0, simulated = 0, loss_sum = 0;
  int64_t samples = 0, loss_count = 0;
  double last_loss = 0;
  for (int64_t epoch = done / updates_per_epoch; done < total_updates; ++epoch) {
    const Tensor order = shuffled(data.train, cfg.seed, epoch);
    const auto t_epoch = Clock::now();
    double epoch_loss = 0;
    int64_t epoch_count = 0;
    const int64_t skip = (done % updates_per_epoch) / cfg.device_iterations;
    for (int64_t b = skip; b < host_batches && done < total_updates; ++b) {
      const Tensor batch = slice(order, 0, b * combined, (b + 1) * combined);
      auto [x, y] = models::shift_tokens(batch);
      const auto t0 = Clock::now();
      std::vector<float> losses;
      if (compiled) {
        losses = (*tm)(x, y).to_vector<float>();
        if (tm->last_stats().simulated_seconds) simulated += *tm->last_stats().simulated_seconds;
        for (int64_t i = 0; i < cfg.device_iterations; ++i) scheduler->step();
        done += cfg.device_iterations;
      } else {
        for (int64_t i = 0; i < cfg.device_iterations && done < total_updates; ++i) {
          const Tensor xi = slice(x, 0, i * cfg.batch_size, (i + 1) * cfg.batch_size);
          const Tensor yi = slice(y, 0, i * cfg.batch_size, (i + 1) * cfg.batch_size);
          optimizer.zero_grad();
          Tensor loss = models::causal_lm_loss(model(xi), yi);
          loss.backward();
          optimizer.step();
          scheduler->step();
          losses.push_back(loss.item<float>());
          ++done;
        }
      }
      wall += seconds_since(t0);
      samples += combined;
      for (float l : losses) epoch_loss += l, ++epoch_count, loss_sum += l, ++loss_count;
      last_loss = losses.empty() ? last_loss : losses.back();
      progress.update("Epoch ", epoch + 1, " step ", done, "/", total_updates, " loss ",
                      fixed(last_loss, 4), " ppl ", fixed(std::exp(last_loss), 1), "  ",
                      fixed(double(samples) / std::max(wall, 1e-9), 1), " samples/s");
      if (!progress.tty() && cfg.log_steps > 0 && (b + 1) % cfg.log_steps == 0)
        std::cout << "  step " << done << "/" << total_updates << ": loss " << fixed(last_loss, 4)
                  << ", lr " << scheduler->get_last_lr()[0] << std::endl;
    }
    progress.done();
    const double mean = epoch_count ? epoch_loss / double(epoch_count) : 0.0;
    std::cout << "Epoch " << epoch + 1 << ": " << done << "/" << total_updates << " updates, loss "
              << fixed(mean, 4) << " (perplexity " << fixed(std::exp(mean), 1) << ") in "
              << fixed(seconds_since(t_epoch), 1) << " s" << std::endl;
    if (epoch == 0 && cfg.profile && tm && cfg.device == "ipu") tm->printProfileSummary(std::cout);
    if (!ck.empty())
      io::save_checkpoint(ck, *model, optimizer.state_dict(), done,
                          training_state(mc, done, cfg, default_generator().position(),
                                         tm ? tm->run_counter() : 0));
  }

  const double val = validation_loss(model, data.validation, cfg.batch_size);
  std::cout << "Validation: loss " << fixed(val, 4) << ", perplexity " << fixed(std::exp(val), 2);
  if (data.unigram_ppl)
    std::cout << " (unigram baseline perplexity " << fixed(*data.unigram_ppl, 2) << ")";
  std::cout << "\n";
  examples::print_throughput(samples, wall, simulated,
                             cfg.replication_factor * cfg.ipus_per_replica, cfg.target);
  if (!ck.empty()) std::cout << "Checkpoint: " << ck << "\n";
  std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
  return 0;
}

// The reference command line of train_gpt2.py (REFERENCE: GPT-2), as far as ipuml's flags express
// it; --remap-logit and --enable-sequence-serialized have no counterpart here.
const std::vector<examples::ConfigPreset>& presets() {
  static const std::vector<examples::ConfigPreset> p = {
      {"gpt2-small-pod16",
       "GPT-2 small, seq 1024, 4 replicas x 4 IPUs (0 4 4 4) pipelined, accumulation 2048, 8 "
       "device iterations, fp16 with half partials, recomputation, AdamW state off chip and "
       "sharded",
       {{"--model", "gpt2"},
        {"--device", "ipu"},
        {"--ipus-per-replica", "4"},
        {"--replication-factor", "4"},
        {"--gradient-accumulation", "2048"},
        {"--device-iterations", "8"},
        {"--batch-size", "1"},
        {"--layers-per-ipu", "0", "4", "4", "4"},
        {"--matmul-proportion", "0.15", "0.15", "0.15", "0.15"},
        {"--max-len", "1024"},
        {"--optimizer", "AdamW"},
        {"--learning-rate", "0.00015"},
        {"--lr-schedule", "cosine"},
        {"--lr-warmup", "0.01"},
        {"--embedding-serialization-factor", "4"},
        {"--recompute-checkpoint-every-layer", "True"},
        {"--enable-half-partials", "True"},
        {"--replicated-tensor-sharding", "True"},
        {"--optimizer-state-offchip", "True"},
        {"--half-weights", "True"},
        {"--execution", "pipelined"},
        {"--loss-scaling", "50000"},
        {"--dataset", "generated"},
        {"--epochs", "1"}}},
  };
  return p;
}

// ipuml-gpt2 generate: its own flags, read into the same Config.
CLI::App* add_generate(CLI::App& app, Config& cfg) {
  CLI::App* gen = app.add_subcommand("generate", "Continue a prompt with a trained checkpoint");
  gen->add_option("--checkpoint-output-dir,--checkpoint", cfg.checkpoint_output_dir,
                  "Directory of the training run's checkpoint.h5")
      ->required();
  gen->add_option("--prompt", cfg.prompt, "Text to continue")->capture_default_str();
  gen->add_option("--max-new-tokens", cfg.max_new_tokens, "Tokens to generate")
      ->check(examples::integer_at_least(0))
      ->capture_default_str();
  gen->add_option("--temperature", cfg.temperature, "0: greedy; otherwise sampled")
      ->check(examples::number_at_least(0))
      ->capture_default_str();
  gen->add_option("--top-k", cfg.top_k, "Sample among the k most likely (0: all)")
      ->check(examples::integer_at_least(0))
      ->capture_default_str();
  gen->add_option("--top-p", cfg.top_p, "Nucleus sampling threshold")
      ->check(examples::number_in(0, 1, true))
      ->capture_default_str();
  gen->add_option("--seed", cfg.seed, "Sampling seed")->capture_default_str();
  gen->add_option("--tokenizer-dir", cfg.tokenizer_dir, "encoder.json + vocab.bpe");
  gen->add_flag("--no-cache", cfg.no_cache, "Recompute the whole context at every step");
  return gen;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  std::string tokenize;
  std::string recompute = "False", half_partials = "False", offchip = "False", rts = "False",
              half_weights = "False";
  CLI::App app{
      "ipuml-gpt2: GPT-2 language-model training (Graphcore's train_gpt2.py), "
      "generation and tokenization"};
  app.add_option("--model", cfg.model, "gpt2-tiny (tiny), gpt2, gpt2-medium or gpt2-large")
      ->check(CLI::IsMember(
          {"tiny", "gpt2-tiny", "small", "gpt2", "medium", "gpt2-medium", "large", "gpt2-large"}))
      ->capture_default_str();
  app.add_option("--layers-per-ipu", cfg.layers_per_ipu,
                 "Transformer layers on each IPU, e.g. 0 4 4 4 (embeddings and head on IPU 0)");
  app.add_option("--ipus-per-replica", cfg.ipus_per_replica, "IPUs one replica spans")
      ->capture_default_str();
  app.add_option("--replication-factor", cfg.replication_factor, "Data-parallel replicas")
      ->capture_default_str();
  app.add_option("--gradient-accumulation", cfg.gradient_accumulation,
                 "Micro-batches per weight update")
      ->capture_default_str();
  app.add_option("--device-iterations", cfg.device_iterations, "Weight updates per host call")
      ->capture_default_str();
  app.add_option("--batch-size", cfg.batch_size, "Micro-batch size")->capture_default_str();
  app.add_option("--max-len", cfg.max_len, "Sequence length (the model sees max-len tokens)")
      ->capture_default_str();
  app.add_option("--optimizer", cfg.optimizer, "AdamW")->capture_default_str();
  app.add_option("--learning-rate", cfg.learning_rate, "Peak learning rate")->capture_default_str();
  app.add_option("--weight-decay", cfg.weight_decay, "AdamW weight decay")->capture_default_str();
  app.add_option("--lr-schedule", cfg.lr_schedule, "cosine or constant (after the warm-up)")
      ->check(CLI::IsMember({"cosine", "constant"}))
      ->capture_default_str();
  app.add_option("--lr-warmup", cfg.lr_warmup, "Warm-up as a fraction of the training steps")
      ->capture_default_str();
  app.add_option("--dataset", cfg.dataset,
                 "generated (random ids, a throughput test) or fortunes (Debian's fortunes, "
                 "GPT-2 BPE)")
      ->check(CLI::IsMember({"generated", "fortunes"}))
      ->capture_default_str();
  app.add_option("--data-dir", cfg.data_dir,
                 "Fortunes directory (default /usr/share/games/fortunes)");
  app.add_option("--tokenizer-dir", cfg.tokenizer_dir,
                 "encoder.json + vocab.bpe (default: the data cache, scripts/fetch-data.sh "
                 "gpt2-tokenizer)");
  app.add_option("--epochs", cfg.epochs, "Passes over the training sequences")
      ->capture_default_str();
  app.add_option("--training-steps", cfg.training_steps,
                 "Weight updates in all (0: --epochs decides)")
      ->capture_default_str();
  app.add_option("--recompute-checkpoint-every-layer", recompute,
                 "True: a recomputation checkpoint after each layer")
      ->capture_default_str();
  app.add_option("--embedding-serialization-factor", cfg.embedding_serialization_factor,
                 "The tied LM head computed in this many vocabulary slices")
      ->capture_default_str();
  app.add_option("--enable-half-partials", half_partials,
                 "True: float16 partial sums in matrix products (IPU)")
      ->capture_default_str();
  app.add_option("--optimizer-state-offchip", offchip,
                 "True: AdamW's moments live in streaming memory, not on the tiles (IPU)")
      ->capture_default_str();
  app.add_option("--replicated-tensor-sharding", rts,
                 "True: AdamW's moments sharded over the replicas, each holding 1/R (IPU)")
      ->capture_default_str();
  app.add_option("--half-weights", half_weights,
                 "True: float16 weights and activations (model.half()), as the reference runs")
      ->capture_default_str();
  app.add_option("--execution", cfg.execution,
                 "Over --ipus-per-replica IPUs: sharded (one IPU at a time) or pipelined "
                 "(PopTorch's PipelinedExecution; --gradient-accumulation >= 2 x IPUs - 1)")
      ->check(CLI::IsMember({"sharded", "pipelined"}))
      ->capture_default_str();
  app.add_option("--loss-scaling", cfg.loss_scaling,
                 "Loss scaling: the gradients' seed, divided out by the optimizer")
      ->check(examples::number_above(0))
      ->capture_default_str();
  app.add_flag("--compile-only", cfg.compile_only, examples::kCompileOnlyHelp);
  examples::add_config_option(app, cfg.config, presets());
  app.add_option("--matmul-proportion", cfg.matmul_proportion,
                 "Per IPU: the fraction of tile memory for matmul temporaries");
  app.add_option("--checkpoint-output-dir", cfg.checkpoint_output_dir,
                 "Save checkpoint.h5 here after each epoch; resume from it if present; generate "
                 "reads it");
  app.add_option("--device", cfg.device, "eager, cpu (compiled) or ipu (emulated)")
      ->check(CLI::IsMember({"eager", "cpu", "ipu"}))
      ->capture_default_str();
  app.add_option("--target", cfg.target, "Emulated IPU target: ipu1, ipu2, bow, tiny")
      ->capture_default_str();
  app.add_option("--set", cfg.target_overrides, "Override a target field (repeatable)");
  examples::add_report_dir_option(app, cfg.report_dir);
  app.add_option("--seed", cfg.seed, "Seed for initialisation, data order and sampling")
      ->capture_default_str();
  app.add_option("--threads", cfg.threads, "Worker threads (0: all cores)")->capture_default_str();
  app.add_option("--dropout", cfg.dropout, "Dropout of embeddings, attention and residuals")
      ->capture_default_str();
  app.add_option("--val-sequences", cfg.val_sequences, "Validation sequences evaluated at most")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--log-steps", cfg.log_steps, "Host batches between log lines without a terminal")
      ->capture_default_str();
  app.add_flag("--profile", cfg.profile, "Print the emulated IPU's profile summary");
  app.add_option("--tokenize", tokenize,
                 "Print the GPT-2 ids of each line of FILE, space-separated, and exit");
  CLI::App* gen = add_generate(app, cfg);
  if (auto rc = examples::parse_command_line(app, argc, argv, kWho, presets(), cfg.config))
    return *rc;
  // Every flag of a training run is checked before anything is printed or read.
  try {
    cfg.recompute_checkpoint_every_layer =
        examples::parse_bool(kWho, "--recompute-checkpoint-every-layer", recompute);
    cfg.enable_half_partials = examples::parse_bool(kWho, "--enable-half-partials", half_partials);
    cfg.optimizer_state_offchip = examples::parse_bool(kWho, "--optimizer-state-offchip", offchip);
    cfg.replicated_tensor_sharding =
        examples::parse_bool(kWho, "--replicated-tensor-sharding", rts);
    cfg.half_weights = examples::parse_bool(kWho, "--half-weights", half_weights);
    if (tokenize.empty() && !gen->parsed()) validate(cfg);
  } catch (const std::exception& e) {
    return examples::usage_error(kWho, e.what());
  }
  try {
    if (!tokenize.empty()) return tokenize_file(tokenize, cfg.tokenizer_dir);
    if (gen->parsed()) return generate(cfg);
    return train(cfg);
  } catch (const std::exception& e) {
    return examples::run_error(kWho, e.what());
  }
}
