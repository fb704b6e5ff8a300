// LibTorch's functional call shapes: F::*FuncOptions structs and the F:: overloads taking them,
// `F::max_pool2d(x, F::MaxPool2dFuncOptions(2))`, `F::nll_loss(y, t,
// F::NLLLossFuncOptions().weight(w))`.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <ipuml/nn/functional.hpp>
#include <ipuml/nn/modules/common.hpp>
#include <ipuml/nn/modules/dropout.hpp>
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
