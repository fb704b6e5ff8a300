// Pooling modules: MaxPool1d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, with PyTorch's options and
// reprs (arguments print as the user gave them: `kernel_size=2` or `kernel_size=(2, 3)`).
#pragma once

#include <optional>
#include <string>

#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

namespace detail {

// Runs `f` on a batched input, adding and removing the batch dim for an unbatched one.
template <typename F>
Tensor with_batch_dim(const std::string& who, const Tensor& x, int64_t rank, F&& f) {
  IPUML_CHECK(x.dim() == rank || x.dim() == rank - 1, who, ": expected a ", rank - 1,
              "-d (unbatched) or ", rank, "-d (batched) input, got shape ", shape_str(x.shape()));
  if (x.dim() == rank) return f(x);
  return squeeze(f(unsqueeze(x, 0)), 0);
}

template <size_t D>
void check_pool_args(const std::string& who, const ExpandingArray<D>& kernel,
                     const ExpandingArray<D>& stride, const ExpandingArray<D>& padding) {
  for (size_t i = 0; i < D; ++i) {
    IPUML_CHECK(kernel[i] > 0 && stride[i] > 0, who,
                ": kernel_size and stride must be positive, "
                "got kernel_size=",
                kernel.vec(), ", stride=", stride.vec());
    IPUML_CHECK(padding[i] >= 0 && 2 * padding[i] <= kernel[i], who,
                ": padding must be between 0 "
                "and half the kernel size, got padding=",
                padding.vec(), " for kernel_size=", kernel.vec());
  }
}

}  // namespace detail

template <size_t D>
struct MaxPoolOptions {
  MaxPoolOptions(ExpandingArray<D> kernel_size) : kernel_size_(kernel_size) {}
  // Defaults to kernel_size, as in PyTorch.
  MaxPoolOptions& stride(ExpandingArray<D> s) {
    stride_ = s;
    return *this;
  }
  ExpandingArray<D> stride() const { return stride_.value_or(kernel_size_); }

  IPUML_ARG(ExpandingArray<D>, kernel_size);
  IPUML_ARG(ExpandingArray<D>, padding) = 0;
  // Only 1 and false are computed; other values are refused when the module is built.
  IPUML_ARG(ExpandingArray<D>, dilation) = 1;
  IPUML_ARG(bool, ceil_mode) = false;

 private:
  std::optional<ExpandingArray<D>> stride_;
};
using MaxPool1dOptions = MaxPoolOptions<1>;
using MaxPool2dOptions = MaxPoolOptions<2>;

namespace detail {
template <size_t D>
class MaxPoolNdImpl : public Module {
 public:
  MaxPoolNdImpl(const MaxPoolOptions<D>& options_, const char* name)
      : Module(name), options(options_) {
    check_pool_args<D>(name, options.kernel_size(), options.stride(), options.padding());
    IPUML_CHECK(options.dilation().all_equal(1), name, ": dilation=", options.dilation().vec(),
                " is not supported (only 1)");
    IPUML_CHECK(!options.ceil_mode(), name, ": ceil_mode=True is not supported");
  }
  std::string extra_repr() const override {
    return "kernel_size=" + repr::py_arg(options.kernel_size()) +
           ", stride=" + repr::py_arg(options.stride()) +
           ", padding=" + repr::py_arg(options.padding()) +
           ", dilation=" + repr::py_arg(options.dilation()) +
           ", ceil_mode=" + repr::py_bool(options.ceil_mode());
  }
  MaxPoolOptions<D> options;
};
}  // namespace detail

class MaxPool1dImpl : public detail::MaxPoolNdImpl<1> {
 public:
  explicit MaxPool1dImpl(const MaxPool1dOptions& o) : MaxPoolNdImpl<1>(o, "MaxPool1d") {}
  explicit MaxPool1dImpl(ExpandingArray<1> kernel_size)
      : MaxPool1dImpl(MaxPool1dOptions(kernel_size)) {}
  Tensor forward(const Tensor& x) override {
    return detail::with_batch_dim("MaxPool1d", x, 3, [&](const Tensor& b) {
      return max_pool1d(b, options.kernel_size()[0], options.stride()[0], options.padding()[0]);
    });
  }
};
IPUML_MODULE(MaxPool1d);

class MaxPool2dImpl : public detail::MaxPoolNdImpl<2> {
 public:
  explicit MaxPool2dImpl(const MaxPool2dOptions& o) : MaxPoolNdImpl<2>(o, "MaxPool2d") {}
  explicit MaxPool2dImpl(ExpandingArray<2> kernel_size)
      : MaxPool2dImpl(MaxPool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& x) override {
    return detail::with_batch_dim("MaxPool2d", x, 4, [&](const Tensor& b) {
      return max_pool2d(b, options.kernel_size().vec(), options.stride().vec(),
                        options.padding().vec());
    });
  }
};
IPUML_MODULE(MaxPool2d);

struct AvgPool2dOptions {
  AvgPool2dOptions(ExpandingArray<2> kernel_size) : kernel_size_(kernel_size) {}
  // Defaults to kernel_size, as in PyTorch.
  AvgPool2dOptions& stride(ExpandingArray<2> s) {
    stride_ = s;
    return *this;
  }
  ExpandingArray<2> stride() const { return stride_.value_or(kernel_size_); }

  IPUML_ARG(ExpandingArray<2>, kernel_size);
  IPUML_ARG(ExpandingArray<2>, padding) = 0;
  // Only false is computed; true is refused when the module is built.
  IPUML_ARG(bool, ceil_mode) = false;
  IPUML_ARG(bool, count_include_pad) = true;
  // Divides each window's sum by this instead of the window size.
  IPUML_ARG(std::optional<int64_t>, divisor_override);

 private:
  std::optional<ExpandingArray<2>> stride_;
};

class AvgPool2dImpl : public Module {
 public:
  explicit AvgPool2dImpl(const AvgPool2dOptions& options_)
      : Module("AvgPool2d"), options(options_) {
    detail::check_pool_args<2>("AvgPool2d", options.kernel_size(), options.stride(),
                               options.padding());
    IPUML_CHECK(!options.ceil_mode(), "AvgPool2d: ceil_mode=True is not supported");
    IPUML_CHECK(!options.divisor_override() || *options.divisor_override() != 0,
                "AvgPool2d: divisor_override must be non-zero");
  }
  explicit AvgPool2dImpl(ExpandingArray<2> kernel_size)
      : AvgPool2dImpl(AvgPool2dOptions(kernel_size)) {}

  Tensor forward(const Tensor& x) override {
    return detail::with_batch_dim("AvgPool2d", x, 4, [&](const Tensor& b) {
      const auto& o = options;
      if (o.divisor_override()) {
        // Window sums (the mean over the full, padded window) rescaled by the override.
        const double window = static_cast<double>(o.kernel_size()[0] * o.kernel_size()[1]);
        Tensor y = avg_pool2d(b, o.kernel_size().vec(), o.stride().vec(), o.padding().vec(), true);
        return mul(y, window / static_cast<double>(*o.divisor_override()));
      }
      return avg_pool2d(b, o.kernel_size().vec(), o.stride().vec(), o.padding().vec(),
                        o.count_include_pad());
    });
  }
  std::string extra_repr() const override {
    return "kernel_size=" + repr::py_arg(options.kernel_size()) +
           ", stride=" + repr::py_arg(options.stride()) +
           ", padding=" + repr::py_arg(options.padding());
  }
  AvgPool2dOptions options;
};
IPUML_MODULE(AvgPool2d);

struct AdaptiveAvgPool2dOptions {
  AdaptiveAvgPool2dOptions(ExpandingArray<2> output_size) : output_size_(output_size) {}
  IPUML_ARG(ExpandingArray<2>, output_size);
};

class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options_)
      : Module("AdaptiveAvgPool2d"), options(options_) {
    IPUML_CHECK(options.output_size()[0] > 0 && options.output_size()[1] > 0,
                "AdaptiveAvgPool2d: output_size must be positive, got ",
                options.output_size().vec());
  }
  explicit AdaptiveAvgPool2dImpl(ExpandingArray<2> output_size)
      : AdaptiveAvgPool2dImpl(AdaptiveAvgPool2dOptions(output_size)) {}

  Tensor forward(const Tensor& x) override {
    return detail::with_batch_dim("AdaptiveAvgPool2d", x, 4, [&](const Tensor& b) {
      return adaptive_avg_pool2d(b, options.output_size().vec());
    });
  }
  std::string extra_repr() const override {
    return "output_size=" + repr::py_arg(options.output_size());
  }
  AdaptiveAvgPool2dOptions options;
};
IPUML_MODULE(AdaptiveAvgPool2d);

}  // namespace ipuml::nn
