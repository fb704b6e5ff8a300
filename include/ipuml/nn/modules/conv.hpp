// nn::Conv1d and nn::Conv2d with PyTorch's options (stride, padding incl. kSame/kValid, dilation,
// groups, bias), default initialisation and repr. Inputs may be batched or unbatched.
#pragma once

#include <cmath>
#include <string>
#include <variant>

#include <ipuml/nn/init.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/nn/modules/common.hpp>

namespace ipuml::nn {

// padding="valid" / padding="same" of PyTorch.
enum class PaddingKind { Valid, Same };
inline constexpr PaddingKind kValid = PaddingKind::Valid;
inline constexpr PaddingKind kSame = PaddingKind::Same;

template <size_t D>
struct ConvOptions {
  using padding_t = std::variant<ExpandingArray<D>, PaddingKind>;

  ConvOptions(int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}

  // Written out (not IPUML_ARG) so both `.padding(1)`, `.padding({1, 2})` and `.padding(kSame)`
  // work.
  ConvOptions& padding(ExpandingArray<D> p) {
    padding_ = p;
    return *this;
  }
  ConvOptions& padding(PaddingKind k) {
    padding_ = k;
    return *this;
  }
  const padding_t& padding() const { return padding_; }

  IPUML_ARG(int64_t, in_channels);
  IPUML_ARG(int64_t, out_channels);
  IPUML_ARG(ExpandingArray<D>, kernel_size);
  IPUML_ARG(ExpandingArray<D>, stride) = 1;
  IPUML_ARG(ExpandingArray<D>, dilation) = 1;
  IPUML_ARG(int64_t, groups) = 1;
  IPUML_ARG(bool, bias) = true;

 private:
  padding_t padding_ = ExpandingArray<D>(0);
};
using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;

namespace detail {

// The shared body of Conv1d/Conv2d: parameters, checks, initialisation, repr.
template <size_t D>
class ConvNdImpl : public Module {
 public:
  ConvNdImpl(const ConvOptions<D>& options_, const char* name) : Module(name), options(options_) {
    const auto& o = options;
    IPUML_CHECK(o.in_channels() > 0 && o.out_channels() > 0, name,
                ": in_channels and "
                "out_channels must be positive, got ",
                o.in_channels(), " and ", o.out_channels());
    IPUML_CHECK(o.groups() > 0, name, ": groups must be positive, got ", o.groups());
    IPUML_CHECK(o.in_channels() % o.groups() == 0, name, ": in_channels=", o.in_channels(),
                " must be divisible by groups=", o.groups());
    IPUML_CHECK(o.out_channels() % o.groups() == 0, name, ": out_channels=", o.out_channels(),
                " must be divisible by groups=", o.groups());
    for (size_t i = 0; i < D; ++i) {
      IPUML_CHECK(o.kernel_size()[i] > 0 && o.stride()[i] > 0 && o.dilation()[i] > 0, name,
                  ": kernel_size, stride and dilation must be positive, got kernel_size=",
                  o.kernel_size().vec(), ", stride=", o.stride().vec(),
                  ", dilation=", o.dilation().vec());
    }
    if (auto* p = std::get_if<ExpandingArray<D>>(&o.padding())) {
      for (size_t i = 0; i < D; ++i)
        IPUML_CHECK((*p)[i] >= 0, name, ": padding must be non-negative, got ", p->vec());
    } else if (std::get<PaddingKind>(o.padding()) == PaddingKind::Same) {
      IPUML_CHECK(o.stride().all_equal(1), name,
                  ": padding='same' is not supported for strided "
                  "convolutions (stride=",
                  o.stride().vec(), ")");
    }
    Shape wshape{o.out_channels(), o.in_channels() / o.groups()};
    for (size_t i = 0; i < D; ++i) wshape.push_back(o.kernel_size()[i]);
    weight = register_parameter("weight", zeros(wshape));
    if (o.bias()) bias = register_parameter("bias", zeros({o.out_channels()}));
    reset_parameters();
  }

  // PyTorch's default: kaiming_uniform_(a = sqrt(5)) for the weight, U(-1/sqrt(fan_in),
  // 1/sqrt(fan_in)) for the bias, drawn in that order.
  void reset_parameters(Generator* gen = nullptr) {
    init::default_weight_and_bias_(weight, bias, gen);
  }

  std::string extra_repr() const override {
    const auto& o = options;
    std::string s = std::to_string(o.in_channels()) + ", " + std::to_string(o.out_channels()) +
                    ", kernel_size=" + repr::py_tuple(o.kernel_size().vec()) +
                    ", stride=" + repr::py_tuple(o.stride().vec());
    if (auto* p = std::get_if<ExpandingArray<D>>(&o.padding())) {
      if (!p->all_equal(0)) s += ", padding=" + repr::py_tuple(p->vec());
    } else {
      s += std::get<PaddingKind>(o.padding()) == PaddingKind::Same ? ", padding=same"
                                                                   : ", padding=valid";
    }
    if (!o.dilation().all_equal(1)) s += ", dilation=" + repr::py_tuple(o.dilation().vec());
    if (o.groups() != 1) s += ", groups=" + std::to_string(o.groups());
    if (!o.bias()) s += ", bias=False";
    return s;
  }

  ConvOptions<D> options;
  Tensor weight;
  Tensor bias;

 protected:
  // Checks rank and channels; adds the batch dim to an unbatched input (returns whether it did).
  bool check_input(const Tensor& x) const {
    const int64_t rank = static_cast<int64_t>(D) + 2;
    IPUML_CHECK(x.dim() == rank || x.dim() == rank - 1, type_name(), ": expected a ", rank - 1,
                "-d (unbatched) or ", rank, "-d (batched) input, got shape ", shape_str(x.shape()));
    const int64_t c = x.size(x.dim() == rank ? 1 : 0);
    IPUML_CHECK(c == options.in_channels(), type_name(), ": expected an input with ",
                options.in_channels(), " channel(s) (in_channels), got ", c,
                " channel(s) in an input of shape ", shape_str(x.shape()));
    return x.dim() == rank - 1;
  }

  // Explicit padding for the op: pads are symmetric except for 'same' with an odd total, where
  // PyTorch puts the extra zero on the right; that one is concatenated here.
  std::pair<Tensor, std::vector<int64_t>> pad_input(Tensor x) const {
    std::vector<int64_t> pad(D, 0);
    if (auto* p = std::get_if<ExpandingArray<D>>(&options.padding())) return {x, p->vec()};
    if (std::get<PaddingKind>(options.padding()) == PaddingKind::Valid) return {x, pad};
    for (size_t i = 0; i < D; ++i) {
      const int64_t total = options.dilation()[i] * (options.kernel_size()[i] - 1);
      pad[i] = total / 2;
      if (total % 2) {
        const int64_t dim = x.dim() - static_cast<int64_t>(D) + static_cast<int64_t>(i);
        Shape zs = x.shape();
        zs[static_cast<size_t>(dim)] = 1;
        x = cat({x, zeros(zs, TensorOptions(x.dtype()).device(x.device()))}, dim);
      }
    }
    return {x, pad};
  }
};

}  // namespace detail

class Conv1dImpl : public detail::ConvNdImpl<1> {
 public:
  explicit Conv1dImpl(const Conv1dOptions& o) : ConvNdImpl<1>(o, "Conv1d") {}
  Conv1dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<1> kernel_size)
      : Conv1dImpl(Conv1dOptions(in_channels, out_channels, kernel_size)) {}

  Tensor forward(const Tensor& input) override {
    const bool unbatched = check_input(input);
    auto [x, pad] = pad_input(unbatched ? unsqueeze(input, 0) : input);
    Tensor y = conv1d(x, weight, bias, options.stride()[0], pad[0], options.dilation()[0],
                      options.groups());
    return unbatched ? squeeze(y, 0) : y;
  }
};
IPUML_MODULE(Conv1d);

class Conv2dImpl : public detail::ConvNdImpl<2> {
 public:
  explicit Conv2dImpl(const Conv2dOptions& o) : ConvNdImpl<2>(o, "Conv2d") {}
  Conv2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}

  Tensor forward(const Tensor& input) override {
    const bool unbatched = check_input(input);
    auto [x, pad] = pad_input(unbatched ? unsqueeze(input, 0) : input);
    Tensor y = conv2d(x, weight, bias, options.stride().vec(), pad, options.dilation().vec(),
                      options.groups());
    return unbatched ? squeeze(y, 0) : y;
  }
};
IPUML_MODULE(Conv2d);

}  // namespace ipuml::nn
