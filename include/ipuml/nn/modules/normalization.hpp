// Normalisation layers: BatchNorm1d/BatchNorm2d (running statistics as buffers), GroupNorm and
// LayerNorm, with PyTorch's options, initialisation (weight 1, bias 0) and reprs.
#pragma once

#include <optional>
#include <string>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

struct BatchNormOptions {
  BatchNormOptions(int64_t num_features) : num_features_(num_features) {}
  IPUML_ARG(int64_t, num_features);
  IPUML_ARG(double, eps) = 1e-5;
  // std::nullopt: a cumulative moving average (PyTorch's momentum=None).
  IPUML_ARG(std::optional<double>, momentum) = 0.1;
  IPUML_ARG(bool, affine) = true;
  IPUML_ARG(bool, track_running_stats) = true;
};
using BatchNorm1dOptions = BatchNormOptions;
using BatchNorm2dOptions = BatchNormOptions;

namespace detail {

class BatchNormImplBase : public Module {
 public:
  BatchNormImplBase(const BatchNormOptions& options_, const char* name)
      : Module(name), options(options_) {
    IPUML_CHECK(options.num_features() > 0, name, ": num_features must be positive, got ",
                options.num_features());
    IPUML_CHECK(options.eps() > 0.0, name, ": eps must be positive, got ", options.eps());
    const int64_t c = options.num_features();
    if (options.affine()) {
      weight = register_parameter("weight", ones({c}));
      bias = register_parameter("bias", zeros({c}));
    }
    if (options.track_running_stats()) {
      running_mean = register_buffer("running_mean", zeros({c}));
      running_var = register_buffer("running_var", ones({c}));
      num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
    }
  }

  void reset_running_stats() {
    if (!options.track_running_stats()) return;
    NoGradGuard no_grad;
    running_mean.fill_(0.0);
    running_var.fill_(1.0);
    num_batches_tracked.fill_(0.0);
  }
  void reset_parameters() {
    reset_running_stats();
    if (!options.affine()) return;
    NoGradGuard no_grad;
    weight.fill_(1.0);
    bias.fill_(0.0);
  }

  Tensor forward(const Tensor& x) override { return forward_act(x, Tensor(), false); }

  // act(forward(x) + residual), act = ReLU when `relu`, fused into the norm's single pass over
  // x where batch_norm_act can (a ResNet block's tail: bn3, residual add, ReLU).
  Tensor forward_act(const Tensor& x, const Tensor& residual, bool relu) {
    check_input_dim(x);
    IPUML_CHECK(x.size(1) == options.num_features(), type_name(), ": expected an input with ",
                options.num_features(), " channel(s) (num_features) in dim 1, got ", x.size(1),
                " in an input of shape ", shape_str(x.shape()));
    double factor = options.momentum().value_or(0.0);
    if (is_training() && options.track_running_stats()) {
      NoGradGuard no_grad;
      num_batches_tracked.add_(1.0);
      if (!options.momentum())
        factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
    }
    // Batch statistics when training or when no running statistics are kept; the running
    // statistics are handed over only where they are to be used or updated.
    const bool use_batch_stats = is_training() || !options.track_running_stats();
    return batch_norm_act(x, running_mean, running_var, weight, bias, use_batch_stats, factor,
                          options.eps(), residual, relu);
  }

  std::string extra_repr() const override {
    return std::to_string(options.num_features()) + ", eps=" + repr::py_float(options.eps()) +
           ", momentum=" + repr::py_optional_float(options.momentum()) +
           ", affine=" + repr::py_bool(options.affine()) +
           ", track_running_stats=" + repr::py_bool(options.track_running_stats());
  }

  BatchNormOptions options;
  Tensor weight;
  Tensor bias;
  Tensor running_mean;
  Tensor running_var;
  Tensor num_batches_tracked;

 protected:
  virtual void check_input_dim(const Tensor& x) const = 0;
};

}  // namespace detail

class BatchNorm1dImpl : public detail::BatchNormImplBase {
 public:
  explicit BatchNorm1dImpl(const BatchNormOptions& o) : BatchNormImplBase(o, "BatchNorm1d") {}
  explicit BatchNorm1dImpl(int64_t num_features)
      : BatchNorm1dImpl(BatchNormOptions(num_features)) {}

 protected:
  void check_input_dim(const Tensor& x) const override {
    IPUML_CHECK(x.dim() == 2 || x.dim() == 3,
                "BatchNorm1d: expected a 2-d [N, C] or 3-d [N, C, L] "
                "input, got shape ",
                shape_str(x.shape()));
  }
};
IPUML_MODULE(BatchNorm1d);

class BatchNorm2dImpl : public detail::BatchNormImplBase {
 public:
  explicit BatchNorm2dImpl(const BatchNormOptions& o) : BatchNormImplBase(o, "BatchNorm2d") {}
  explicit BatchNorm2dImpl(int64_t num_features)
      : BatchNorm2dImpl(BatchNormOptions(num_features)) {}

 protected:
  void check_input_dim(const Tensor& x) const override {
    IPUML_CHECK(x.dim() == 4, "BatchNorm2d: expected a 4-d input [N, C, H, W], got shape ",
                shape_str(x.shape()));
  }
};
IPUML_MODULE(BatchNorm2d);

struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  IPUML_ARG(int64_t, num_groups);
  IPUML_ARG(int64_t, num_channels);
  IPUML_ARG(double, eps) = 1e-5;
  IPUML_ARG(bool, affine) = true;
};

class GroupNormImpl : public Module {
 public:
  explicit GroupNormImpl(const GroupNormOptions& options_)
      : Module("GroupNorm"), options(options_) {
    IPUML_CHECK(options.num_groups() > 0 && options.num_channels() > 0 &&
                    options.num_channels() % options.num_groups() == 0,
                "GroupNorm: num_channels=", options.num_channels(),
                " must be a positive multiple of num_groups=", options.num_groups());
    if (options.affine()) {
      weight = register_parameter("weight", ones({options.num_channels()}));
      bias = register_parameter("bias", zeros({options.num_channels()}));
    }
  }
  GroupNormImpl(int64_t num_groups, int64_t num_channels)
      : GroupNormImpl(GroupNormOptions(num_groups, num_channels)) {}

  Tensor forward(const Tensor& x) override {
    IPUML_CHECK(x.dim() >= 2 && x.size(1) == options.num_channels(),
                "GroupNorm: expected an input "
                "[N, C, ...] with C=",
                options.num_channels(), " (num_channels), got shape ", shape_str(x.shape()));
    return group_norm(x, options.num_groups(), weight, bias, options.eps());
  }
  std::string extra_repr() const override {
    return std::to_string(options.num_groups()) + ", " + std::to_string(options.num_channels()) +
           ", eps=" + repr::py_float(options.eps()) + ", affine=" + repr::py_bool(options.affine());
  }

  GroupNormOptions options;
  Tensor weight;
  Tensor bias;
};
IPUML_MODULE(GroupNorm);

struct LayerNormOptions {
  LayerNormOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}
  IPUML_ARG(Shape, normalized_shape);
  IPUML_ARG(double, eps) = 1e-5;
  IPUML_ARG(bool, elementwise_affine) = true;
};

class LayerNormImpl : public Module {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options_)
      : Module("LayerNorm"), options(options_) {
    const Shape& s = options.normalized_shape();
    IPUML_CHECK(!s.empty(), "LayerNorm: normalized_shape must not be empty");
    for (int64_t d : s)
      IPUML_CHECK(d > 0, "LayerNorm: normalized_shape must be positive, got ", shape_str(s));
    if (options.elementwise_affine()) {
      weight = register_parameter("weight", ones(s));
      bias = register_parameter("bias", zeros(s));
    }
  }
  explicit LayerNormImpl(Shape normalized_shape)
      : LayerNormImpl(LayerNormOptions(std::move(normalized_shape))) {}
  explicit LayerNormImpl(int64_t normalized_size) : LayerNormImpl(Shape{normalized_size}) {}

  Tensor forward(const Tensor& x) override {
    const Shape& s = options.normalized_shape();
    const auto k = static_cast<int64_t>(s.size());
    IPUML_CHECK(x.dim() >= k && Shape(x.shape().end() - k, x.shape().end()) == s,
                "LayerNorm: expected an input whose trailing dimensions are normalized_shape=",
                shape_str(s), ", got shape ", shape_str(x.shape()));
    return layer_norm(x, s, weight, bias, options.eps());
  }
  std::string extra_repr() const override {
    return repr::py_tuple(options.normalized_shape()) + ", eps=" + repr::py_float(options.eps()) +
           ", elementwise_affine=" + repr::py_bool(options.elementwise_affine());
  }

  LayerNormOptions options;
  Tensor weight;
  Tensor bias;
};
IPUML_MODULE(LayerNorm);

}  // namespace ipuml::nn
