// nn::MultiheadAttention with PyTorch's options, parameter names (in_proj_weight, in_proj_bias,
// out_proj.weight, out_proj.bias; q/k/v_proj_weight when kdim/vdim differ) and forward.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include <ipuml/nn/init.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>
#include <ipuml/nn/modules/linear.hpp>

namespace ipuml::nn {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t num_heads)
      : embed_dim_(embed_dim), num_heads_(num_heads), kdim_(embed_dim), vdim_(embed_dim) {}
  IPUML_ARG(int64_t, embed_dim);
  IPUML_ARG(int64_t, num_heads);
  IPUML_ARG(double, dropout) = 0.0;
  IPUML_ARG(bool, bias) = true;
  IPUML_ARG(int64_t, kdim);
  IPUML_ARG(int64_t, vdim);
  // Inputs are [batch, seq, feature] instead of [seq, batch, feature].
  IPUML_ARG(bool, batch_first) = false;
};

// PyTorch's out_proj class (a Linear that only differs in name, kept for the repr).
class NonDynamicallyQuantizableLinearImpl : public LinearImpl {
 public:
  NonDynamicallyQuantizableLinearImpl(int64_t in, int64_t out, bool bias)
      : LinearImpl(LinearOptions(in, out).bias(bias)) {
    set_type_name("NonDynamicallyQuantizableLinear");
  }
};

class MultiheadAttentionImpl : public Module {
 public:
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options_)
      : Module("MultiheadAttention"), options(options_) {
    const int64_t e = options.embed_dim(), h = options.num_heads();
    IPUML_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadAttention: embed_dim (", e,
                ") must be positive and divisible by num_heads (", h, ")");
    IPUML_CHECK(options.kdim() > 0 && options.vdim() > 0,
                "MultiheadAttention: kdim and vdim must be positive, got ", options.kdim(), " and ",
                options.vdim());
    IPUML_CHECK(options.dropout() >= 0.0 && options.dropout() < 1.0,
                "MultiheadAttention: dropout must be in [0, 1), got ", options.dropout());
    head_dim = e / h;
    if (same_embed_dim()) {
      in_proj_weight = register_parameter("in_proj_weight", zeros({3 * e, e}));
    } else {
      q_proj_weight = register_parameter("q_proj_weight", zeros({e, e}));
      k_proj_weight = register_parameter("k_proj_weight", zeros({e, options.kdim()}));
      v_proj_weight = register_parameter("v_proj_weight", zeros({e, options.vdim()}));
    }
    if (options.bias()) in_proj_bias = register_parameter("in_proj_bias", zeros({3 * e}));
    out_proj = register_module(
        "out_proj",
        Linear(std::shared_ptr<LinearImpl>(
            std::make_shared<NonDynamicallyQuantizableLinearImpl>(e, e, options.bias()))));
    reset_parameters();
  }
  MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, num_heads)) {}

  bool same_embed_dim() const {
    return options.kdim() == options.embed_dim() && options.vdim() == options.embed_dim();
  }

  // PyTorch's _reset_parameters: Xavier-uniform projections, zero biases; out_proj.weight keeps
  // Linear's initialisation.
  void reset_parameters(Generator* gen = nullptr) {
    if (in_proj_weight.defined()) {
      init::xavier_uniform_(in_proj_weight, 1.0, gen);
    } else {
      init::xavier_uniform_(q_proj_weight, 1.0, gen);
      init::xavier_uniform_(k_proj_weight, 1.0, gen);
      init::xavier_uniform_(v_proj_weight, 1.0, gen);
    }
    if (in_proj_bias.defined()) {
      init::zeros_(in_proj_bias);
      init::zeros_(out_proj->bias);
    }
  }

  using Module::forward;
  // query [L, N, E] (or [N, L, E] with batch_first, or unbatched [L, E]); key [S, N, kdim];
  // value [S, N, vdim]. key_padding_mask [N, S] and attn_mask [L, S] or [N*num_heads, L, S] are
  // bool (true = may not attend) or float (added to the scores). is_causal without attn_mask
  // applies a causal mask (with one, it is PyTorch's hint that the mask is causal). Returns the
  // output and, with need_weights, the attention weights [N, L, S] (averaged over heads) or
  // [N, num_heads, L, S].
  std::tuple<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Tensor& key_padding_mask = Tensor(),
                                     bool need_weights = true, const Tensor& attn_mask = Tensor(),
                                     bool average_attn_weights = true, bool is_causal = false) {
    const char* op = "MultiheadAttention";
    const int64_t e = options.embed_dim(), h = options.num_heads();
    IPUML_CHECK(query.defined() && key.defined() && value.defined(), op,
                ": query, key and value must be defined");
    IPUML_CHECK(query.dim() == 3 || query.dim() == 2, op,
                ": expected a batched 3-d or unbatched 2-d query, got shape ",
                shape_str(query.shape()));
    const bool batched = query.dim() == 3;
    IPUML_CHECK(key.dim() == query.dim() && value.dim() == query.dim(), op, ": query of shape ",
                shape_str(query.shape()), ", key of shape ", shape_str(key.shape()),
                " and value of shape ", shape_str(value.shape()), " must have the same rank");
    // Batch first, [N, L, E], from here on.
    auto bf = [&](const Tensor& t) {
      if (!batched) return unsqueeze(t, 0);
      return options.batch_first() ? t : transpose(t, 0, 1);
    };
    Tensor q = bf(query), k = bf(key), v = bf(value);
    const int64_t n = q.size(0), l = q.size(1), s = k.size(1);
    IPUML_CHECK(q.size(2) == e, op, ": query of shape ", shape_str(query.shape()),
                " does not have embed_dim=", e, " features");
    IPUML_CHECK(k.size(2) == options.kdim() && v.size(2) == options.vdim(), op, ": key of shape ",
                shape_str(key.shape()), " and value of shape ", shape_str(value.shape()),
                " do not have kdim=", options.kdim(), " and vdim=", options.vdim(), " features");
    IPUML_CHECK(k.size(0) == n && v.size(0) == n && v.size(1) == s, op, ": key of shape ",
                shape_str(key.shape()), " and value of shape ", shape_str(value.shape()),
                " do not match the query of shape ", shape_str(query.shape()),
                " (expected the same batch and one source length)");
    // A causal mask alone, without weights to return, goes to the fused kernel as is_causal
    // (it then skips the key blocks no query sees).
    const bool causal_only =
        is_causal && !attn_mask.defined() && !key_padding_mask.defined() && !need_weights;
    Tensor bias = causal_only ? Tensor()
                              : mask_bias(key_padding_mask, attn_mask, is_causal, batched, n, l, s,
                                          q.dtype());
    // A causal mask is built on the CPU; it joins the scores on their device.
    if (bias.defined()) bias = bias.to(query.device());

    auto proj = [&](const Tensor& x, int64_t i, const Tensor& sep) {
      Tensor w = sep.defined() ? sep : slice(in_proj_weight, 0, i * e, (i + 1) * e);
      Tensor b = in_proj_bias.defined() ? slice(in_proj_bias, 0, i * e, (i + 1) * e) : Tensor();
      // [N, T, E] -> [N, H, T, head_dim]
      Tensor y = linear(x, w, b);
      return permute(reshape(y, {n, x.size(1), h, head_dim}), {0, 2, 1, 3});
    };
    Tensor qh = proj(q, 0, q_proj_weight), kh = proj(k, 1, k_proj_weight),
           vh = proj(v, 2, v_proj_weight);
    const double p = is_training() ? options.dropout() : 0.0;
    Tensor attn, weights;
    if (need_weights) {
      Tensor scores =
          mul(matmul(qh, transpose(kh, -2, -1)), 1.0 / std::sqrt(static_cast<double>(head_dim)));
      if (bias.defined()) scores = add(scores, bias);
      weights = softmax(scores, -1);
      if (p > 0.0) weights = dropout(weights, p, true);
      attn = matmul(weights, vh);
    } else {
      attn = scaled_dot_product_attention(qh, kh, vh, bias, p, causal_only);
    }
    Tensor out = out_proj(reshape(permute(attn, {0, 2, 1, 3}), {n, l, e}));
    if (!batched)
      out = squeeze(out, 0);
    else if (!options.batch_first())
      out = transpose(out, 0, 1);
    if (need_weights) {
      if (average_attn_weights) weights = div(sum(weights, {1}), static_cast<double>(h));
      if (!batched) weights = squeeze(weights, 0);
    }
    return {out, weights};
  }

  std::string extra_repr() const override { return ""; }

  MultiheadAttentionOptions options;
  int64_t head_dim = 0;
  Tensor in_proj_weight, q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias;
  Linear out_proj{nullptr};

 private:
  // The additive score bias [N or 1, H or 1, L or 1, S] of both masks (PyTorch 2's canonical
  // masks: bool true -> -inf, float added), or undefined when there is none.
  Tensor mask_bias(const Tensor& kpm, const Tensor& am, bool is_causal, bool batched, int64_t n,
                   int64_t l, int64_t s, DType dtype) const {
    const char* op = "MultiheadAttention";
    const double inf = std::numeric_limits<double>::infinity();
    auto to_bias = [&](const Tensor& m, const char* what) {
      IPUML_CHECK(m.dtype() == kBool || m.dtype() == dtype, op, ": ", what,
                  " must be bool or of the query's dtype ", dtype_name(dtype), ", got ",
                  dtype_name(m.dtype()));
      if (m.dtype() != kBool) return m;
      return where(m, scalar_tensor(-inf, dtype), scalar_tensor(0.0, dtype));
    };
    const int64_t h = options.num_heads();
    Tensor bias;
    if (kpm.defined()) {
      const Shape want = batched ? Shape{n, s} : Shape{s};
      IPUML_CHECK(kpm.shape() == want, op, ": key_padding_mask of shape ", shape_str(kpm.shape()),
                  ", expected ", shape_str(want), " ([batch, source length])");
      bias = reshape(to_bias(kpm, "key_padding_mask"), {n, 1, 1, s});
    }
    Tensor m = am;
    if (!m.defined() && is_causal) {
      m = gt(sub(reshape(arange(s), {1, s}), reshape(arange(l), {l, 1})), 0.0);
    }
    if (m.defined()) {
      Tensor mb;
      if (m.dim() == 2) {
        IPUML_CHECK(m.shape() == (Shape{l, s}), op, ": 2-d attn_mask of shape ",
                    shape_str(m.shape()), ", expected [", l, ", ", s, "] ([target, source])");
        mb = reshape(to_bias(m, "attn_mask"), {1, 1, l, s});
      } else {
        const Shape want = batched ? Shape{n * h, l, s} : Shape{h, l, s};
        IPUML_CHECK(m.shape() == want, op, ": attn_mask of shape ", shape_str(m.shape()),
                    ", expected [", l, ", ", s, "] or ", shape_str(want),
                    " ([batch * num_heads, target, source])");
        mb = reshape(to_bias(m, "attn_mask"), {n, h, l, s});
      }
      bias = bias.defined() ? add(bias, mb) : mb;
    }
    return bias;
  }
};
IPUML_MODULE(MultiheadAttention);

}  // namespace ipuml::nn
