// scaled_dot_product_attention (PyTorch 2 semantics): the fused Attention op (online softmax,
// no [L, S] scores in memory; its backward recomputes them), or the composite of matmuls,
// softmax and dropout where the fused op does not apply (dropout, a float mask that needs a
// gradient, a mask with more batch dims than the inputs).
#pragma once

#include <cmath>
#include <limits>

#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

namespace ops_detail {

// Validates SDPA's operands and returns the scale it uses.
inline double sdpa_check(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                         double dropout_p, bool is_causal, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  IPUML_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
              ": expected query [..., L, E], key [..., S, E] and value [..., S, Ev] of rank >= 2, "
              "got shapes ",
              shape_str(q.shape()), ", ", shape_str(k.shape()), " and ", shape_str(v.shape()));
  IPUML_CHECK(is_floating(q.dtype()) && q.dtype() == k.dtype() && q.dtype() == v.dtype(), op,
              ": expected query, key and value of one floating dtype, got ", dtype_name(q.dtype()),
              ", ", dtype_name(k.dtype()), " and ", dtype_name(v.dtype()));
  IPUML_CHECK(q.shape().back() == k.shape().back(), op, ": query of shape ", shape_str(q.shape()),
              " and key of shape ", shape_str(k.shape()), " differ in the last dim E");
  IPUML_CHECK(k.size(-2) == v.size(-2), op, ": key of shape ", shape_str(k.shape()),
              " and value of shape ", shape_str(v.shape()),
              " differ in the sequence length S (dim -2)");
  IPUML_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, op, ": dropout_p must be in [0, 1), got ",
              dropout_p);
  IPUML_CHECK(!(is_causal && attn_mask.defined()), op,
              ": pass either attn_mask or is_causal=true, not both (as PyTorch)");
  if (attn_mask.defined()) {
    IPUML_CHECK(attn_mask.dtype() == kBool || attn_mask.dtype() == q.dtype(), op,
                ": attn_mask must be bool or of the query's dtype ", dtype_name(q.dtype()),
                ", got ", dtype_name(attn_mask.dtype()));
    IPUML_CHECK(
        attn_mask.dim() >= 1 && attn_mask.size(-1) == k.size(-2) &&
            (attn_mask.dim() < 2 || attn_mask.size(-2) == q.size(-2) || attn_mask.size(-2) == 1),
        op, ": attn_mask of shape ", shape_str(attn_mask.shape()),
        " does not broadcast to the scores' [..., ", q.size(-2), ", ", k.size(-2), "]");
  }
  const double s =
      scale ? *scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(q.size(-1), 1)));
  IPUML_CHECK(std::isfinite(s), op, ": scale must be finite, got ", s);
  return s;
}

// The additive bias of a mask: 0 where attention is allowed, -inf elsewhere (bool), or the
// float mask itself; a causal mask when asked.
inline Tensor sdpa_bias(const Tensor& attn_mask, bool is_causal, int64_t l, int64_t s,
                        DType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  if (is_causal) {
    Tensor later = gt(sub(reshape(arange(s), {1, s}), reshape(arange(l), {l, 1})), 0.0);
    return where(later, scalar_tensor(-inf, dtype), scalar_tensor(0.0, dtype));
  }
  if (!attn_mask.defined()) return Tensor();
  if (attn_mask.dtype() == kBool)
    return where(attn_mask, scalar_tensor(0.0, dtype), scalar_tensor(-inf, dtype));
  return attn_mask;
}

}  // namespace ops_detail

namespace ops_detail {

// The composite form: the reference the fused op is tested against.
inline Tensor sdpa_composite(const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& attn_mask, double dropout_p, bool is_causal, double sc,
                             Generator* gen) {
  Tensor scores = mul(ops_detail::matmul_raw(q, k, false, true), sc);
  Tensor bias = ops_detail::sdpa_bias(attn_mask, is_causal, q.size(-2), k.size(-2), q.dtype());
  if (bias.defined() && bias.dim() > 0) bias = bias.to(q.device());
  if (bias.defined()) scores = add(scores, bias);
  Tensor p = softmax(scores, -1);
  if (dropout_p > 0.0) p = dropout(p, dropout_p, true, gen);
  return ops_detail::matmul_raw(p, v, false, false);
}

}  // namespace ops_detail

IPUML_INLINE Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& attn_mask, double dropout_p,
                                                 bool is_causal, std::optional<double> scale,
                                                 Generator* gen) {
  const double sc = ops_detail::sdpa_check(q, k, v, attn_mask, dropout_p, is_causal, scale);
  const char* op = "scaled_dot_product_attention";
  const Shape qb(q.shape().begin(), q.shape().end() - 2),
      kb(k.shape().begin(), k.shape().end() - 2), vb(v.shape().begin(), v.shape().end() - 2);
  const Shape batch = broadcast_shapes(broadcast_shapes(qb, kb, op), vb, op);
  const size_t r = batch.size() + 2;
  Tensor bias = ops_detail::sdpa_bias(attn_mask, false, q.size(-2), k.size(-2), q.dtype());
  bool fused = dropout_p == 0.0 && !(bias.defined() && bias.requires_grad());
  if (fused && bias.defined()) {
    fused = static_cast<size_t>(bias.dim()) <= r;
    for (size_t i = 0; fused && i + 2 < static_cast<size_t>(bias.dim()); ++i) {
      const int64_t d = bias.shape()[i];
      fused = d == 1 || d == batch[r - static_cast<size_t>(bias.dim()) + i];
    }
  }
  if (!fused) return ops_detail::sdpa_composite(q, k, v, attn_mask, dropout_p, is_causal, sc, gen);
  auto full_batch = [&](const Tensor& t) {
    Shape s = batch;
    s.push_back(t.size(-2));
    s.push_back(t.size(-1));
    return expand(t, s);
  };
  Tensor qe = full_batch(q), ke = full_batch(k), ve = full_batch(v);
  std::vector<Tensor> in{qe, ke, ve};
  if (bias.defined()) {
    Shape bs(r - static_cast<size_t>(bias.dim()), 1);
    bs.insert(bs.end(), bias.shape().begin(), bias.shape().end());
    in.push_back(reshape(bias, bs));
  }
  Attrs a;
  a.scalar = sc;
  a.flag = is_causal;
  a.flag2 = bias.defined();
  auto outs = detail::dispatch(OpKind::Attention, a, in);
  attach({outs[0]}, "ScaledDotProductAttentionBackward", {qe, ke, ve},
         [a, q = saved(qe), k = saved(ke), v = saved(ve), b = a.flag2 ? saved(in[3]) : Tensor(),
          o = saved(outs[0]), lse = outs[1]](const std::vector<Tensor>& g) {
           std::vector<Tensor> bin{g[0], q, k, v, o, lse};
           if (a.flag2) bin.push_back(b);
           return detail::dispatch(OpKind::AttentionBackward, a, bin);
         });
  return outs[0];
}

}  // namespace ipuml
