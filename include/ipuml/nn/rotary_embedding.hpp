// F::rotary_embedding: rotary position embedding of queries and keys as GPT-J (rotate_every_two)
// and GPT-NeoX (rotate_half) apply it, with a partial rotary_dim and a position offset.
#pragma once

#include <cstdint>
#include <optional>

#include <ipuml/core/config.hpp>
#include <ipuml/nn/modules/common.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::nn {

// Which features of the rotated part form the pairs turned by one angle.
enum class RotaryStyle {
  // GPT-J's rotate_every_two: (0, 1), (2, 3), ...; angle j turns pair j.
  Interleaved,
  // GPT-NeoX's rotate_half: (j, j + rotary_dim / 2).
  Half
};

}  // namespace ipuml::nn

namespace ipuml::nn::functional {

// Defaults are GPT-J's: the interleaved pairs, base 10000, a [batch, seq, heads, head_dim] layout
// (as HF's GPTJAttention applies it, before moving heads forward); seq_dim(2) takes
// [batch, heads, seq, head_dim] (GPT-NeoX's). rotary_dim, even, is how many leading features of
// head_dim rotate (GPT-J 6B: 64 of 256); unset, all of them. offset is the position of the first
// row along seq_dim: the length of the cache when generating one token at a time.
// position_ids (HF's), when given, are the positions themselves: int64 [seq] or [batch, seq]
// (batch the input's dim 0), non-negative, holding values (not traced); offset must then be 0.
struct RotaryEmbeddingFuncOptions {
  IPUML_ARG(std::optional<int64_t>, rotary_dim);
  IPUML_ARG(int64_t, offset) = 0;
  IPUML_ARG(Tensor, position_ids);
  IPUML_ARG(int64_t, seq_dim) = 1;
  IPUML_ARG(double, base) = 10000.0;
  IPUML_ARG(RotaryStyle, style) = RotaryStyle::Interleaved;
};

// With r = rotary_dim, inv_freq[j] = base^(-2j / r) and angle[p][j] = p * inv_freq[j] (in double
// on the host, once per call, the tables then rounded to float32): out = x * cos + rotate(x) * sin
// on the first r features, where rotate maps each pair (a, b) to (-b, a); the rest pass through.
// Built from slices, concatenations, multiplies and adds of x and the constant cos/sin tables
// (cast to x's dtype), so it is differentiable, runs on every device and traces into ops every
// executor already has.
Tensor rotary_embedding(const Tensor& x, const RotaryEmbeddingFuncOptions& options = {});

}  // namespace ipuml::nn::functional

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/nn/rotary_embedding_impl.hpp>
#endif
