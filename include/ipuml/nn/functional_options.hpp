// LibTorch's functional call shapes: F::*FuncOptions structs and the F:: overloads taking them,
// `F::max_pool2d(x, F::MaxPool2dFuncOptions(2))`, `F::nll_loss(y, t,
// F::NLLLossFuncOptions().weight(w))`, `F::embedding(input, weight, options)`.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <ipuml/nn/functional.hpp>
#include <ipuml/nn/modules/common.hpp>
#include <ipuml/nn/modules/dropout.hpp>
#include <ipuml/nn/modules/embedding.hpp>
#include <ipuml/nn/modules/loss.hpp>
#include <ipuml/nn/modules/pooling.hpp>

namespace ipuml {
// torch::kMean and friends, for code that spells them through the top-level namespace.
using nn::kMean;
using nn::kNone;
using nn::kSum;
}  // namespace ipuml

namespace ipuml::nn::functional {

template <size_t D>
struct ConvFuncOptions {
  IPUML_ARG(Tensor, bias);
  IPUML_ARG(ExpandingArray<D>, stride) = 1;
  IPUML_ARG(ExpandingArray<D>, padding) = 0;
  IPUML_ARG(ExpandingArray<D>, dilation) = 1;
  IPUML_ARG(int64_t, groups) = 1;
};
using Conv1dFuncOptions = ConvFuncOptions<1>;
using Conv2dFuncOptions = ConvFuncOptions<2>;

inline Tensor conv2d(const Tensor& x, const Tensor& weight, const Conv2dFuncOptions& o) {
  return ipuml::conv2d(x, weight, o.bias(), o.stride().vec(), o.padding().vec(), o.dilation().vec(),
                       o.groups());
}
inline Tensor conv1d(const Tensor& x, const Tensor& weight, const Conv1dFuncOptions& o) {
  return ipuml::conv1d(x, weight, o.bias(), o.stride()[0], o.padding()[0], o.dilation()[0],
                       o.groups());
}

// LibTorch's F::ConvTranspose2dFuncOptions, in PyTorch's argument order.
template <size_t D>
struct ConvTransposeFuncOptions {
  IPUML_ARG(Tensor, bias);
  IPUML_ARG(ExpandingArray<D>, stride) = 1;
  IPUML_ARG(ExpandingArray<D>, padding) = 0;
  IPUML_ARG(ExpandingArray<D>, output_padding) = 0;
  IPUML_ARG(int64_t, groups) = 1;
  IPUML_ARG(ExpandingArray<D>, dilation) = 1;
};
using ConvTranspose2dFuncOptions = ConvTransposeFuncOptions<2>;

inline Tensor conv_transpose2d(const Tensor& x, const Tensor& weight,
                               const ConvTranspose2dFuncOptions& o) {
  return ipuml::conv_transpose2d(x, weight, o.bias(), o.stride().vec(), o.padding().vec(),
                                 o.output_padding().vec(), o.groups(), o.dilation().vec());
}

// The pooling modules' options serve the functions too, as in LibTorch.
using MaxPool1dFuncOptions = MaxPool1dOptions;
using MaxPool2dFuncOptions = MaxPool2dOptions;
using AvgPool2dFuncOptions = AvgPool2dOptions;
using AdaptiveAvgPool2dFuncOptions = AdaptiveAvgPool2dOptions;

inline Tensor max_pool2d(const Tensor& x, const MaxPool2dFuncOptions& o) {
  return MaxPool2dImpl(o).forward(x);
}
inline Tensor max_pool1d(const Tensor& x, const MaxPool1dFuncOptions& o) {
  return MaxPool1dImpl(o).forward(x);
}
inline Tensor avg_pool2d(const Tensor& x, const AvgPool2dFuncOptions& o) {
  return AvgPool2dImpl(o).forward(x);
}
inline Tensor adaptive_avg_pool2d(const Tensor& x, const AdaptiveAvgPool2dFuncOptions& o) {
  return AdaptiveAvgPool2dImpl(o).forward(x);
}

// LibTorch's F::embedding(input, weight, F::EmbeddingFuncOptions().padding_idx(0)): the indices
// first, the [num_embeddings, embedding_dim] weight second (torch::embedding and
// ipuml::embedding take the weight first, as ATen does). padding_idx may count from the end.
struct EmbeddingFuncOptions {
  IPUML_ARG(std::optional<int64_t>, padding_idx);
  IPUML_ARG(std::optional<double>, max_norm);
  IPUML_ARG(double, norm_type) = 2.0;
  IPUML_ARG(bool, scale_grad_by_freq) = false;
  // ipuml's gradients are dense: true is refused.
  IPUML_ARG(bool, sparse) = false;
};
inline Tensor embedding(const Tensor& input, const Tensor& weight,
                        const EmbeddingFuncOptions& o = {}) {
  IPUML_CHECK(input.defined() && weight.defined(), "F::embedding: got an undefined tensor");
  IPUML_CHECK(!(is_floating(input.dtype()) && is_integral(weight.dtype())),
              "F::embedding: the input is ", dtype_name(input.dtype()), " and the weight ",
              dtype_name(weight.dtype()),
              "; LibTorch's order is F::embedding(input, weight, "
              "options), the indices first (ipuml::embedding(weight, indices) is ATen's order)");
  IPUML_CHECK(weight.dim() == 2, "F::embedding: expected a weight of shape [num_embeddings, ",
              "embedding_dim], got shape ", shape_str(weight.shape()));
  IPUML_CHECK(!o.sparse(),
              "F::embedding: sparse gradients are not implemented (expected "
              "sparse(false))");
  // A plain integer: GCC 12 reports a copied std::optional<int64_t> as maybe-uninitialized.
  const bool padded = o.padding_idx().has_value();
  int64_t padding = padded ? *o.padding_idx() : 0;
  if (padded) {
    const int64_t n = weight.size(0);
    IPUML_CHECK(padding >= -n && padding < n, "F::embedding: padding_idx=", padding,
                " must be within num_embeddings=", n);
    if (padding < 0) padding += n;
  }
  return detail::embedding_lookup(
      input, weight, padded ? std::optional<int64_t>(padding) : std::nullopt, o.max_norm(),
      o.norm_type(), o.scale_grad_by_freq(), "F::embedding");
}

struct DropoutFuncOptions {
  IPUML_ARG(double, p) = 0.5;
  IPUML_ARG(bool, training) = true;
  // Recorded only: ipuml always computes out of place (same values).
  IPUML_ARG(bool, inplace) = false;
};
using Dropout1dFuncOptions = DropoutFuncOptions;
using Dropout2dFuncOptions = DropoutFuncOptions;

inline Tensor dropout(const Tensor& x, const DropoutFuncOptions& o = {}) {
  return ipuml::dropout(x, o.p(), o.training());
}
inline Tensor dropout1d(const Tensor& x, const Dropout1dFuncOptions& o = {}) {
  return detail::feature_dropout(x, o.p(), o.training(), 1, "dropout1d");
}
inline Tensor dropout2d(const Tensor& x, const Dropout2dFuncOptions& o = {}) {
  return detail::feature_dropout(x, o.p(), o.training(), 2, "dropout2d");
}

struct SoftmaxFuncOptions {
  SoftmaxFuncOptions(int64_t dim) : dim_(dim) {}
  IPUML_ARG(int64_t, dim);
};
using LogSoftmaxFuncOptions = SoftmaxFuncOptions;
inline Tensor softmax(const Tensor& x, const SoftmaxFuncOptions& o) {
  return ipuml::softmax(x, o.dim());
}
inline Tensor log_softmax(const Tensor& x, const LogSoftmaxFuncOptions& o) {
  return ipuml::log_softmax(x, o.dim());
}

struct GELUFuncOptions {
  IPUML_ARG(std::string, approximate) = "none";
};
inline Tensor gelu(const Tensor& x, const GELUFuncOptions& o) {
  return ipuml::gelu(x, o.approximate());
}

struct LayerNormFuncOptions {
  explicit LayerNormFuncOptions(Shape normalized_shape)
      : normalized_shape_(std::move(normalized_shape)) {}
  IPUML_ARG(Shape, normalized_shape);
  IPUML_ARG(Tensor, weight);
  IPUML_ARG(Tensor, bias);
  IPUML_ARG(double, eps) = 1e-5;
};
inline Tensor layer_norm(const Tensor& x, const LayerNormFuncOptions& o) {
  return ipuml::layer_norm(x, o.normalized_shape(), o.weight(), o.bias(), o.eps());
}

struct GroupNormFuncOptions {
  explicit GroupNormFuncOptions(int64_t num_groups) : num_groups_(num_groups) {}
  IPUML_ARG(int64_t, num_groups);
  IPUML_ARG(Tensor, weight);
  IPUML_ARG(Tensor, bias);
  IPUML_ARG(double, eps) = 1e-5;
};
inline Tensor group_norm(const Tensor& x, const GroupNormFuncOptions& o) {
  return ipuml::group_norm(x, o.num_groups(), o.weight(), o.bias(), o.eps());
}

struct BatchNormFuncOptions {
  IPUML_ARG(Tensor, weight);
  IPUML_ARG(Tensor, bias);
  IPUML_ARG(bool, training) = false;
  IPUML_ARG(double, momentum) = 0.1;
  IPUML_ARG(double, eps) = 1e-5;
};
inline Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormFuncOptions& o = {}) {
  return ipuml::batch_norm(x, running_mean, running_var, o.weight(), o.bias(), o.training(),
                           o.momentum(), o.eps());
}

// Losses: the loss modules' options plus LibTorch's functional names for them.
using CrossEntropyFuncOptions = CrossEntropyLossOptions;
using NLLLossFuncOptions = NLLLossOptions;
struct MSELossFuncOptions {
  MSELossFuncOptions(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}
  IPUML_ARG(Reduction, reduction);
};

inline Tensor cross_entropy(const Tensor& input, const Tensor& target,
                            const CrossEntropyFuncOptions& o) {
  return ipuml::cross_entropy(input, target, o.reduction(), o.label_smoothing(), o.weight(),
                              o.ignore_index());
}
inline Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o) {
  return ipuml::nll_loss(input, target, o.reduction(), o.weight(), o.ignore_index());
}
inline Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o) {
  return ipuml::mse_loss(input, target, o.reduction());
}

}  // namespace ipuml::nn::functional
