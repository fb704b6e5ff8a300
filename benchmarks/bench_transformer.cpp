// Transformer training steps on the CPU: GPT-2 small (models/gpt2.hpp; next-token loss over the
// tied LM head, AdamW) and BERT-base pre-training (models/bert.hpp; MLM head at the masked
// positions only, as the example and Graphcore's BERT, + NSP; AdamW or LAMB), on random token
// ids from a fixed seed. Each mode runs its warm-up steps (the graph mode's first one traces and
// compiles), then times --steps steps one by one and reports their median:
// "ipuml gpt2|bert train batch=B seq=S threads=T mode=M optimizer=O params=P step_ms=X
//  samples_per_s=Y tokens_per_s=Z". Modes: eager (op by op with autograd) and graph (the step
//  traced once by
// trainingModel and run by the CPU executor). --profile adds, after each graph line, the traced
// step's time per op kind (the CPU executor's op timing) and its matrix products by shape, each
// timed alone with ipuml's sgemm.
// Usage: bench_transformer [--model gpt2|bert] [--batch 4] [--seq 128] [--threads T]
//                          [--steps 5] [--warmup 2] [--modes eager,graph] [--optimizer adamw]
//                          [--dropout 0] [--profile]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/op_profile.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/bert.hpp>
#include <ipuml/models/gpt2.hpp>

#include "peak.hpp"
#include "print_op_profile.hpp"
#include "threads.hpp"

namespace {

using namespace ipuml;
using Clock = std::chrono::steady_clock;
using runtime::Tensors;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One matrix product of the step as the CPU executor's matmul kernel issues it: `batch`
// products of op(A)[m, k] op(B)[k, n] (a batch sharing one B with a plain A is one taller
// product, as the kernel runs it).
struct GemmShape {
  int64_t batch, m, n, k;
  bool ta, tb;
  auto key() const { return std::tuple(batch, m, n, k, ta, tb); }
  bool operator<(const GemmShape& o) const { return key() < o.key(); }
};

GemmShape gemm_shape(const ir::Graph& g, const ir::Node& node) {
  const Shape& sa = g.meta(node.inputs[0]).shape;
  const Shape& sb = g.meta(node.inputs[1]).shape;
  const bool ta = node.attrs.flag, tb = node.attrs.flag2;
  GemmShape s{1,
              ta ? sa[sa.size() - 1] : sa[sa.size() - 2],
              tb ? sb[sb.size() - 2] : sb[sb.size() - 1],
              ta ? sa[sa.size() - 2] : sa.back(),
              ta,
              tb};
  int64_t batch_a = 1, batch_b = 1;
  for (size_t i = 0; i + 2 < sa.size(); ++i) batch_a *= sa[i];
  for (size_t i = 0; i + 2 < sb.size(); ++i) batch_b *= sb[i];
  s.batch = std::max(batch_a, batch_b);
  if (batch_b == 1 && !ta && s.batch > 1) {
    s.m *= s.batch;
    s.batch = 1;
  }
  return s;
}

// Seconds per call of ipuml's sgemm at one shape (median of a few calls after a warm-up).
double time_gemm(const GemmShape& s) {
  std::vector<float> a(static_cast<size_t>(s.batch * s.m * s.k), 0.5f),
      b(static_cast<size_t>(s.batch * s.k * s.n), 0.25f),
      c(static_cast<size_t>(s.batch * s.m * s.n));
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  auto run = [&] {
    cpu::sgemm_batched(s.ta, s.tb, s.batch, s.m, s.n, s.k, 1.0f, a.data(), lda, s.m * s.k, b.data(),
                       ldb, s.k * s.n, 0.0f, c.data(), s.n, s.m * s.n);
  };
  run();
  std::vector<double> t;
  double spent = 0;
  while (t.size() < 3 || (spent < 0.3 && t.size() < 50)) {
    const auto t0 = Clock::now();
    run();
    t.push_back(seconds_since(t0));
    spent += t.back();
  }
  return median(t);
}

// The step graph's matrix products grouped by shape, each timed alone: where the MatMul rows of
// the op profile go. (The optimizer's update graph has none.)
void print_gemm_shapes(const ir::Graph& g) {
  std::map<GemmShape, int64_t> count;
  for (const auto& node : g.nodes)
    if (node.kind == ir::OpKind::MatMul) ++count[gemm_shape(g, node)];
  struct Row {
    GemmShape s;
    int64_t calls;
    double flops, seconds;
  };
  std::vector<Row> rows;
  double total_flops = 0, total_seconds = 0;
  for (const auto& [s, n] : count) {
    const double flops = 2.0 * double(s.batch * s.m * s.n * s.k) * double(n);
    const double sec = time_gemm(s) * double(n);
    rows.push_back({s, n, flops, sec});
    total_flops += flops;
    total_seconds += sec;
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.seconds > b.seconds; });
  std::printf("  matmuls of the step by shape (each timed alone with ipuml's sgemm):\n");
  std::printf("  %-32s %6s %9s %9s %7s\n", "batch x m x n x k (op(A), op(B))", "calls", "GFLOP",
              "ms", "GFLOP/s");
  for (const auto& r : rows) {
    char name[96];
    std::snprintf(name, sizeof name, "%lldx%lldx%lldx%lld (%s)", static_cast<long long>(r.s.batch),
                  static_cast<long long>(r.s.m), static_cast<long long>(r.s.n),
                  static_cast<long long>(r.s.k),
                  r.s.ta ? (r.s.tb ? "tt" : "tn") : (r.s.tb ? "nt" : "nn"));
    std::printf("  %-32s %6lld %9.2f %9.2f %7.1f\n", name, static_cast<long long>(r.calls),
                r.flops / 1e9, 1e3 * r.seconds, r.flops / r.seconds / 1e9);
  }
  std::printf("  %-32s %6s %9.2f %9.2f %7.1f\n", "total", "", total_flops / 1e9,
              1e3 * total_seconds, total_flops / total_seconds / 1e9);
}

int64_t count_parameters(const nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& name,
                                                 std::vector<Tensor> params) {
  // The examples' settings: lr 1e-4 here (the value does not change the work), weight decay 0.01.
  if (name == "lamb")
    return std::make_unique<optim::LAMB>(std::move(params),
                                         optim::LAMBOptions(1e-4).weight_decay(0.01));
  return std::make_unique<optim::AdamW>(std::move(params),
                                        optim::AdamWOptions(1e-4).weight_decay(0.01));
}

// BERT's inputs as the example feeds them: ids in [1, vocab), token types 0 then 1 from the
// middle, no padding, `masked` distinct positions per row (never [CLS] at 0) with labels, the
// last slot unused (-100, as a row with fewer maskable tokens has), and NSP labels.
struct BertBatch {
  Tensor ids, types, mask, positions, mlm_labels, nsp_labels;
};

BertBatch bert_batch(int64_t b, int64_t s, int64_t masked, int64_t vocab) {
  BertBatch x;
  x.ids = randint(1, vocab, {b, s});
  std::vector<int64_t> types(static_cast<size_t>(b * s));
  for (int64_t i = 0; i < b * s; ++i) types[static_cast<size_t>(i)] = (i % s) >= s / 2 ? 1 : 0;
  x.types = from_vector<int64_t>(types, {b, s});
  x.mask = ones({b, s}, kInt64);
  std::mt19937_64 rng(1234);
  std::vector<int64_t> pos, lab;
  for (int64_t r = 0; r < b; ++r) {
    std::vector<int64_t> cand;
    for (int64_t j = 1; j < s; ++j) cand.push_back(j);
    std::shuffle(cand.begin(), cand.end(), rng);
    std::sort(cand.begin(), cand.begin() + masked);
    for (int64_t j = 0; j < masked; ++j) {
      pos.push_back(cand[static_cast<size_t>(j)]);
      lab.push_back(j == masked - 1 ? -100 : static_cast<int64_t>(rng() % uint64_t(vocab - 1)) + 1);
    }
  }
  x.positions = from_vector<int64_t>(pos, {b, masked});
  x.mlm_labels = from_vector<int64_t>(lab, {b, masked});
  x.nsp_labels = randint(0, 2, {b});
  return x;
}

Tensor bert_loss(const Tensor& mlm, const Tensor& nsp, const Tensor& mlm_labels,
                 const Tensor& nsp_labels) {
  // Mean over the labelled tokens (ignore_index -100), plus NSP: BertForPreTraining's loss.
  return add(cross_entropy(reshape(mlm, {-1, mlm.size(2)}), reshape(mlm_labels, {-1})),
             cross_entropy(nsp, nsp_labels));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ipuml GPT-2 small / BERT-base training step"};
  std::string model_name = "gpt2", optimizer_name = "adamw";
  int64_t batch = 4, seq = 128, steps = 5, warmup = 2;
  int threads = 1;
  double dropout = 0.0;
  bool profile = false;
  std::vector<std::string> modes{"eager", "graph"};
  app.add_option("--model", model_name, "gpt2 (GPT-2 small) or bert (BERT-base)")
      ->check(CLI::IsMember({"gpt2", "bert"}));
  app.add_option("--batch", batch, "sequences per step")->check(CLI::PositiveNumber);
  app.add_option("--seq", seq, "tokens per sequence")->check(CLI::Range(8, 512));
  app.add_option("--threads", threads, "oneTBB threads")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "timed steps per mode (median reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first (the graph's first compiles)")
      ->check(CLI::PositiveNumber);
  app.add_option("--modes", modes, "eager, graph (CPU executor)")->delimiter(',');
  app.add_option("--optimizer", optimizer_name, "adamw, or lamb (BERT)")
      ->check(CLI::IsMember({"adamw", "lamb"}));
  app.add_option("--dropout", dropout, "dropout everywhere (the examples' default: 0)")
      ->check(CLI::Range(0.0, 0.9));
  app.add_flag("--profile", profile, "print the traced step's time per op kind and GEMM shape");
  CLI11_PARSE(app, argc, argv);
  return bench::with_threads(threads, [&] {
    const bool gpt2 = model_name == "gpt2";

    for (const auto& mode : modes) {
      manual_seed(0);
      std::shared_ptr<nn::Module> net;
      std::function<Tensor()> eager_loss;  // forward and loss of one eager step
      std::unique_ptr<runtime::TrainingModel> tm;
      std::unique_ptr<optim::Optimizer> opt;
      Tensors inputs, targets;
      const Options opts = Options().useIpuModel(false).showCompilationProgressBar(false);
      if (gpt2) {
        models::GPT2LMHeadModel m(models::GPT2Config::small().dropout(dropout));
        net = m.ptr();
        opt = make_optimizer(optimizer_name, m->parameters());
        auto [x, y] = models::shift_tokens(randint(0, m->config().vocab_size(), {batch, seq + 1}));
        inputs = {x};
        targets = {y};
        eager_loss = [m, x = x, y = y]() mutable { return models::causal_lm_loss(m(x), y); };
        if (mode == "graph")
          tm = std::make_unique<runtime::TrainingModel>(net, opts, *opt, models::causal_lm_loss);
      } else {
        const auto cfg =
            models::BertConfig::base().hidden_dropout_prob(dropout).attention_probs_dropout_prob(
                dropout);
        models::BertForPreTraining m(cfg);
        net = m.ptr();
        opt = make_optimizer(optimizer_name, m->parameters());
        const int64_t masked = (seq * 15 + 99) / 100;  // the example's default: ceil(15 % of S)
        const BertBatch d = bert_batch(batch, seq, masked, cfg.vocab_size());
        inputs = {d.ids, d.types, d.mask, d.positions};
        targets = {d.mlm_labels, d.nsp_labels};
        eager_loss = [m, d]() mutable {
          auto [mlm, nsp] = m->forward_masked(d.ids, d.types, d.mask, d.positions);
          return bert_loss(mlm, nsp, d.mlm_labels, d.nsp_labels);
        };
        if (mode == "graph")
          tm = std::make_unique<runtime::TrainingModel>(
              net, opts, *opt,
              [m](const Tensors& in) mutable {
                auto [mlm, nsp] = m->forward_masked(in[0], in[1], in[2], in[3]);
                return Tensors{mlm, nsp};
              },
              [](const Tensors& out, const Tensors& t) {
                return bert_loss(out[0], out[1], t[0], t[1]);
              });
      }
      // Eager steps add each phase's time here: forward + loss, backward, optimizer.
      double phase[3] = {0, 0, 0};
      std::function<void()> step = [&] {
        auto t0 = Clock::now();
        opt->zero_grad();
        Tensor loss = eager_loss();
        phase[0] += seconds_since(t0);
        t0 = Clock::now();
        loss.backward();
        phase[1] += seconds_since(t0);
        t0 = Clock::now();
        opt->step();
        phase[2] += seconds_since(t0);
      };
      if (tm) step = [&] { (*tm)(inputs, targets); };

      const auto t_warm = Clock::now();
      for (int64_t i = 0; i < warmup; ++i) step();
      const double warm_s = seconds_since(t_warm);
      const bool prof = profile && tm;
      if (prof) {
        cpu::reset_op_profile();
        cpu::set_op_profiling(true);
      }
      std::fill(phase, phase + 3, 0.0);
      std::vector<double> times;
      for (int64_t i = 0; i < steps; ++i) {
        const auto t0 = Clock::now();
        step();
        times.push_back(seconds_since(t0));
      }
      cpu::set_op_profiling(false);
      const double med = median(times);
      std::printf(
          "ipuml %s train batch=%lld seq=%lld threads=%d mode=%s optimizer=%s params=%lld "
          "warmup_s=%.1f step_ms=%.1f samples_per_s=%.3f tokens_per_s=%.1f\n",
          model_name.c_str(), static_cast<long long>(batch), static_cast<long long>(seq), threads,
          mode.c_str(), optimizer_name.c_str(), static_cast<long long>(count_parameters(*net)),
          warm_s, 1e3 * med, static_cast<double>(batch) / med,
          static_cast<double>(batch * seq) / med);
      if (tm)
        bench::print_peak_fraction(
            (model_name + " train batch=" + std::to_string(batch) + " seq=" + std::to_string(seq))
                .c_str(),
            bench::graph_flops(tm->step_graph()), 1.0 / med, threads);
      const double n = static_cast<double>(steps);
      if (profile && !tm)
        std::printf(
            "  eager phases (ms per step, mean): forward+loss %.1f, backward %.1f, "
            "optimizer %.1f\n",
            1e3 * phase[0] / n, 1e3 * phase[1] / n, 1e3 * phase[2] / n);
      if (prof) {
        print_op_profile(n);
        print_gemm_shapes(tm->step_graph());
      }
      std::fflush(stdout);
    }
    return 0;
  });
}
