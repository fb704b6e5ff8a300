// What the zoo's decoder-only language models (GPT-2, GPT-J) share: the causal mask, masked
// softmax attention over heads as Hugging Face computes it, and train_gpt2.py's shifted-label
// batch split and losses.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

namespace causal_lm_detail {

// True where key j lies after query i: those scores are masked. Made from arange in forward
// rather than kept as a [n_positions, n_positions] buffer, so it is neither model state nor a
// checkpoint entry, and each attention layer makes its own on its own IPU.
inline Tensor causal_mask(int64_t s) {
  Tensor i = arange(s);
  return gt(reshape(i, {1, s}), reshape(i, {s, 1}));
}
// For s new queries after `past` cached positions: [s, past + s], key j masked after query i's
// own position past + i.
inline Tensor causal_mask(int64_t s, int64_t past) {
  Tensor keys = arange(past + s);
  Tensor queries = arange(static_cast<double>(past), static_cast<double>(past + s), 1.0, kInt64);
  return gt(reshape(keys, {1, past + s}), reshape(queries, {s, 1}));
}

}  // namespace causal_lm_detail

// softmax(q k^T / sqrt(head_dim), masked causally) v, the attention probabilities through
// `dropout`: q [B, H, S, D] holds the S newest positions, k and v [B, H, T, D] the T >= S
// positions they may attend to (T - S of them cached before). Returns [B, H, S, D].
inline Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               nn::Dropout dropout) {
  const int64_t s = q.size(2), past = k.size(2) - s, d = q.size(3);
  Tensor scores = div(matmul(q, transpose(k, 2, 3)), std::sqrt(static_cast<double>(d)));
  // HF fills with the dtype's lowest value: exp() of it is exactly 0 after the max shift.
  Tensor mask =
      past == 0 ? causal_lm_detail::causal_mask(s) : causal_lm_detail::causal_mask(s, past);
  scores = masked_fill(scores, mask, static_cast<double>(std::numeric_limits<float>::lowest()));
  return matmul(dropout(softmax(scores, 3)), v);
}

// train_gpt2.py's batch split: inputs batch[:, :-1] and labels batch[:, 1:] (next tokens).
inline std::pair<Tensor, Tensor> shift_tokens(const Tensor& batch) {
  IPUML_CHECK(batch.dim() == 2 && batch.size(1) >= 2,
              "shift_tokens: expected a [batch, seq] token batch with seq >= 2, got shape ",
              shape_str(batch.shape()));
  const int64_t s = batch.size(1);
  return {contiguous(slice(batch, 1, 0, s - 1)), contiguous(slice(batch, 1, 1, s))};
}

// Mean next-token cross-entropy: logits [B, S, V] against already shifted labels [B, S].
inline Tensor causal_lm_loss(const Tensor& logits, const Tensor& labels) {
  IPUML_CHECK(logits.dim() == 3 && labels.dim() == 2 && labels.size(0) == logits.size(0) &&
                  labels.size(1) == logits.size(1),
              "causal_lm_loss: expected logits [B, S, V] and labels [B, S], got shapes ",
              shape_str(logits.shape()), " and ", shape_str(labels.shape()));
  return cross_entropy(reshape(logits, {-1, logits.size(2)}), reshape(labels, {-1}));
}

// Hugging Face's *ForCausalLM loss given labels: logits [B, S, V] of the inputs and labels
// [B, S] aligned with those inputs (the input ids themselves to train a language model); the
// logits at position t are scored against label t + 1, as HF shifts them.
inline Tensor shifted_causal_lm_loss(const Tensor& logits, const Tensor& labels) {
  IPUML_CHECK(logits.dim() == 3 && labels.dim() == 2 && labels.size(0) == logits.size(0) &&
                  labels.size(1) == logits.size(1) && labels.size(1) >= 2,
              "shifted_causal_lm_loss: expected logits [B, S, V] and labels [B, S] with S >= 2, "
              "got shapes ",
              shape_str(logits.shape()), " and ", shape_str(labels.shape()));
  // The labels move one place left and the last position is ignored (-100), rather than the
  // logits being cut: the same mean over B x (S - 1) positions, without a [B, S - 1, V] copy of
  // the logits and its scatter back in the backward pass.
  const int64_t b = labels.size(0), s = labels.size(1);
  const Tensor next = cat({slice(labels, 1, 1, s), full({b, 1}, -100.0, labels.dtype())}, 1);
  return causal_lm_loss(logits, next);
}

}  // namespace ipuml::models
