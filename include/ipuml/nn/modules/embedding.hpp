// nn::Embedding: a lookup table of num_embeddings vectors, initialised N(0, 1) as in PyTorch;
// the padding_idx row starts at zero and receives no gradient. Also the lookup F::embedding
// shares with it (padding_idx, max_norm, scale_grad_by_freq).
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/nn/init.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

namespace detail {

// LibTorch's embedding_renorm_: every row `indices` picks whose norm_type-norm exceeds max_norm
// is scaled, in place and unrecorded, to max_norm / (norm + 1e-7) of itself.
inline void embedding_renorm(Tensor weight, const Tensor& indices, double max_norm,
                             double norm_type, const char* who) {
  IPUML_CHECK(!weight.is_symbolic() && !indices.is_symbolic(), who,
              ": max_norm rescales the weight in place, which cannot be traced");
  IPUML_CHECK(std::isfinite(max_norm) && max_norm >= 0.0, who,
              ": max_norm must be finite and >= 0, got ", max_norm);
  IPUML_CHECK(std::isfinite(norm_type) && norm_type > 0.0, who,
              ": norm_type must be finite and > 0, got ", norm_type);
  std::vector<int64_t> rows = indices.to_vector<int64_t>();
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  if (rows.empty()) return;
  NoGradGuard no_grad;
  const auto k = static_cast<int64_t>(rows.size());
  Tensor index = from_vector<int64_t>(rows, {k}).to(weight.device());
  Tensor picked = index_select(weight, 0, index);
  Tensor p = cast(picked, kFloat32);
  const std::vector<double> norms =
      (norm_type == 2.0 ? sqrt(sum(mul(p, p), {1}))
                        : pow(sum(pow(abs(p), norm_type), {1}), 1.0 / norm_type))
          .to_vector<double>();
  std::vector<float> scale(rows.size(), 1.0f);
  bool any = false;
  for (size_t i = 0; i < rows.size(); ++i)
    if (norms[i] > max_norm) {
      scale[i] = static_cast<float>(max_norm / (norms[i] + 1e-7));
      any = true;
    }
  if (!any) return;
  Tensor factor = cast(from_vector<float>(scale, {k, 1}), weight.dtype()).to(weight.device());
  weight.index_put_({index}, mul(picked, factor));
}

// The lookup behind nn::Embedding and F::embedding: rows of `weight` [num_embeddings, dim]
// picked by integer `indices`, of shape indices.shape() + [dim]. A lookup of padding_idx (in
// [0, num_embeddings)) gives the row's values but passes it no gradient; scale_grad_by_freq
// divides each lookup's gradient by how often its index occurs in `indices`; max_norm rescales
// the picked rows first (embedding_renorm).
inline Tensor embedding_lookup(const Tensor& indices, const Tensor& weight,
                               std::optional<int64_t> padding_idx, std::optional<double> max_norm,
                               double norm_type, bool scale_grad_by_freq, const char* who) {
  IPUML_CHECK(indices.defined() && weight.defined(), who, ": got an undefined tensor");
  IPUML_CHECK(weight.dim() == 2 && is_floating(weight.dtype()), who,
              ": expected a floating-point weight of shape [num_embeddings, embedding_dim], got ",
              dtype_name(weight.dtype()), " of shape ", shape_str(weight.shape()));
  IPUML_CHECK(is_integral(indices.dtype()), who,
              ": expected integer indices (int64 or int32), got ", dtype_name(indices.dtype()));
  const int64_t n = weight.size(0);
  if (!indices.is_symbolic()) {
    for (int64_t i : indices.to_vector<int64_t>())
      IPUML_CHECK(i >= 0 && i < n, who, ": index ", i, " is out of range for num_embeddings=", n);
  }
  if (max_norm) embedding_renorm(weight, indices, *max_norm, norm_type, who);
  Tensor out = embedding(weight, indices);
  if ((!padding_idx && !scale_grad_by_freq) || !weight.requires_grad() ||
      !autograd::is_grad_enabled())
    return out;
  // Each lookup's gradient factor: 0 for padding_idx, 1 / (its index's count) when scaling.
  Tensor factor;
  if (padding_idx)
    factor = cast(ne(indices, full_like(indices, static_cast<double>(*padding_idx))), out.dtype());
  if (scale_grad_by_freq) {
    IPUML_CHECK(!indices.is_symbolic(), who, ": scale_grad_by_freq cannot be traced");
    const std::vector<int64_t> flat = indices.to_vector<int64_t>();
    std::vector<int64_t> count(static_cast<size_t>(n), 0);
    for (int64_t i : flat) ++count[static_cast<size_t>(i)];
    std::vector<float> inverse;
    inverse.reserve(flat.size());
    for (int64_t i : flat)
      inverse.push_back(1.0f / static_cast<float>(count[static_cast<size_t>(i)]));
    Tensor freq = cast(from_vector<float>(inverse, indices.shape()), out.dtype()).to(out.device());
    factor = factor.defined() ? mul(factor, freq) : freq;
  }
  // The same values (out's own, plus an exact zero), with the gradient scaled by the factor.
  const Tensor values = out.detach();
  return add(values, mul(sub(out, values), unsqueeze(factor, -1)));
}

}  // namespace detail

struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  IPUML_ARG(int64_t, num_embeddings);
  IPUML_ARG(int64_t, embedding_dim);
  // Negative values count from the end, as in PyTorch.
  IPUML_ARG(std::optional<int64_t>, padding_idx);
};

class EmbeddingImpl : public Module {
 public:
  explicit EmbeddingImpl(const EmbeddingOptions& options_)
      : Module("Embedding"), options(options_) {
    const int64_t n = options.num_embeddings();
    IPUML_CHECK(n > 0 && options.embedding_dim() > 0,
                "Embedding: num_embeddings and embedding_dim "
                "must be positive, got ",
                n, " and ", options.embedding_dim());
    if (auto& p = options.padding_idx()) {
      IPUML_CHECK(*p >= -n && *p < n, "Embedding: padding_idx=", *p,
                  " must be within num_embeddings=", n);
      if (*p < 0) p = *p + n;
    }
    weight = register_parameter("weight", zeros({n, options.embedding_dim()}));
    reset_parameters();
  }
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim)
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim)) {}

  void reset_parameters(Generator* gen = nullptr) {
    init::normal_(weight, 0.0, 1.0, gen);
    if (auto p = options.padding_idx()) {
      NoGradGuard no_grad;
      weight.select(0, *p).fill_(0.0);
    }
  }

  Tensor forward(const Tensor& indices) override {
    return detail::embedding_lookup(indices, weight, options.padding_idx(), std::nullopt, 2.0,
                                    false, "Embedding");
  }

  std::string extra_repr() const override {
    std::string s =
        std::to_string(options.num_embeddings()) + ", " + std::to_string(options.embedding_dim());
    if (options.padding_idx()) s += ", padding_idx=" + std::to_string(*options.padding_idx());
    return s;
  }

  EmbeddingOptions options;
  Tensor weight;
};
IPUML_MODULE(Embedding);

}  // namespace ipuml::nn
