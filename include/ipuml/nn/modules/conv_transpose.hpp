// nn::ConvTranspose2d (UNet's up-convolution) with PyTorch's options (stride, padding,
// output_padding, groups, bias, dilation), default initialisation, parameter names and repr.
#pragma once

#include <cmath>
#include <string>

#include <ipuml/nn/init.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

template <size_t D>
struct ConvTransposeOptions {
  ConvTransposeOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  IPUML_ARG(int64_t, in_channels);
  IPUML_ARG(int64_t, out_channels);
  IPUML_ARG(ExpandingArray<D>, kernel_size);
  IPUML_ARG(ExpandingArray<D>, stride) = 1;
  IPUML_ARG(ExpandingArray<D>, padding) = 0;
  // Extra rows and columns at the bottom and right, telling apart the input sizes a strided
  // convolution maps to one output size; smaller than stride or than dilation.
  IPUML_ARG(ExpandingArray<D>, output_padding) = 0;
  IPUML_ARG(int64_t, groups) = 1;
  IPUML_ARG(bool, bias) = true;
  IPUML_ARG(ExpandingArray<D>, dilation) = 1;
};
using ConvTranspose2dOptions = ConvTransposeOptions<2>;

class ConvTranspose2dImpl : public Module {
 public:
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& options_)
      : Module("ConvTranspose2d"), options(options_) {
    const auto& o = options;
    const char* name = "ConvTranspose2d";
    IPUML_CHECK(o.in_channels() > 0 && o.out_channels() > 0, name,
                ": in_channels and out_channels must be positive, got ", o.in_channels(), " and ",
                o.out_channels());
    IPUML_CHECK(o.groups() > 0, name, ": groups must be positive, got ", o.groups());
    IPUML_CHECK(o.in_channels() % o.groups() == 0, name, ": in_channels=", o.in_channels(),
                " must be divisible by groups=", o.groups());
    IPUML_CHECK(o.out_channels() % o.groups() == 0, name, ": out_channels=", o.out_channels(),
                " must be divisible by groups=", o.groups());
    for (size_t i = 0; i < 2; ++i) {
      IPUML_CHECK(o.kernel_size()[i] > 0 && o.stride()[i] > 0 && o.dilation()[i] > 0, name,
                  ": kernel_size, stride and dilation must be positive, got kernel_size=",
                  o.kernel_size().vec(), ", stride=", o.stride().vec(),
                  ", dilation=", o.dilation().vec());
      IPUML_CHECK(o.padding()[i] >= 0 && o.output_padding()[i] >= 0, name,
                  ": padding and output_padding must be non-negative, got padding=",
                  o.padding().vec(), ", output_padding=", o.output_padding().vec());
      IPUML_CHECK(o.output_padding()[i] < o.stride()[i] || o.output_padding()[i] < o.dilation()[i],
                  name, ": output_padding must be smaller than either stride or dilation, got ",
                  "output_padding=", o.output_padding().vec(), ", stride=", o.stride().vec(),
                  ", dilation=", o.dilation().vec());
    }
    // The transposed layout: input channels first.
    weight = register_parameter("weight", zeros({o.in_channels(), o.out_channels() / o.groups(),
                                                 o.kernel_size()[0], o.kernel_size()[1]}));
    if (o.bias()) bias = register_parameter("bias", zeros({o.out_channels()}));
    reset_parameters();
  }
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)) {}

  // PyTorch's default, the same as Conv2d's: kaiming_uniform_(a = sqrt(5)) for the weight and
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias, drawn in that order. fan_in is read off the
  // weight as PyTorch does, dim 1 times the kernel: out_channels / groups * kH * kW here.
  void reset_parameters(Generator* gen = nullptr) {
    init::default_weight_and_bias_(weight, bias, gen);
  }

  // [N, C_in, H, W], or [C_in, H, W] unbatched.
  Tensor forward(const Tensor& input) override {
    return forward_padded(input, options.output_padding().vec());
  }

  // PyTorch's forward(input, output_size): the output_padding that makes the spatial size
  // `output_size` ([H, W], or a full shape whose last two entries are read), which must lie
  // between the smallest size the input gives and that plus stride - 1.
  Tensor forward(const Tensor& input, const std::vector<int64_t>& output_size) {
    IPUML_CHECK(input.dim() == 4 || input.dim() == 3, type_name(),
                ": expected a 3-d (unbatched) or 4-d (batched) input, got shape ",
                shape_str(input.shape()));
    IPUML_CHECK(output_size.size() >= 2 && output_size.size() <= 4, type_name(),
                ": output_size must have 2 entries (or a full shape of 3 or 4), got ", output_size);
    const auto& o = options;
    std::vector<int64_t> want(output_size.end() - 2, output_size.end()), lo(2), hi(2), pad(2);
    for (size_t d = 0; d < 2; ++d) {
      const int64_t in = input.size(input.dim() - 2 + static_cast<int64_t>(d));
      lo[d] = (in - 1) * o.stride()[d] - 2 * o.padding()[d] +
              o.dilation()[d] * (o.kernel_size()[d] - 1) + 1;
      hi[d] = lo[d] + o.stride()[d] - 1;
      pad[d] = want[d] - lo[d];
    }
    IPUML_CHECK(want[0] >= lo[0] && want[0] <= hi[0] && want[1] >= lo[1] && want[1] <= hi[1],
                type_name(), ": requested an output size of ", want,
                ", but valid sizes range from ", lo, " to ", hi, " (for an input of shape ",
                shape_str(input.shape()), ")");
    return forward_padded(input, pad);
  }

 private:
  Tensor forward_padded(const Tensor& input, const std::vector<int64_t>& output_padding) {
    IPUML_CHECK(input.dim() == 4 || input.dim() == 3, type_name(),
                ": expected a 3-d (unbatched) or 4-d (batched) input, got shape ",
                shape_str(input.shape()));
    const bool unbatched = input.dim() == 3;
    const int64_t c = input.size(unbatched ? 0 : 1);
    IPUML_CHECK(c == options.in_channels(), type_name(), ": expected an input with ",
                options.in_channels(), " channel(s) (in_channels), got ", c,
                " channel(s) in an input of shape ", shape_str(input.shape()));
    const auto& o = options;
    Tensor y =
        conv_transpose2d(unbatched ? unsqueeze(input, 0) : input, weight, bias, o.stride().vec(),
                         o.padding().vec(), output_padding, o.groups(), o.dilation().vec());
    return unbatched ? squeeze(y, 0) : y;
  }

 public:
  std::string extra_repr() const override {
    const auto& o = options;
    std::string s = std::to_string(o.in_channels()) + ", " + std::to_string(o.out_channels()) +
                    ", kernel_size=" + repr::py_tuple(o.kernel_size().vec()) +
                    ", stride=" + repr::py_tuple(o.stride().vec());
    if (!o.padding().all_equal(0)) s += ", padding=" + repr::py_tuple(o.padding().vec());
    if (!o.dilation().all_equal(1)) s += ", dilation=" + repr::py_tuple(o.dilation().vec());
    if (!o.output_padding().all_equal(0))
      s += ", output_padding=" + repr::py_tuple(o.output_padding().vec());
    if (o.groups() != 1) s += ", groups=" + std::to_string(o.groups());
    if (!o.bias()) s += ", bias=False";
    return s;
  }

  ConvTranspose2dOptions options;
  Tensor weight;
  Tensor bias;
};
IPUML_MODULE(ConvTranspose2d);

}  // namespace ipuml::nn
