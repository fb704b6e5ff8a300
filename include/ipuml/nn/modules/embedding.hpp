// nn::Embedding: a lookup table of num_embeddings vectors, initialised N(0, 1) as in PyTorch;
// the padding_idx row starts at zero and receives no gradient.
#pragma once

#include <optional>
#include <string>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/nn/init.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

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
    IPUML_CHECK(is_integral(indices.dtype()), "Embedding: expected integer indices (int64), got ",
                dtype_name(indices.dtype()));
    if (!indices.is_symbolic()) {
      for (int64_t i : indices.to_vector<int64_t>())
        IPUML_CHECK(i >= 0 && i < options.num_embeddings(), "Embedding: index ", i,
                    " is out of range for num_embeddings=", options.num_embeddings());
    }
    Tensor out = embedding(weight, indices);
    auto p = options.padding_idx();
    if (!p || !weight.requires_grad() || !autograd::is_grad_enabled()) return out;
    // Same values, but the padding row's lookups reach the weight only through a detached copy,
    // so that row gets no gradient (PyTorch's padding_idx contract).
    Tensor keep =
        unsqueeze(cast(ne(indices, full_like(indices, static_cast<double>(*p))), out.dtype()), -1);
    return add(mul(out, keep),
               mul(embedding(weight.detach(), indices), sub(ones_like(keep), keep)));
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
