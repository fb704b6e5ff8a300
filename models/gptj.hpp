// GPT-J as Hugging Face's GPTJForCausalLM (and Cerebras modelzoo's gptj): pre-LN blocks whose
// attention and MLP both read ln_1's output and are added to the residual together, rotary
// position embedding on the first rotary_dim features of each head (rotate_every_two), gelu_new,
// an untied LM head with a bias. Parameters are named as HF's, so its state dicts load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ipuml/nn/nn.hpp>
#include <ipuml/nn/rotary_embedding.hpp>

#include <ipuml/models/causal_lm.hpp>

namespace ipuml::models {

struct GPTJConfig {
  // EleutherAI's GPT-J-6B (HF's GPTJConfig defaults): 28 layers of 4096, 16 heads of 256 with 64
  // rotary features, a 16384-wide MLP, a 50400-token vocabulary (50257 used by GPT-2's BPE).
  static GPTJConfig gptj_6b() { return GPTJConfig(); }
  // For tests: small enough to train a few steps in well under a second; head_dim 8, 4 rotary.
  static GPTJConfig tiny() {
    return GPTJConfig().vocab_size(64).n_positions(32).n_embd(32).n_layer(2).n_head(4).rotary_dim(
        4);
  }
  // "tiny" (or "gptj-tiny"), "6b" (or "gptj-6b", HF's "gpt-j-6b" and "EleutherAI/gpt-j-6B").
  static GPTJConfig preset(const std::string& name) {
    if (name == "tiny" || name == "gptj-tiny") return tiny();
    if (name == "6b" || name == "6B" || name == "gptj-6b" || name == "gpt-j-6b" ||
        name == "gpt-j-6B" || name == "EleutherAI/gpt-j-6B")
      return gptj_6b();
    fail("GPTJConfig: unknown preset '", name,
         "' (expected tiny, gptj-tiny, 6b, gptj-6b, gpt-j-6b or EleutherAI/gpt-j-6B)");
  }
  static GPTJConfig from_name(const std::string& name) { return preset(name); }

  // Sets the three dropout probabilities at once (HF keeps them apart).
  GPTJConfig& dropout(double p) {
    resid_pdrop_ = embd_pdrop_ = attn_pdrop_ = p;
    return *this;
  }
  int64_t inner_dim() const { return n_inner_.value_or(4 * n_embd_); }
  int64_t head_dim() const { return n_embd_ / n_head_; }
  // How many leading features of each head rotate; HF's rotary_dim=None rotates all of them.
  int64_t rotary_features() const { return rotary_dim_.value_or(head_dim()); }

  // Parameters of GPTJForCausalLM built from this config (HF's model.num_parameters()): wte,
  // per block ln_1, q/k/v/out_proj (no bias) and fc_in/fc_out (with bias), ln_f, and lm_head's
  // weight (unless tied to wte) and bias. GPT-J-6B: 6,050,882,784. (Its model card's
  // 6,053,381,344 counts mesh-transformer-jax's checkpoint over its 8 tensor-parallel shards:
  // the layer norms and fc_out biases it replicates 8 times, and its one-hot embedding's bias,
  // 610 x 4096 more.)
  int64_t num_parameters() const {
    const int64_t e = n_embd_, f = inner_dim(), v = vocab_size_;
    const int64_t block = 2 * e + 4 * e * e + (e * f + f) + (f * e + e);
    return v * e + n_layer_ * block + 2 * e + (tie_word_embeddings_ ? 0 : v * e) + v;
  }

  void validate() const {
    IPUML_CHECK(vocab_size_ > 0 && n_positions_ > 0 && n_embd_ > 0 && n_layer_ > 0 && n_head_ > 0,
                "GPTJConfig: vocab_size, n_positions, n_embd, n_layer and n_head must be "
                "positive, got ",
                vocab_size_, ", ", n_positions_, ", ", n_embd_, ", ", n_layer_, ", ", n_head_);
    IPUML_CHECK(n_embd_ % n_head_ == 0, "GPTJConfig: n_embd=", n_embd_,
                " must be divisible by n_head=", n_head_);
    if (rotary_dim_) {
      const int64_t r = *rotary_dim_;
      IPUML_CHECK(r > 0 && r % 2 == 0, "GPTJConfig: rotary_dim=", r,
                  " must be even and positive (features rotate in pairs)");
      IPUML_CHECK(r <= head_dim(), "GPTJConfig: rotary_dim=", r,
                  " must be at most head_dim=", head_dim(), " (n_embd=", n_embd_,
                  " / n_head=", n_head_, ")");
    } else {
      IPUML_CHECK(head_dim() % 2 == 0,
                  "GPTJConfig: rotary_dim unset rotates all of head_dim=", head_dim(),
                  ", which must then be even");
    }
    IPUML_CHECK(inner_dim() > 0, "GPTJConfig: n_inner must be positive, got ", inner_dim());
    IPUML_CHECK(activation_function_ == "gelu_new" || activation_function_ == "gelu",
                "GPTJConfig: activation_function '", activation_function_,
                "' is not one of gelu_new, gelu");
    for (double p : {resid_pdrop_, embd_pdrop_, attn_pdrop_})
      IPUML_CHECK(p >= 0.0 && p <= 1.0, "GPTJConfig: dropout probabilities must be in [0, 1], got ",
                  p);
    IPUML_CHECK(layer_norm_epsilon_ > 0.0, "GPTJConfig: layer_norm_epsilon must be positive, got ",
                layer_norm_epsilon_);
    IPUML_CHECK(initializer_range_ >= 0.0,
                "GPTJConfig: initializer_range must be non-negative, got ", initializer_range_);
  }

  IPUML_ARG(int64_t, vocab_size) = 50400;
  IPUML_ARG(int64_t, n_positions) = 2048;
  IPUML_ARG(int64_t, n_embd) = 4096;
  IPUML_ARG(int64_t, n_layer) = 28;
  IPUML_ARG(int64_t, n_head) = 16;
  // Unset: all of head_dim (HF's None).
  IPUML_ARG(std::optional<int64_t>, rotary_dim) = 64;
  // The MLP width; 4 * n_embd when unset.
  IPUML_ARG(std::optional<int64_t>, n_inner);
  // "gelu_new" (the tanh approximation, GPT-J's) or "gelu" (erf).
  IPUML_ARG(std::string, activation_function) = "gelu_new";
  IPUML_ARG(double, layer_norm_epsilon) = 1e-5;
  // 0 as HF's GPTJConfig and modelzoo's gptj configs.
  IPUML_ARG(double, resid_pdrop) = 0.0;
  IPUML_ARG(double, embd_pdrop) = 0.0;
  IPUML_ARG(double, attn_pdrop) = 0.0;
  IPUML_ARG(double, initializer_range) = 0.02;
  // GPT-J's lm_head has its own weight; true shares wte's (lm_head.bias stays its own).
  IPUML_ARG(bool, tie_word_embeddings) = false;
};

// HF's GPTJAttention: q, k, v projections without bias, rotary embedding of queries and keys,
// causal softmax attention scaled by 1/sqrt(head_dim), out_proj without bias.
class GPTJAttentionImpl : public nn::Module {
 public:
  explicit GPTJAttentionImpl(const GPTJConfig& c)
      : nn::Module("GPTJAttention"),
        n_embd_(c.n_embd()),
        n_head_(c.n_head()),
        rotary_dim_(c.rotary_features()) {
    attn_dropout = register_module("attn_dropout", nn::Dropout(c.attn_pdrop()));
    resid_dropout = register_module("resid_dropout", nn::Dropout(c.resid_pdrop()));
    const auto proj = nn::LinearOptions(n_embd_, n_embd_).bias(false);
    // HF's order (and its checkpoints'): k, v, q, out.
    k_proj = register_module("k_proj", nn::Linear(proj));
    v_proj = register_module("v_proj", nn::Linear(proj));
    q_proj = register_module("q_proj", nn::Linear(proj));
    out_proj = register_module("out_proj", nn::Linear(proj));
  }

  // [B, S, E] -> [B, S, E], each position attending to itself and earlier positions only.
  Tensor forward(const Tensor& x) override {
    const int64_t b = x.size(0), s = x.size(1), d = n_embd_ / n_head_;
    // [B, S, H, D], the layout HF rotates in; then heads forward: [B, H, S, D].
    auto split_heads = [&](const Tensor& t) { return reshape(t, {b, s, n_head_, d}); };
    const auto rope = nn::functional::RotaryEmbeddingFuncOptions().rotary_dim(rotary_dim_);
    auto heads_first = [](const Tensor& t) { return permute(t, {0, 2, 1, 3}); };
    Tensor q = heads_first(nn::functional::rotary_embedding(split_heads(q_proj(x)), rope));
    Tensor k = heads_first(nn::functional::rotary_embedding(split_heads(k_proj(x)), rope));
    Tensor v = heads_first(split_heads(v_proj(x)));
    Tensor ctx =
        reshape(permute(causal_attention(q, k, v, attn_dropout), {0, 2, 1, 3}), {b, s, n_embd_});
    return resid_dropout(out_proj(ctx));
  }

  nn::Dropout attn_dropout{nullptr}, resid_dropout{nullptr};
  nn::Linear k_proj{nullptr}, v_proj{nullptr}, q_proj{nullptr}, out_proj{nullptr};

 private:
  int64_t n_embd_, n_head_, rotary_dim_;
};
IPUML_MODULE(GPTJAttention);

// HF's GPTJMLP: fc_in -> gelu_new -> fc_out -> dropout, both projections with bias.
class GPTJMLPImpl : public nn::Module {
 public:
  explicit GPTJMLPImpl(const GPTJConfig& c) : nn::Module("GPTJMLP") {
    fc_in = register_module("fc_in", nn::Linear(c.n_embd(), c.inner_dim()));
    fc_out = register_module("fc_out", nn::Linear(c.inner_dim(), c.n_embd()));
    act = register_module("act", nn::GELU(nn::GELUOptions().approximate(
                                     c.activation_function() == "gelu_new" ? "tanh" : "none")));
    dropout = register_module("dropout", nn::Dropout(c.resid_pdrop()));
  }
  Tensor forward(const Tensor& x) override { return dropout(fc_out(act(fc_in(x)))); }

  nn::Linear fc_in{nullptr}, fc_out{nullptr};
  nn::GELU act{nullptr};
  nn::Dropout dropout{nullptr};
};
IPUML_MODULE(GPTJMLP);

// The parallel residual: h = ln_1(x); x + attn(h) + mlp(h).
class GPTJBlockImpl : public nn::Module {
 public:
  explicit GPTJBlockImpl(const GPTJConfig& c) : nn::Module("GPTJBlock") {
    ln_1 = register_module(
        "ln_1", nn::LayerNorm(nn::LayerNormOptions({c.n_embd()}).eps(c.layer_norm_epsilon())));
    attn = register_module("attn", GPTJAttention(c));
    mlp = register_module("mlp", GPTJMLP(c));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = ln_1(x);
    return add(add(attn(h), mlp(h)), x);
  }

  nn::LayerNorm ln_1{nullptr};
  GPTJAttention attn{nullptr};
  GPTJMLP mlp{nullptr};
};
IPUML_MODULE(GPTJBlock);

// HF's GPTJModel: input_ids [B, S] (int64) -> final hidden states [B, S, n_embd]. No position
// embedding: positions enter through the rotary embedding in each attention.
class GPTJModelImpl : public nn::Module {
 public:
  explicit GPTJModelImpl(const GPTJConfig& c) : nn::Module("GPTJModel"), config(c) {
    config.validate();
    wte = register_module("wte", nn::Embedding(c.vocab_size(), c.n_embd()));
    drop = register_module("drop", nn::Dropout(c.embd_pdrop()));
    h = register_module("h", nn::ModuleList());
    for (int64_t i = 0; i < c.n_layer(); ++i) {
      blocks.emplace_back(c);
      h->push_back(blocks.back());
    }
    ln_f = register_module(
        "ln_f", nn::LayerNorm(nn::LayerNormOptions({c.n_embd()}).eps(c.layer_norm_epsilon())));
  }

  Tensor forward(const Tensor& input_ids) override {
    IPUML_CHECK(input_ids.dim() == 2 && is_integral(input_ids.dtype()),
                "GPTJModel: expected input_ids [batch, seq] of int64, got shape ",
                shape_str(input_ids.shape()), " of ", dtype_name(input_ids.dtype()));
    const int64_t s = input_ids.size(1);
    IPUML_CHECK(s >= 1 && s <= config.n_positions(), "GPTJModel: sequence length ", s,
                " must be between 1 and n_positions=", config.n_positions());
    Tensor x = drop(wte(input_ids));
    for (auto& blk : blocks) x = blk(x);
    return ln_f(x);
  }

  GPTJConfig config;
  nn::Embedding wte{nullptr};
  nn::Dropout drop{nullptr};
  nn::ModuleList h{nullptr};
  std::vector<GPTJBlock> blocks;  // h's blocks
  nn::LayerNorm ln_f{nullptr};
};
IPUML_MODULE(GPTJModel);

// HF's GPTJForCausalLM: input_ids [B, S] -> logits [B, S, vocab_size], from lm_head (a Linear
// with bias; its weight shared with wte only when tie_word_embeddings is set).
class GPTJForCausalLMImpl : public nn::Module {
 public:
  explicit GPTJForCausalLMImpl(const GPTJConfig& c = GPTJConfig()) : nn::Module("GPTJForCausalLM") {
    transformer = register_module("transformer", GPTJModel(c));
    lm_head = register_module("lm_head", nn::Linear(c.n_embd(), c.vocab_size()));
    if (c.tie_word_embeddings())
      lm_head->weight = lm_head->replace_parameter("weight", transformer->wte->weight);
    reset_parameters();
  }

  // HF's _init_weights: N(0, initializer_range) for Linear weights and embeddings, zero biases,
  // LayerNorms at 1/0.
  void reset_parameters() {
    const double std = config().initializer_range();
    NoGradGuard no_grad;
    for (auto& [name, m] : named_modules()) {
      if (auto ln = std::dynamic_pointer_cast<nn::LayerNormImpl>(m)) {
        nn::init::ones_(ln->weight);
        nn::init::zeros_(ln->bias);
      } else if (auto lin = std::dynamic_pointer_cast<nn::LinearImpl>(m)) {
        if (lin == lm_head.ptr() && config().tie_word_embeddings()) {
          nn::init::zeros_(lin->bias);
          continue;  // the weight is wte's, drawn below
        }
        nn::init::normal_(lin->weight, 0.0, std);
        if (lin->bias.defined()) nn::init::zeros_(lin->bias);
      } else if (auto emb = std::dynamic_pointer_cast<nn::EmbeddingImpl>(m)) {
        nn::init::normal_(emb->weight, 0.0, std);
      }
    }
  }

  Tensor forward(const Tensor& input_ids) override { return lm_head(transformer(input_ids)); }

  const GPTJConfig& config() const { return transformer->config; }

  GPTJModel transformer{nullptr};
  nn::Linear lm_head{nullptr};
};
IPUML_MODULE(GPTJForCausalLM);

}  // namespace ipuml::models
