// BERT as Hugging Face's BertForPreTraining (MLM + NSP heads, decoder tied to the word
// embeddings) and BertForQuestionAnswering (SQuAD spans), name for name, with layers_per_ipu.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/ir/trace.hpp>
#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

struct BertConfig {
  // For tests: small enough to train a few steps in well under a second.
  static BertConfig tiny() {
    return BertConfig()
        .vocab_size(1000)
        .hidden_size(64)
        .num_hidden_layers(2)
        .num_attention_heads(2)
        .intermediate_size(128)
        .max_position_embeddings(128);
  }
  static BertConfig base() { return BertConfig(); }
  static BertConfig large() {
    return BertConfig()
        .hidden_size(1024)
        .num_hidden_layers(24)
        .num_attention_heads(16)
        .intermediate_size(4096);
  }
  // "tiny", "base", "large", or Hugging Face's "bert-base-uncased", "bert-large-uncased".
  static BertConfig preset(const std::string& name) {
    if (name == "tiny") return tiny();
    if (name == "base" || name == "bert-base-uncased") return base();
    if (name == "large" || name == "bert-large-uncased") return large();
    fail("BertConfig: unknown preset '", name,
         "' (expected tiny, base, large, bert-base-uncased or bert-large-uncased)");
  }

  int64_t head_dim() const { return hidden_size_ / num_attention_heads_; }

  void validate() const {
    IPUML_CHECK(
        vocab_size_ > 0 && hidden_size_ > 0 && num_hidden_layers_ > 0 && num_attention_heads_ > 0 &&
            intermediate_size_ > 0 && max_position_embeddings_ > 0 && type_vocab_size_ > 0,
        "BertConfig: sizes must be positive, got vocab_size=", vocab_size_,
        ", hidden_size=", hidden_size_, ", num_hidden_layers=", num_hidden_layers_,
        ", num_attention_heads=", num_attention_heads_, ", intermediate_size=", intermediate_size_,
        ", max_position_embeddings=", max_position_embeddings_,
        ", type_vocab_size=", type_vocab_size_);
    IPUML_CHECK(hidden_size_ % num_attention_heads_ == 0, "BertConfig: hidden_size=", hidden_size_,
                " must be divisible by num_attention_heads=", num_attention_heads_);
    IPUML_CHECK(hidden_act_ == "gelu" || hidden_act_ == "gelu_new" || hidden_act_ == "relu",
                "BertConfig: hidden_act must be 'gelu', 'gelu_new' or 'relu', got '", hidden_act_,
                "'");
    for (double p : {hidden_dropout_prob_, attention_probs_dropout_prob_})
      IPUML_CHECK(p >= 0.0 && p <= 1.0, "BertConfig: dropout probabilities must be in [0, 1], got ",
                  p);
    IPUML_CHECK(layer_norm_eps_ > 0.0, "BertConfig: layer_norm_eps must be positive, got ",
                layer_norm_eps_);
    if (pad_token_id_)
      IPUML_CHECK(*pad_token_id_ >= 0 && *pad_token_id_ < vocab_size_,
                  "BertConfig: pad_token_id=", *pad_token_id_,
                  " must be within vocab_size=", vocab_size_);
    if (layers_per_ipu_.empty()) return;
    int64_t total = 0;
    for (int64_t n : layers_per_ipu_) {
      IPUML_CHECK(n >= 0, "BertConfig: layers_per_ipu ", layers_per_ipu_,
                  " has a negative entry (expected counts of layers per IPU)");
      total += n;
    }
    IPUML_CHECK(total == num_hidden_layers_, "BertConfig: layers_per_ipu ", layers_per_ipu_,
                " sums to ", total, ", expected num_hidden_layers=", num_hidden_layers_);
  }

  IPUML_ARG(int64_t, vocab_size) = 30522;
  IPUML_ARG(int64_t, hidden_size) = 768;
  IPUML_ARG(int64_t, num_hidden_layers) = 12;
  IPUML_ARG(int64_t, num_attention_heads) = 12;
  IPUML_ARG(int64_t, intermediate_size) = 3072;
  // "gelu" is the exact (erf) GELU, BERT's; "gelu_new" the tanh approximation.
  IPUML_ARG(std::string, hidden_act) = "gelu";
  IPUML_ARG(double, hidden_dropout_prob) = 0.1;
  IPUML_ARG(double, attention_probs_dropout_prob) = 0.1;
  IPUML_ARG(int64_t, max_position_embeddings) = 512;
  IPUML_ARG(int64_t, type_vocab_size) = 2;
  IPUML_ARG(double, initializer_range) = 0.02;
  // HF's default; Graphcore trains with 1e-3, which stays representable in half precision.
  IPUML_ARG(double, layer_norm_eps) = 1e-12;
  // The word embedding row that starts at zero and gets no gradient (HF: padding_idx=0).
  IPUML_ARG(std::optional<int64_t>, pad_token_id) = 0;
  // Graphcore's layers_per_ipu: entry k is how many encoder layers IPU k runs; embeddings,
  // pooler and heads stay on IPU 0 ({0, 4, 4, 4} gives IPU 0 nothing else). Empty: no placement.
  IPUML_ARG(std::vector<int64_t>, layers_per_ipu);
  // Graphcore's --recompute-checkpoint-every-layer: a recomputation checkpoint after each
  // encoder layer (a traced training step keeps one [B, S, hidden] tensor per layer).
  IPUML_ARG(bool, recompute_checkpoint_every_layer) = false;
};

namespace bert_detail {

inline Tensor activation(const std::string& name, const Tensor& x) {
  if (name == "relu") return relu(x);
  return gelu(x, name == "gelu_new" ? "tanh" : "none");
}

inline nn::LayerNorm layer_norm(const BertConfig& c) {
  return nn::LayerNorm(nn::LayerNormOptions({c.hidden_size()}).eps(c.layer_norm_eps()));
}

// Original BERT's additive mask value: large enough that exp() of a masked score is exactly 0
// in float32, small enough not to overflow to -inf in half precision.
inline constexpr double kMaskBias = -10000.0;

}  // namespace bert_detail

class BertEmbeddingsImpl : public nn::Module {
 public:
  explicit BertEmbeddingsImpl(const BertConfig& c) : nn::Module("BertEmbeddings") {
    word_embeddings = register_module(
        "word_embeddings",
        nn::Embedding(
            nn::EmbeddingOptions(c.vocab_size(), c.hidden_size()).padding_idx(c.pad_token_id())));
    position_embeddings = register_module(
        "position_embeddings", nn::Embedding(c.max_position_embeddings(), c.hidden_size()));
    token_type_embeddings = register_module("token_type_embeddings",
                                            nn::Embedding(c.type_vocab_size(), c.hidden_size()));
    LayerNorm = register_module("LayerNorm", bert_detail::layer_norm(c));
    dropout = register_module("dropout", nn::Dropout(c.hidden_dropout_prob()));
  }
  using nn::Module::forward;
  // input_ids, token_type_ids [B, S] -> [B, S, hidden]; undefined token types mean all 0.
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids) {
    const int64_t s = input_ids.size(1);
    Tensor x = word_embeddings(input_ids);
    Tensor types = token_type_ids.defined() ? token_type_ids : zeros(input_ids.shape(), kInt64);
    x = add(add(x, token_type_embeddings(types)), position_embeddings(arange(s)));
    return dropout(LayerNorm(x));
  }

  nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr},
      token_type_embeddings{nullptr};
  nn::LayerNorm LayerNorm{nullptr};
  nn::Dropout dropout{nullptr};
};
IPUML_MODULE(BertEmbeddings);

class BertSelfAttentionImpl : public nn::Module {
 public:
  explicit BertSelfAttentionImpl(const BertConfig& c)
      : nn::Module("BertSelfAttention"), hidden_(c.hidden_size()), heads_(c.num_attention_heads()) {
    query = register_module("query", nn::Linear(hidden_, hidden_));
    key = register_module("key", nn::Linear(hidden_, hidden_));
    value = register_module("value", nn::Linear(hidden_, hidden_));
    dropout = register_module("dropout", nn::Dropout(c.attention_probs_dropout_prob()));
  }
  using nn::Module::forward;
  // x [B, S, H], mask_bias [B, 1, 1, S] (0 or kMaskBias, added to the scores) or undefined.
  Tensor forward(const Tensor& x, const Tensor& mask_bias) {
    const int64_t b = x.size(0), s = x.size(1), d = hidden_ / heads_;
    auto heads = [&](const Tensor& t) {
      return permute(reshape(t, {b, s, heads_, d}), {0, 2, 1, 3});
    };
    Tensor q = heads(query(x)), k = heads(key(x)), v = heads(value(x));
    Tensor scores = div(matmul(q, transpose(k, 2, 3)), std::sqrt(static_cast<double>(d)));
    if (mask_bias.defined()) scores = add(scores, mask_bias);
    Tensor probs = dropout(softmax(scores, 3));
    return reshape(permute(matmul(probs, v), {0, 2, 1, 3}), {b, s, hidden_});
  }

  nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  nn::Dropout dropout{nullptr};

 private:
  int64_t hidden_, heads_;
};
IPUML_MODULE(BertSelfAttention);

// Post-LN residual: LayerNorm(dropout(dense(h)) + input). BertSelfOutput and BertOutput.
class BertResidualOutputImpl : public nn::Module {
 public:
  BertResidualOutputImpl(const BertConfig& c, int64_t in_features, const char* type)
      : nn::Module(type) {
    dense = register_module("dense", nn::Linear(in_features, c.hidden_size()));
    LayerNorm = register_module("LayerNorm", bert_detail::layer_norm(c));
    dropout = register_module("dropout", nn::Dropout(c.hidden_dropout_prob()));
  }
  using nn::Module::forward;
  Tensor forward(const Tensor& h, const Tensor& input) {
    return LayerNorm(add(dropout(dense(h)), input));
  }

  nn::Linear dense{nullptr};
  nn::LayerNorm LayerNorm{nullptr};
  nn::Dropout dropout{nullptr};
};
IPUML_MODULE(BertResidualOutput);

class BertAttentionImpl : public nn::Module {
 public:
  explicit BertAttentionImpl(const BertConfig& c) : nn::Module("BertAttention") {
    self = register_module("self", BertSelfAttention(c));
    output = register_module("output", BertResidualOutput(c, c.hidden_size(), "BertSelfOutput"));
  }
  using nn::Module::forward;
  Tensor forward(const Tensor& x, const Tensor& mask_bias) { return output(self(x, mask_bias), x); }

  BertSelfAttention self{nullptr};
  BertResidualOutput output{nullptr};
};
IPUML_MODULE(BertAttention);

class BertIntermediateImpl : public nn::Module {
 public:
  explicit BertIntermediateImpl(const BertConfig& c)
      : nn::Module("BertIntermediate"), act_(c.hidden_act()) {
    dense = register_module("dense", nn::Linear(c.hidden_size(), c.intermediate_size()));
  }
  Tensor forward(const Tensor& x) override { return bert_detail::activation(act_, dense(x)); }

  nn::Linear dense{nullptr};

 private:
  std::string act_;
};
IPUML_MODULE(BertIntermediate);

class BertLayerImpl : public nn::Module {
 public:
  explicit BertLayerImpl(const BertConfig& c) : nn::Module("BertLayer") {
    attention = register_module("attention", BertAttention(c));
    intermediate = register_module("intermediate", BertIntermediate(c));
    output = register_module("output", BertResidualOutput(c, c.intermediate_size(), "BertOutput"));
  }
  using nn::Module::forward;
  Tensor forward(const Tensor& x, const Tensor& mask_bias) {
    Tensor a = attention(x, mask_bias);
    return output(intermediate(a), a);
  }

  BertAttention attention{nullptr};
  BertIntermediate intermediate{nullptr};
  BertResidualOutput output{nullptr};
};
IPUML_MODULE(BertLayer);

class BertEncoderImpl : public nn::Module {
 public:
  explicit BertEncoderImpl(const BertConfig& c)
      : nn::Module("BertEncoder"), checkpoint_(c.recompute_checkpoint_every_layer()) {
    layer = register_module("layer", nn::ModuleList());
    for (int64_t i = 0; i < c.num_hidden_layers(); ++i) {
      layers.emplace_back(c);
      layer->push_back(layers.back());
    }
  }
  using nn::Module::forward;
  Tensor forward(Tensor x, const Tensor& mask_bias) {
    for (auto& l : layers) {
      x = l(x, mask_bias);
      if (checkpoint_) x = recomputation_checkpoint(x);
    }
    return x;
  }

  nn::ModuleList layer{nullptr};
  std::vector<BertLayer> layers;  // layer's members, called through their holders (BeginBlock)

 private:
  bool checkpoint_ = false;
};
IPUML_MODULE(BertEncoder);

// tanh(dense(h[:, 0])): the [CLS] summary the NSP head reads.
class BertPoolerImpl : public nn::Module {
 public:
  explicit BertPoolerImpl(const BertConfig& c) : nn::Module("BertPooler") {
    dense = register_module("dense", nn::Linear(c.hidden_size(), c.hidden_size()));
  }
  Tensor forward(const Tensor& h) override { return tanh(dense(select_first(h))); }
  static Tensor select_first(const Tensor& h) { return squeeze(slice(h, 1, 0, 1), 1); }

  nn::Linear dense{nullptr};
};
IPUML_MODULE(BertPooler);

// HF's BertModel: (sequence output [B, S, H], pooled output [B, H] or undefined without pooler).
class BertModelImpl : public nn::Module {
 public:
  explicit BertModelImpl(const BertConfig& c, bool add_pooling_layer = true)
      : nn::Module("BertModel"), config(c) {
    config.validate();
    embeddings = register_module("embeddings", BertEmbeddings(c));
    encoder = register_module("encoder", BertEncoder(c));
    if (add_pooling_layer) pooler = register_module("pooler", BertPooler(c));
    if (!c.layers_per_ipu().empty()) {
      embeddings->begin_block(0);
      int64_t i = 0;
      for (size_t ipu = 0; ipu < c.layers_per_ipu().size(); ++ipu)
        for (int64_t k = 0; k < c.layers_per_ipu()[ipu]; ++k, ++i)
          encoder->layers[static_cast<size_t>(i)]->begin_block(static_cast<int>(ipu));
      if (pooler) pooler->begin_block(0);
    }
  }

  using nn::Module::forward;
  // input_ids, token_type_ids, attention_mask: [B, S] int64 (1 = attend, 0 = padding); the last
  // two may be undefined (all type 0, nothing masked).
  std::pair<Tensor, Tensor> forward(const Tensor& input_ids, const Tensor& token_type_ids,
                                    const Tensor& attention_mask) {
    IPUML_CHECK(input_ids.dim() == 2 && is_integral(input_ids.dtype()),
                "BertModel: expected input_ids [batch, seq] of int64, got shape ",
                shape_str(input_ids.shape()), " of ", dtype_name(input_ids.dtype()));
    const int64_t b = input_ids.size(0), s = input_ids.size(1);
    IPUML_CHECK(
        s >= 1 && s <= config.max_position_embeddings(), "BertModel: sequence length ", s,
        " must be between 1 and max_position_embeddings=", config.max_position_embeddings());
    for (const Tensor* t : {&token_type_ids, &attention_mask})
      IPUML_CHECK(!t->defined() || t->shape() == input_ids.shape(),
                  "BertModel: token_type_ids and attention_mask must be shaped like input_ids ",
                  shape_str(input_ids.shape()), ", got ", shape_str(t->shape()));
    Tensor x = embeddings(input_ids, token_type_ids);
    // Computed after the embeddings so that, when placed, it is made on IPU 0 with them.
    Tensor mask_bias;
    if (attention_mask.defined()) {
      Tensor keep = cast(attention_mask, x.dtype());  // the scores' dtype (half or float)
      mask_bias = reshape(mul(sub(ones_like(keep), keep), bert_detail::kMaskBias), {b, 1, 1, s});
    }
    Tensor seq = encoder(x, mask_bias);
    return {seq, pooler ? pooler(seq) : Tensor()};
  }

  BertConfig config;
  BertEmbeddings embeddings{nullptr};
  BertEncoder encoder{nullptr};
  BertPooler pooler{nullptr};
};
IPUML_MODULE(BertModel);

// HF's BertPredictionHeadTransform: LayerNorm(act(dense(h))).
class BertPredictionHeadTransformImpl : public nn::Module {
 public:
  explicit BertPredictionHeadTransformImpl(const BertConfig& c)
      : nn::Module("BertPredictionHeadTransform"), act_(c.hidden_act()) {
    dense = register_module("dense", nn::Linear(c.hidden_size(), c.hidden_size()));
    LayerNorm = register_module("LayerNorm", bert_detail::layer_norm(c));
  }
  Tensor forward(const Tensor& h) override {
    return LayerNorm(bert_detail::activation(act_, dense(h)));
  }

  nn::Linear dense{nullptr};
  nn::LayerNorm LayerNorm{nullptr};

 private:
  std::string act_;
};
IPUML_MODULE(BertPredictionHeadTransform);

// HF's BertLMPredictionHead: the decoder is the word embedding matrix (tied, so not registered
// here) plus its own output bias.
class BertLMPredictionHeadImpl : public nn::Module {
 public:
  BertLMPredictionHeadImpl(const BertConfig& c, Tensor word_embeddings)
      : nn::Module("BertLMPredictionHead"), decoder_weight(std::move(word_embeddings)) {
    bias = register_parameter("bias", zeros({c.vocab_size()}));
    transform = register_module("transform", BertPredictionHeadTransform(c));
  }
  Tensor forward(const Tensor& h) override { return linear(transform(h), decoder_weight, bias); }

  Tensor bias;
  BertPredictionHeadTransform transform{nullptr};
  Tensor decoder_weight;  // bert.embeddings.word_embeddings.weight
};
IPUML_MODULE(BertLMPredictionHead);

class BertPreTrainingHeadsImpl : public nn::Module {
 public:
  BertPreTrainingHeadsImpl(const BertConfig& c, Tensor word_embeddings)
      : nn::Module("BertPreTrainingHeads") {
    predictions =
        register_module("predictions", BertLMPredictionHead(c, std::move(word_embeddings)));
    seq_relationship = register_module("seq_relationship", nn::Linear(c.hidden_size(), 2));
  }
  using nn::Module::forward;
  std::pair<Tensor, Tensor> forward(const Tensor& seq, const Tensor& pooled) {
    return {predictions(seq), seq_relationship(pooled)};
  }

  BertLMPredictionHead predictions{nullptr};
  nn::Linear seq_relationship{nullptr};
};
IPUML_MODULE(BertPreTrainingHeads);

namespace bert_detail {

// HF's _init_weights on a freshly built model: N(0, initializer_range) for Linear weights, zero
// biases; the embeddings, which nn::Embedding has just drawn from N(0, 1), are scaled to
// N(0, initializer_range) instead of drawn again (the padding row stays 0); LayerNorms are 1/0.
inline void init_fresh_weights(nn::Module& m, double std) {
  NoGradGuard no_grad;
  for (auto& [name, mod] : m.named_modules()) {
    if (auto lin = std::dynamic_pointer_cast<nn::LinearImpl>(mod)) {
      nn::init::normal_(lin->weight, 0.0, std);
      if (lin->bias.defined()) lin->bias.fill_(0.0);
    } else if (auto emb = std::dynamic_pointer_cast<nn::EmbeddingImpl>(mod)) {
      emb->weight.mul_(std);
    }
  }
}

inline void place_on_ipu0_if(const BertConfig& c, nn::Module& m) {
  if (!c.layers_per_ipu().empty()) m.begin_block(0);
}

}  // namespace bert_detail

// HF's BertForPreTraining: (MLM logits [B, S, vocab], NSP logits [B, 2]).
class BertForPreTrainingImpl : public nn::Module {
 public:
  explicit BertForPreTrainingImpl(const BertConfig& c = BertConfig())
      : nn::Module("BertForPreTraining") {
    bert = register_module("bert", BertModel(c));
    cls =
        register_module("cls", BertPreTrainingHeads(c, bert->embeddings->word_embeddings->weight));
    bert_detail::init_fresh_weights(*this, c.initializer_range());
    bert_detail::place_on_ipu0_if(c, *cls);
  }

  using nn::Module::forward;
  std::pair<Tensor, Tensor> forward(const Tensor& input_ids, const Tensor& token_type_ids,
                                    const Tensor& attention_mask) {
    auto [seq, pooled] = bert(input_ids, token_type_ids, attention_mask);
    return cls(seq, pooled);
  }

  // Graphcore's form: MLM logits only at `positions` [B, M] (the masked tokens), [B, M, vocab],
  // which spares the [B, S, vocab] product for the S - M positions no label reads.
  std::pair<Tensor, Tensor> forward_masked(const Tensor& input_ids, const Tensor& token_type_ids,
                                           const Tensor& attention_mask, const Tensor& positions) {
    auto [seq, pooled] = bert(input_ids, token_type_ids, attention_mask);
    IPUML_CHECK(
        positions.dim() == 2 && positions.size(0) == seq.size(0) && is_integral(positions.dtype()),
        "BertForPreTraining: expected masked positions [batch, M] of int64, got shape ",
        shape_str(positions.shape()));
    const int64_t h = seq.size(2);
    Tensor idx =
        contiguous(expand(unsqueeze(positions, 2), {positions.size(0), positions.size(1), h}));
    return cls(gather(seq, 1, idx), pooled);
  }

  const BertConfig& config() const { return bert->config; }

  BertModel bert{nullptr};
  BertPreTrainingHeads cls{nullptr};
};
IPUML_MODULE(BertForPreTraining);

// HF's BertForQuestionAnswering (SQuAD): (start logits [B, S], end logits [B, S]). HF builds
// its BertModel without the pooler, so there is no bert.pooler here either.
class BertForQuestionAnsweringImpl : public nn::Module {
 public:
  explicit BertForQuestionAnsweringImpl(const BertConfig& c = BertConfig())
      : nn::Module("BertForQuestionAnswering") {
    bert = register_module("bert", BertModel(c, false));
    qa_outputs = register_module("qa_outputs", nn::Linear(c.hidden_size(), 2));
    bert_detail::init_fresh_weights(*this, c.initializer_range());
    bert_detail::place_on_ipu0_if(c, *qa_outputs);
  }

  using nn::Module::forward;
  std::pair<Tensor, Tensor> forward(const Tensor& input_ids, const Tensor& token_type_ids,
                                    const Tensor& attention_mask) {
    Tensor logits = qa_outputs(bert(input_ids, token_type_ids, attention_mask).first);
    return {squeeze(slice(logits, 2, 0, 1), 2), squeeze(slice(logits, 2, 1, 2), 2)};
  }

  const BertConfig& config() const { return bert->config; }

  BertModel bert{nullptr};
  nn::Linear qa_outputs{nullptr};
};
IPUML_MODULE(BertForQuestionAnswering);

// Mean cross-entropy over the rows whose label is not `ignore_index` (PyTorch's -100 default):
// logits [N, C], labels [N]. Unlike cross_entropy(..., ignore_index), whose mean over no rows is
// NaN as PyTorch's, a batch with every label ignored gives 0.
inline Tensor cross_entropy_ignore(const Tensor& logits, const Tensor& labels,
                                   int64_t ignore_index = -100) {
  IPUML_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0),
              "cross_entropy_ignore: expected logits [N, C] and labels [N], got shapes ",
              shape_str(logits.shape()), " and ", shape_str(labels.shape()));
  Tensor valid = ne(labels, full_like(labels, static_cast<double>(ignore_index)));
  Tensor safe = where(valid, labels, zeros_like(labels));
  Tensor per_row = cross_entropy(logits, safe, Reduction::None);
  Tensor w = cast(valid, per_row.dtype());
  // An all-ignored batch gives 0 rather than 0/0.
  return div(sum(mul(per_row, w)), clamp(sum(w), 1.0, std::nullopt));
}

// BertForPreTraining's loss: MLM cross-entropy over labelled tokens (-100 elsewhere) plus NSP
// cross-entropy. mlm_logits [B, S or M, V], mlm_labels [B, S or M], nsp [B, 2], nsp_labels [B].
inline Tensor bert_pretraining_loss(const Tensor& mlm_logits, const Tensor& nsp_logits,
                                    const Tensor& mlm_labels, const Tensor& nsp_labels) {
  IPUML_CHECK(mlm_logits.dim() == 3 && mlm_labels.dim() == 2,
              "bert_pretraining_loss: expected MLM logits [B, S, V] and labels [B, S], got shapes ",
              shape_str(mlm_logits.shape()), " and ", shape_str(mlm_labels.shape()));
  Tensor mlm = cross_entropy_ignore(reshape(mlm_logits, {-1, mlm_logits.size(2)}),
                                    reshape(mlm_labels, {-1}));
  return add(mlm, cross_entropy(nsp_logits, nsp_labels));
}

// BertForQuestionAnswering's loss: the mean of the start and end position cross-entropies.
inline Tensor bert_squad_loss(const Tensor& start_logits, const Tensor& end_logits,
                              const Tensor& start_positions, const Tensor& end_positions) {
  return mul(
      add(cross_entropy(start_logits, start_positions), cross_entropy(end_logits, end_positions)),
      0.5);
}

}  // namespace ipuml::models
