// GPT-2 as Hugging Face's GPT2LMHeadModel (pre-LN blocks, gelu_new, LM head tied to wte), name
// for name, with Graphcore's layers_per_ipu placement and train_gpt2.py's shifted-label loss.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/core/rng.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/nn/nn.hpp>

#include <ipuml/models/causal_lm.hpp>

namespace ipuml::models {

struct GPT2Config {
  // For tests: small enough to train a few steps in well under a second.
  static GPT2Config tiny() {
    return GPT2Config().n_layer(2).n_embd(64).n_head(2).n_positions(128).vocab_size(1000);
  }
  static GPT2Config small() { return GPT2Config(); }
  static GPT2Config medium() { return GPT2Config().n_layer(24).n_embd(1024).n_head(16); }
  static GPT2Config large() { return GPT2Config().n_layer(36).n_embd(1280).n_head(20); }
  // Hugging Face's gpt2-xl: 1,557,611,200 parameters (64-wide heads, as the other sizes).
  static GPT2Config xl() { return GPT2Config().n_layer(48).n_embd(1600).n_head(25); }
  // "tiny" (or "gpt2-tiny"), "small", "medium", "large", "xl", or Hugging Face's "gpt2",
  // "gpt2-medium", "gpt2-large", "gpt2-xl".
  static GPT2Config preset(const std::string& name) {
    if (name == "tiny" || name == "gpt2-tiny") return tiny();
    if (name == "small" || name == "gpt2") return small();
    if (name == "medium" || name == "gpt2-medium") return medium();
    if (name == "large" || name == "gpt2-large") return large();
    if (name == "xl" || name == "gpt2-xl") return xl();
    fail("GPT2Config: unknown preset '", name,
         "' (expected tiny, gpt2-tiny, small, medium, large, xl, gpt2, gpt2-medium, gpt2-large "
         "or gpt2-xl)");
  }

  // Sets the three dropout probabilities at once (HF keeps them apart; GPT-2 uses 0.1 for all).
  GPT2Config& dropout(double p) {
    resid_pdrop_ = embd_pdrop_ = attn_pdrop_ = p;
    return *this;
  }
  int64_t inner_dim() const { return n_inner_.value_or(4 * n_embd_); }
  int64_t head_dim() const { return n_embd_ / n_head_; }

  void validate() const {
    IPUML_CHECK(vocab_size_ > 0 && n_positions_ > 0 && n_embd_ > 0 && n_layer_ > 0 && n_head_ > 0,
                "GPT2Config: vocab_size, n_positions, n_embd, n_layer and n_head must be "
                "positive, got ",
                vocab_size_, ", ", n_positions_, ", ", n_embd_, ", ", n_layer_, ", ", n_head_);
    IPUML_CHECK(n_embd_ % n_head_ == 0, "GPT2Config: n_embd=", n_embd_,
                " must be divisible by n_head=", n_head_);
    IPUML_CHECK(inner_dim() > 0, "GPT2Config: n_inner must be positive, got ", inner_dim());
    for (double p : {resid_pdrop_, embd_pdrop_, attn_pdrop_})
      IPUML_CHECK(p >= 0.0 && p <= 1.0, "GPT2Config: dropout probabilities must be in [0, 1], got ",
                  p);
    IPUML_CHECK(layer_norm_epsilon_ > 0.0, "GPT2Config: layer_norm_epsilon must be positive, got ",
                layer_norm_epsilon_);
    IPUML_CHECK(
        embedding_serialization_factor_ >= 1 && embedding_serialization_factor_ <= vocab_size_,
        "GPT2Config: embedding_serialization_factor must be in [1, vocab_size=", vocab_size_,
        "], got ", embedding_serialization_factor_);
    if (layers_per_ipu_.empty()) return;
    int64_t total = 0;
    for (int64_t n : layers_per_ipu_) {
      IPUML_CHECK(n >= 0, "GPT2Config: layers_per_ipu ", layers_per_ipu_,
                  " has a negative entry (expected counts of layers per IPU)");
      total += n;
    }
    IPUML_CHECK(total == n_layer_, "GPT2Config: layers_per_ipu ", layers_per_ipu_, " sums to ",
                total, ", expected n_layer=", n_layer_);
  }

  IPUML_ARG(int64_t, vocab_size) = 50257;
  IPUML_ARG(int64_t, n_positions) = 1024;
  IPUML_ARG(int64_t, n_embd) = 768;
  IPUML_ARG(int64_t, n_layer) = 12;
  IPUML_ARG(int64_t, n_head) = 12;
  // The MLP width; 4 * n_embd when unset.
  IPUML_ARG(std::optional<int64_t>, n_inner);
  IPUML_ARG(double, layer_norm_epsilon) = 1e-5;
  IPUML_ARG(double, resid_pdrop) = 0.1;
  IPUML_ARG(double, embd_pdrop) = 0.1;
  IPUML_ARG(double, attn_pdrop) = 0.1;
  IPUML_ARG(double, initializer_range) = 0.02;
  // Graphcore's --layers-per-ipu: entry k is how many blocks IPU k runs. Token and position
  // embeddings and the tied LM head (hence the loss) are on IPU 0 whatever the first entry is;
  // {0, 4, 4, 4} leaves IPU 0 to them. Empty: no placement.
  IPUML_ARG(std::vector<int64_t>, layers_per_ipu);
  // train_gpt2.py's --recompute-checkpoint-every-layer: a recomputation checkpoint after each
  // block, so a traced training step keeps one [B, S, n_embd] tensor per layer for backward.
  IPUML_ARG(bool, recompute_checkpoint_every_layer) = false;
  // train_gpt2.py's --embedding-serialization-factor (Graphcore's SerializedEmbedding and
  // SerializedLinear): the token embedding's lookup and the tied LM head's [n_embd, vocab]
  // product are each done in this many slices of the vocabulary, one after another (the same
  // numbers; smaller gathers and temporaries on an IPU). 1: one lookup, one product.
  IPUML_ARG(int64_t, embedding_serialization_factor) = 1;
};

namespace gpt2_detail {

// Graphcore's _get_layer_ipu: the IPU of each layer.
inline std::vector<int> layer_ipus(const std::vector<int64_t>& layers_per_ipu) {
  std::vector<int> out;
  for (size_t ipu = 0; ipu < layers_per_ipu.size(); ++ipu)
    for (int64_t k = 0; k < layers_per_ipu[ipu]; ++k) out.push_back(static_cast<int>(ipu));
  return out;
}

}  // namespace gpt2_detail

// Keys and values of the positions seen so far, per layer ([B, n_head, T, head_dim] each), so
// that generation computes each new position once (HF's past_key_values). Inference only.
struct GPT2KVCache {
  std::vector<Tensor> keys, values;
  int64_t length() const { return keys.empty() || !keys[0].defined() ? 0 : keys[0].size(2); }
  void clear() {
    keys.clear();
    values.clear();
  }
};

// Hugging Face's Conv1D: a linear layer whose weight is stored [in, out] (y = x W + b), kept so
// GPT-2 checkpoints load without transposing. Arguments in HF's order: Conv1D(nf=out, nx=in).
class Conv1DImpl : public nn::Module {
 public:
  Conv1DImpl(int64_t nf, int64_t nx) : nn::Module("Conv1D"), nf_(nf), nx_(nx) {
    IPUML_CHECK(nf > 0 && nx > 0, "Conv1D: nf and nx must be positive, got ", nf, " and ", nx);
    weight = register_parameter("weight", zeros({nx, nf}));
    bias = register_parameter("bias", zeros({nf}));
  }
  Tensor forward(const Tensor& x) override {
    IPUML_CHECK(x.dim() >= 1 && x.size(-1) == nx_,
                "Conv1D: expected an input whose last dim is nx=", nx_, ", got shape ",
                shape_str(x.shape()));
    Shape out = x.shape();
    out.back() = nf_;
    return reshape(add(matmul(reshape(x, {-1, nx_}), weight), bias), out);
  }
  std::string extra_repr() const override {
    return "nf=" + std::to_string(nf_) + ", nx=" + std::to_string(nx_);
  }

  Tensor weight, bias;

 private:
  int64_t nf_, nx_;
};
IPUML_MODULE(Conv1D);

class GPT2AttentionImpl : public nn::Module {
 public:
  explicit GPT2AttentionImpl(const GPT2Config& c)
      : nn::Module("GPT2Attention"), n_embd_(c.n_embd()), n_head_(c.n_head()) {
    c_attn = register_module("c_attn", Conv1D(3 * n_embd_, n_embd_));
    c_proj = register_module("c_proj", Conv1D(n_embd_, n_embd_));
    attn_dropout = register_module("attn_dropout", nn::Dropout(c.attn_pdrop()));
    resid_dropout = register_module("resid_dropout", nn::Dropout(c.resid_pdrop()));
  }

  // [B, S, E] -> [B, S, E], each position attending to itself and earlier positions only.
  Tensor forward(const Tensor& x) override { return attend(x, nullptr, nullptr); }

  // The same for S new positions after the cached ones: their keys and values are appended to
  // `k_cache` and `v_cache` (undefined at first), and they attend to every earlier position.
  Tensor forward_cached(const Tensor& x, Tensor& k_cache, Tensor& v_cache) {
    return attend(x, &k_cache, &v_cache);
  }

  Conv1D c_attn{nullptr}, c_proj{nullptr};
  nn::Dropout attn_dropout{nullptr}, resid_dropout{nullptr};

 private:
  Tensor attend(const Tensor& x, Tensor* k_cache, Tensor* v_cache) {
    const int64_t b = x.size(0), s = x.size(1), d = n_embd_ / n_head_;
    auto qkv = split(c_attn(x), n_embd_, 2);
    auto heads = [&](const Tensor& t) {
      return permute(reshape(t, {b, s, n_head_, d}), {0, 2, 1, 3});
    };
    Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
    if (k_cache) {
      if (k_cache->defined()) {
        k = cat({*k_cache, k}, 2);
        v = cat({*v_cache, v}, 2);
      }
      *k_cache = contiguous(k);
      *v_cache = contiguous(v);
    }
    Tensor ctx =
        reshape(permute(causal_attention(q, k, v, attn_dropout), {0, 2, 1, 3}), {b, s, n_embd_});
    return resid_dropout(c_proj(ctx));
  }

  int64_t n_embd_, n_head_;
};
IPUML_MODULE(GPT2Attention);

class GPT2MLPImpl : public nn::Module {
 public:
  explicit GPT2MLPImpl(const GPT2Config& c) : nn::Module("GPT2MLP") {
    c_fc = register_module("c_fc", Conv1D(c.inner_dim(), c.n_embd()));
    c_proj = register_module("c_proj", Conv1D(c.n_embd(), c.inner_dim()));
    // HF's "gelu_new", GPT-2's activation: the tanh approximation.
    act = register_module("act", nn::GELU(nn::GELUOptions().approximate("tanh")));
    dropout = register_module("dropout", nn::Dropout(c.resid_pdrop()));
  }
  Tensor forward(const Tensor& x) override { return dropout(c_proj(act(c_fc(x)))); }

  Conv1D c_fc{nullptr}, c_proj{nullptr};
  nn::GELU act{nullptr};
  nn::Dropout dropout{nullptr};
};
IPUML_MODULE(GPT2MLP);

// Pre-LN: x + attn(ln_1(x)), then x + mlp(ln_2(x)).
class GPT2BlockImpl : public nn::Module {
 public:
  explicit GPT2BlockImpl(const GPT2Config& c) : nn::Module("GPT2Block") {
    const auto ln = nn::LayerNormOptions({c.n_embd()}).eps(c.layer_norm_epsilon());
    ln_1 = register_module("ln_1", nn::LayerNorm(ln));
    attn = register_module("attn", GPT2Attention(c));
    ln_2 = register_module("ln_2", nn::LayerNorm(ln));
    mlp = register_module("mlp", GPT2MLP(c));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = add(x, attn(ln_1(x)));
    return add(h, mlp(ln_2(h)));
  }
  Tensor forward_cached(const Tensor& x, Tensor& k_cache, Tensor& v_cache) {
    Tensor h = add(x, attn->forward_cached(ln_1(x), k_cache, v_cache));
    return add(h, mlp(ln_2(h)));
  }

  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  GPT2Attention attn{nullptr};
  GPT2MLP mlp{nullptr};
};
IPUML_MODULE(GPT2Block);

// HF's GPT2Model: input_ids [B, S] (int64) -> final hidden states [B, S, n_embd].
class GPT2ModelImpl : public nn::Module {
 public:
  explicit GPT2ModelImpl(const GPT2Config& c) : nn::Module("GPT2Model"), config(c) {
    config.validate();
    wte = register_module("wte", nn::Embedding(c.vocab_size(), c.n_embd()));
    wpe = register_module("wpe", nn::Embedding(c.n_positions(), c.n_embd()));
    drop = register_module("drop", nn::Dropout(c.embd_pdrop()));
    h = register_module("h", nn::ModuleList());
    for (int64_t i = 0; i < c.n_layer(); ++i) {
      blocks.emplace_back(c);
      h->push_back(blocks.back());
    }
    ln_f = register_module(
        "ln_f", nn::LayerNorm(nn::LayerNormOptions({c.n_embd()}).eps(c.layer_norm_epsilon())));
    init_from_fresh_embeddings();
    if (!c.layers_per_ipu().empty()) {
      // BeginBlock on each block: calling it through its holder switches the IPU.
      wte->begin_block(0);
      const auto ipus = gpt2_detail::layer_ipus(c.layers_per_ipu());
      for (size_t i = 0; i < blocks.size(); ++i) blocks[i]->begin_block(ipus[i]);
    }
  }

  // HF's _init_weights: N(0, initializer_range) for weights and embeddings, zero biases, and
  // the residual projections (c_proj) scaled down by sqrt(2 n_layer) (GPT-2 paper, 2.3).
  // LayerNorms at 1/0.
  void reset_parameters() {
    for (auto& [name, m] : named_modules())
      if (auto ln = std::dynamic_pointer_cast<nn::LayerNormImpl>(m)) {
        nn::init::ones_(ln->weight);
        nn::init::zeros_(ln->bias);
      }
    wte->reset_parameters();
    wpe->reset_parameters();
    init_from_fresh_embeddings();
  }

  Tensor forward(const Tensor& input_ids) override {
    IPUML_CHECK(input_ids.dim() == 2 && is_integral(input_ids.dtype()),
                "GPT2Model: expected input_ids [batch, seq] of int64, got shape ",
                shape_str(input_ids.shape()), " of ", dtype_name(input_ids.dtype()));
    const int64_t s = input_ids.size(1);
    IPUML_CHECK(s >= 1 && s <= config.n_positions(), "GPT2Model: sequence length ", s,
                " must be between 1 and n_positions=", config.n_positions());
    Tensor x = embed_tokens(input_ids);
    x = drop(add(x, wpe(arange(s))));
    for (auto& blk : blocks) {
      x = blk(x);
      if (config.recompute_checkpoint_every_layer()) x = recomputation_checkpoint(x);
    }
    return ln_f(x);
  }

  // forward() for input_ids [B, S] that follow the cache's positions; extends the cache.
  Tensor forward_cached(const Tensor& input_ids, GPT2KVCache& cache) {
    IPUML_CHECK(input_ids.dim() == 2 && is_integral(input_ids.dtype()),
                "GPT2Model: expected input_ids [batch, seq] of int64, got shape ",
                shape_str(input_ids.shape()), " of ", dtype_name(input_ids.dtype()));
    const int64_t past = cache.length(), s = input_ids.size(1);
    IPUML_CHECK(s >= 1 && past + s <= config.n_positions(), "GPT2Model: ", past, " cached and ", s,
                " new positions exceed n_positions=", config.n_positions());
    cache.keys.resize(blocks.size());
    cache.values.resize(blocks.size());
    Tensor x = embed_tokens(input_ids);
    Tensor pos = arange(static_cast<double>(past), static_cast<double>(past + s), 1.0, kInt64);
    x = drop(add(x, wpe(pos)));
    for (size_t i = 0; i < blocks.size(); ++i)
      x = blocks[i]->forward_cached(x, cache.keys[i], cache.values[i]);
    return ln_f(x);
  }

  GPT2Config config;
  nn::Embedding wte{nullptr}, wpe{nullptr};
  nn::Dropout drop{nullptr};
  nn::ModuleList h{nullptr};
  std::vector<GPT2Block> blocks;  // h's blocks, called through their holders (BeginBlock)
  nn::LayerNorm ln_f{nullptr};

 private:
  // wte(ids), in embedding_serialization_factor slices of the vocabulary as Graphcore's
  // SerializedEmbedding: slice k looks up the ids in its range (the others read its first row
  // and are zeroed) and the slices' rows are summed. Adding exact zeros, the values and
  // gradients are those of one lookup.
  Tensor embed_tokens(const Tensor& ids) {
    const int64_t f = config.embedding_serialization_factor();
    if (f <= 1) return wte(ids);
    const int64_t v = config.vocab_size(), chunk = (v + f - 1) / f;
    if (!ir::is_tracing() && ids.numel() > 0) {
      // What one lookup would refuse (a traced graph's ids are not known here).
      const int64_t lo = amin(ids).item<int64_t>(), hi = amax(ids).item<int64_t>();
      IPUML_CHECK(lo >= 0 && hi < v, "GPT2Model: token ids must be in [0, ", v, "), got ", lo,
                  " to ", hi);
    }
    Tensor out;
    for (int64_t first = 0; first < v; first += chunk) {
      const int64_t last = std::min(v, first + chunk);
      const Tensor in_range =
          logical_and(ge(ids, static_cast<double>(first)), lt(ids, static_cast<double>(last)));
      const Tensor local =
          where(in_range, sub(ids, full_like(ids, static_cast<double>(first))), zeros_like(ids));
      Tensor rows = embedding(slice(wte->weight, 0, first, last), local);
      rows = mul(rows, unsqueeze(cast(in_range, rows.dtype()), -1));
      out = out.defined() ? add(out, rows) : rows;
    }
    return out;
  }

  // Expects the embeddings as nn::Embedding draws them, N(0, 1): scaling them gives
  // N(0, initializer_range) without drawing 39M numbers a second time.
  void init_from_fresh_embeddings() {
    const double std = config.initializer_range();
    {
      NoGradGuard no_grad;
      wte->weight.mul_(std);
      wpe->weight.mul_(std);
    }
    const double proj_std = std / std::sqrt(2.0 * static_cast<double>(config.n_layer()));
    for (auto& blk : blocks) {
      for (Conv1D* m : {&blk->attn->c_attn, &blk->mlp->c_fc}) {
        nn::init::normal_((*m)->weight, 0.0, std);
        nn::init::zeros_((*m)->bias);
      }
      for (Conv1D* m : {&blk->attn->c_proj, &blk->mlp->c_proj}) {
        nn::init::normal_((*m)->weight, 0.0, proj_std);
        nn::init::zeros_((*m)->bias);
      }
    }
  }
};
IPUML_MODULE(GPT2Model);

// HF's GPT2LMHeadModel: input_ids [B, S] -> logits [B, S, vocab_size]. The LM head is wte itself
// (logits = h wte^T), so it is no second parameter: parameters() lists wte once.
class GPT2LMHeadModelImpl : public nn::Module {
 public:
  explicit GPT2LMHeadModelImpl(const GPT2Config& c = GPT2Config()) : nn::Module("GPT2LMHeadModel") {
    transformer = register_module("transformer", GPT2Model(c));
  }

  Tensor forward(const Tensor& input_ids) override {
    Tensor h = transformer(input_ids);
    // The head shares wte's weight, so Graphcore keeps it with the embedding on IPU 0.
    if (!config().layers_per_ipu().empty()) ir::PlacementGuard::set_current(0);
    return head(h);
  }

  // Logits [B, S, vocab] of S new positions after the cache's, extending the cache.
  Tensor forward_cached(const Tensor& input_ids, GPT2KVCache& cache) {
    return head(transformer->forward_cached(input_ids, cache));
  }

  const GPT2Config& config() const { return transformer->config; }

  GPT2Model transformer{nullptr};

 private:
  // logits = h wte^T, in embedding_serialization_factor slices of the vocabulary.
  Tensor head(const Tensor& h) {
    const Tensor& w = transformer->wte->weight;
    const int64_t f = config().embedding_serialization_factor();
    if (f <= 1) return linear(h, w);
    const int64_t chunk = (config().vocab_size() + f - 1) / f;
    std::vector<Tensor> parts;
    for (const Tensor& slice_w : split(w, chunk, 0)) parts.push_back(linear(h, slice_w));
    return cat(parts, h.dim() - 1);
  }
};
IPUML_MODULE(GPT2LMHeadModel);

// How generate() picks each next token.
struct GPT2GenerateOptions {
  IPUML_ARG(int64_t, max_new_tokens) = 50;
  // 0: greedy (argmax); otherwise logits / temperature are sampled.
  IPUML_ARG(double, temperature) = 1.0;
  IPUML_ARG(int64_t, top_k) = 0;   // keep the k most likely tokens; 0: all
  IPUML_ARG(double, top_p) = 1.0;  // keep the smallest set whose probability reaches p
  IPUML_ARG(uint64_t, seed) = 0;
  IPUML_ARG(bool, use_cache) = true;      // false: recompute every position at every step
  IPUML_ARG(int64_t, eos_token_id) = -1;  // stop after generating it; -1: never
};

namespace gpt2_detail {

// The next token from one position's logits: greedy, or sampled after temperature, top-k and
// top-p filtering, with a uniform draw `u` in [0, 1).
inline int64_t pick_token(std::vector<float> logits, const GPT2GenerateOptions& o, double u) {
  const int64_t v = static_cast<int64_t>(logits.size());
  if (o.temperature() <= 0.0)
    return static_cast<int64_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  std::vector<int64_t> order(static_cast<size_t>(v));
  for (int64_t i = 0; i < v; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });
  int64_t keep = o.top_k() > 0 ? std::min(o.top_k(), v) : v;
  std::vector<double> p(static_cast<size_t>(keep));
  const double top = logits[static_cast<size_t>(order[0])];
  double total = 0;
  for (int64_t i = 0; i < keep; ++i) {
    p[static_cast<size_t>(i)] = std::exp(
        (logits[static_cast<size_t>(order[static_cast<size_t>(i)])] - top) / o.temperature());
    total += p[static_cast<size_t>(i)];
  }
  if (o.top_p() < 1.0) {
    double cum = 0;
    int64_t n = 0;
    while (n < keep && cum < o.top_p() * total) cum += p[static_cast<size_t>(n++)];
    keep = std::max<int64_t>(n, 1);
    total = 0;
    for (int64_t i = 0; i < keep; ++i) total += p[static_cast<size_t>(i)];
  }
  double target = u * total;
  for (int64_t i = 0; i < keep; ++i) {
    target -= p[static_cast<size_t>(i)];
    if (target < 0) return order[static_cast<size_t>(i)];
  }
  return order[static_cast<size_t>(keep - 1)];
}

}  // namespace gpt2_detail

// Continues `prompt` (token ids) by up to max_new_tokens tokens, in eval mode without
// gradients; returns the new tokens. With the cache each step runs one position; without it
// every step reruns the whole context (the reference the cache is tested against). The
// context is cut to its last n_positions tokens (the cache is then rebuilt). `step_logits`,
// when given, receives each step's next-token logits [vocab].
inline std::vector<int64_t> generate(GPT2LMHeadModel& model, const std::vector<int64_t>& prompt,
                                     const GPT2GenerateOptions& o,
                                     std::vector<Tensor>* step_logits = nullptr) {
  IPUML_CHECK(!prompt.empty(), "generate: the prompt has no tokens");
  IPUML_CHECK(o.max_new_tokens() >= 0 && o.temperature() >= 0.0 && o.top_k() >= 0 &&
                  o.top_p() > 0.0 && o.top_p() <= 1.0,
              "generate: expected max_new_tokens >= 0, temperature >= 0, top_k >= 0 and top_p in "
              "(0, 1], got ",
              o.max_new_tokens(), ", ", o.temperature(), ", ", o.top_k(), ", ", o.top_p());
  const int64_t vocab = model->config().vocab_size(), ctx = model->config().n_positions();
  for (int64_t t : prompt)
    IPUML_CHECK(t >= 0 && t < vocab, "generate: prompt token ", t,
                " is outside the vocabulary [0, ", vocab, ")");
  const bool was_training = model->is_training();
  model->eval();
  NoGradGuard no_grad;
  std::vector<int64_t> all = prompt, out;
  GPT2KVCache cache;
  const RandomStream rs{o.seed(), 0x73616d706c65ULL};  // "sample"
  auto ids_tensor = [](std::vector<int64_t>::const_iterator b,
                       std::vector<int64_t>::const_iterator e) {
    std::vector<int64_t> v(b, e);
    return from_vector<int64_t>(v, {1, static_cast<int64_t>(v.size())});
  };
  for (int64_t step = 0; step < o.max_new_tokens(); ++step) {
    Tensor logits;
    const int64_t n = static_cast<int64_t>(all.size());
    if (!o.use_cache()) {
      const int64_t from = std::max<int64_t>(0, n - ctx);
      logits = model(ids_tensor(all.begin() + from, all.end()));
    } else if (cache.length() == 0 || cache.length() + 1 > ctx) {
      cache.clear();
      const int64_t from = std::max<int64_t>(0, n - ctx);
      logits = model->forward_cached(ids_tensor(all.begin() + from, all.end()), cache);
    } else {
      logits = model->forward_cached(ids_tensor(all.end() - 1, all.end()), cache);
    }
    Tensor last =
        contiguous(reshape(slice(logits, 1, logits.size(1) - 1, logits.size(1)), {vocab}));
    if (step_logits) step_logits->push_back(last);
    const int64_t next = gpt2_detail::pick_token(last.to_vector<float>(), o,
                                                 rs.uniform(static_cast<uint64_t>(step)));
    all.push_back(next);
    out.push_back(next);
    if (next == o.eos_token_id()) break;
  }
  model->train(was_training);
  return out;
}

}  // namespace ipuml::models
