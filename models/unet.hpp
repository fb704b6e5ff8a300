// UNet 2-D for segmentation as Cerebras modelzoo builds it (vision/pytorch/unet: model.py,
// layers/Encoder.py, Decoder.py, UNetBlock.py) and as ALCF's SambaNova UNet example runs it, with
// modelzoo's parameter names (so checkpoints read like the original's), its options checked
// before any allocation, its BCE-with-logits loss and the dice and IoU scores of its evaluation.
//
// The network: encoder blocks of `convs_per_block` 3x3 "same" convolutions (conv, optional
// BatchNorm2d, ReLU), each followed by a 2x2 max-pool; a bottleneck block; decoder stages of a
// 2x2 stride-2 ConvTranspose2d, the concatenation (torch.cat on channels) of its output with the
// encoder block's output of the same resolution, and a block; a final 1x1 convolution (with
// bias) to `num_classes` logit channels. One logit channel is binary segmentation (modelzoo's
// num_classes: 2 with loss: bce); two or more are softmax classes (loss: ssce).
//
// Normalisation: modelzoo's model code has no norm layer unless `norm_layer` is given, and then
// enable_bias defaults to false (the norm's beta does the bias's work); its Severstal config
// sets norm_layer: batchnorm2d. The default here is modelzoo's code default (no norm, biases
// on); norm(true) gives the Severstal config's BatchNorm2d after every 3x3 conv, biases off.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

struct UNetConfig {
  // Sizes come from user files, so each is bounded (and the total overflow-checked) before a
  // tensor is sized from it.
  static constexpr int64_t kMaxDepth = 12;
  static constexpr int64_t kMaxWidth = int64_t{1} << 16;
  static constexpr int64_t kMaxConvs = 16;
  static constexpr int64_t kMaxParameters = int64_t{1} << 32;

  // modelzoo's params_severstal_binary / ALCF's example at 256x256: filters 64 .. 512 and a
  // bottleneck of 1024 (the original paper's widths), one grey input channel, one logit.
  static UNetConfig unet_256() { return UNetConfig(); }
  // A 16x16 net small enough for unit tests: filters {4, 8}, bottleneck 16. Kaiming-uniform
  // weights and zero biases: with PyTorch's default initialisation (small weights, biases of
  // either sign) a block of four channels often starts with every ReLU off, and stays so.
  static UNetConfig tiny() {
    return UNetConfig().encoder_filters({4, 8}).bottleneck(16).height(16).width(16).initializer(
        "kaiming_uniform");
  }

  // Blocks before the bottleneck, each halving the resolution.
  int64_t depth() const { return static_cast<int64_t>(encoder_filters_.size()); }
  // decoder_filters, or the encoder's filters in reverse when it is not given (the U shape).
  std::vector<int64_t> decoder_widths() const {
    if (!decoder_filters_.empty()) return decoder_filters_;
    return std::vector<int64_t>(encoder_filters_.rbegin(), encoder_filters_.rend());
  }
  // modelzoo's enable_bias: given, or on exactly when there is no norm layer.
  bool has_bias() const { return enable_bias_.value_or(!norm_); }

  static bool known_initializer(const std::string& name) {
    return name == "pytorch" || name == "glorot_uniform" || name == "glorot_normal" ||
           name == "kaiming_uniform" || name == "kaiming_normal";
  }

  // Weights, biases and (with norm) the norms' weight and bias; -1 if the count overflows int64.
  int64_t num_parameters() const {
    int64_t total = 0;
    bool overflow = false;
    const bool bias = has_bias();
    auto add = [&](int64_t in, int64_t out, int64_t k, bool with_bias, bool with_norm) {
      int64_t w = 0;
      overflow = overflow || __builtin_mul_overflow(in, out, &w) ||
                 __builtin_mul_overflow(w, k * k, &w) ||
                 __builtin_add_overflow(w, (with_bias ? out : 0) + (with_norm ? 2 * out : 0), &w) ||
                 __builtin_add_overflow(total, w, &total);
    };
    auto block = [&](int64_t in, int64_t out) {
      for (int64_t c = 0; c < convs_per_block_; ++c, in = out)
        add(in, out, kernel_size_, bias, norm_);
    };
    int64_t in = in_channels_;
    for (int64_t f : encoder_filters_) block(in, f), in = f;
    block(in, bottleneck_);
    in = bottleneck_;
    const auto dec = decoder_widths();
    for (size_t i = 0; i < dec.size(); ++i) {
      add(in, dec[i], 2, bias, false);  // the up-convolution
      block(dec[i] + encoder_filters_[encoder_filters_.size() - 1 - i], dec[i]);
      in = dec[i];
    }
    add(in, num_classes_, 1, true, false);
    return overflow ? -1 : total;
  }

  void validate() const {
    const char* who = "UNetConfig: ";
    IPUML_CHECK(in_channels_ >= 1 && in_channels_ <= kMaxWidth, who, "in_channels must be in [1, ",
                kMaxWidth, "], got ", in_channels_);
    IPUML_CHECK(num_classes_ >= 1 && num_classes_ <= kMaxWidth, who,
                "num_classes (logit channels: 1 for binary) must be in [1, ", kMaxWidth, "], got ",
                num_classes_);
    IPUML_CHECK(depth() >= 1 && depth() <= kMaxDepth, who, "encoder_filters must have 1 to ",
                kMaxDepth, " entries, got ", encoder_filters_.size());
    for (int64_t f : encoder_filters_)
      IPUML_CHECK(f >= 1 && f <= kMaxWidth, who, "encoder_filters must be in [1, ", kMaxWidth,
                  "], got ", encoder_filters_);
    IPUML_CHECK(bottleneck_ >= 1 && bottleneck_ <= kMaxWidth, who, "bottleneck must be in [1, ",
                kMaxWidth, "], got ", bottleneck_);
    IPUML_CHECK(decoder_filters_.empty() || decoder_filters_.size() == encoder_filters_.size(), who,
                "decoder_filters needs one entry per encoder block (", depth(), "), got ",
                decoder_filters_.size(), " (", decoder_filters_, ")");
    for (int64_t f : decoder_filters_)
      IPUML_CHECK(f >= 1 && f <= kMaxWidth, who, "decoder_filters must be in [1, ", kMaxWidth,
                  "], got ", decoder_filters_);
    IPUML_CHECK(convs_per_block_ >= 1 && convs_per_block_ <= kMaxConvs, who,
                "convs_per_block must be in [1, ", kMaxConvs, "], got ", convs_per_block_);
    IPUML_CHECK(kernel_size_ >= 1 && kernel_size_ <= 15 && kernel_size_ % 2 == 1, who,
                "kernel_size must be odd and in [1, 15] (padding keeps the size), got ",
                kernel_size_);
    IPUML_CHECK(activation_ == "relu", who, "activation '", activation_,
                "' is not supported (ipuml's UNet builds relu only)");
    IPUML_CHECK(known_initializer(initializer_), who, "initializer '", initializer_,
                "' is not one of pytorch, glorot_uniform, glorot_normal, kaiming_uniform, "
                "kaiming_normal");
    check_image_size(height_, width_, who);
    const int64_t n = num_parameters();
    IPUML_CHECK(n >= 0 && n <= kMaxParameters, who, "the network needs ",
                n < 0 ? std::string("more than 2^63") : std::to_string(n),
                " parameters, expected at most 2^32");
  }

  // Every pool halves the size: an image size must be a multiple of 2^depth.
  void check_image_size(int64_t h, int64_t w, const char* who) const {
    const int64_t m = int64_t{1} << depth();
    IPUML_CHECK(h >= m && w >= m && h % m == 0 && w % m == 0, who, "an image of ", h, "x", w,
                " cannot go through ", depth(), " 2x2 max-pools: height and width must be ",
                "positive multiples of 2^", depth(), " = ", m);
  }

  IPUML_ARG(int64_t, in_channels) = 1;
  // Logit channels of the output: 1 for binary segmentation (BCE with logits), >= 2 for softmax
  // classes (cross entropy).
  IPUML_ARG(int64_t, num_classes) = 1;
  IPUML_ARG(std::vector<int64_t>, encoder_filters) = {64, 128, 256, 512};
  IPUML_ARG(int64_t, bottleneck) = 1024;
  // Empty: the encoder's filters in reverse.
  IPUML_ARG(std::vector<int64_t>, decoder_filters);
  IPUML_ARG(int64_t, convs_per_block) = 2;
  IPUML_ARG(int64_t, kernel_size) = 3;
  IPUML_ARG(bool, norm) = false;
  IPUML_ARG(std::optional<bool>, enable_bias);
  IPUML_ARG(std::string, activation) = "relu";
  // "pytorch" keeps each layer's PyTorch default; the others are modelzoo's `initializer` names
  // for the conv and up-conv weights, with biases zero and norms at 1 / 0 (as modelzoo's
  // reset_parameters with bias_initializer: zeros).
  IPUML_ARG(std::string, initializer) = "pytorch";
  // The image size the config is for (modelzoo's image_shape), checked against the depth; the
  // network itself takes any multiple of 2^depth.
  IPUML_ARG(int64_t, height) = 256;
  IPUML_ARG(int64_t, width) = 256;
};

// modelzoo's UNetBlock: `layers`, a Sequential of ConvNormActBlocks (each a Sequential of the
// conv, the norm when there is one, and the activation), so parameters read
// `layers.<conv>.0.weight` and `layers.<conv>.1.running_mean` as in modelzoo's checkpoints.
class UNetBlockImpl : public nn::Module {
 public:
  UNetBlockImpl(const UNetConfig& c, int64_t in, int64_t out) : nn::Module("UNetBlock") {
    layers = register_module("layers", nn::Sequential());
    for (int64_t i = 0; i < c.convs_per_block(); ++i, in = out) {
      nn::Sequential cna;
      cna->push_back(nn::Conv2d(nn::Conv2dOptions(in, out, c.kernel_size())
                                    .padding(c.kernel_size() / 2)
                                    .bias(c.has_bias())));
      if (c.norm()) cna->push_back(nn::BatchNorm2d(out));
      cna->push_back(nn::ReLU());
      layers->push_back(cna);
    }
  }
  Tensor forward(const Tensor& x) override { return layers(x); }

  nn::Sequential layers{nullptr};
};
IPUML_MODULE(UNetBlock);

// modelzoo's Encoder: the blocks and a 2x2 max-pool after each; forward returns the pooled
// output and keeps each block's output (before its pool) for the decoder's skip connections.
class UNetEncoderImpl : public nn::Module {
 public:
  explicit UNetEncoderImpl(const UNetConfig& c) : nn::Module("Encoder") {
    unet_blocks = register_module("unet_blocks", nn::ModuleList());
    pooling_layers = register_module("pooling_layers", nn::ModuleList());
    int64_t in = c.in_channels();
    for (int64_t f : c.encoder_filters()) {
      unet_blocks->push_back(UNetBlock(c, in, f));
      pooling_layers->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
      in = f;
    }
  }
  Tensor forward(const Tensor& x, std::vector<Tensor>& skips) {
    Tensor h = x;
    for (size_t i = 0; i < unet_blocks->size(); ++i) {
      h = unet_blocks[i]->forward(h);
      skips.push_back(h);
      h = pooling_layers[i]->forward(h);
    }
    return h;
  }

  nn::ModuleList unet_blocks{nullptr}, pooling_layers{nullptr};
};
IPUML_MODULE(UNetEncoder);

// modelzoo's Decoder: per stage a 2x2 stride-2 transposed conv (bias as enable_bias), the
// concatenation [upsampled, skip] on channels, and a block.
class UNetDecoderImpl : public nn::Module {
 public:
  explicit UNetDecoderImpl(const UNetConfig& c) : nn::Module("Decoder") {
    // modelzoo registers the blocks first, so checkpoints list them before the up-convolutions.
    unet_blocks = register_module("unet_blocks", nn::ModuleList());
    transpose_layers = register_module("transpose_layers", nn::ModuleList());
    const auto dec = c.decoder_widths();
    const auto& enc = c.encoder_filters();
    int64_t in = c.bottleneck();
    for (size_t i = 0; i < dec.size(); ++i) {
      transpose_layers->push_back(nn::ConvTranspose2d(
          nn::ConvTranspose2dOptions(in, dec[i], 2).stride(2).bias(c.has_bias())));
      unet_blocks->push_back(UNetBlock(c, dec[i] + enc[enc.size() - 1 - i], dec[i]));
      in = dec[i];
    }
  }
  Tensor forward(const Tensor& x, const std::vector<Tensor>& skips) {
    Tensor h = x;
    for (size_t i = 0; i < unet_blocks->size(); ++i) {
      h = transpose_layers[i]->forward(h);
      h = cat({h, skips[skips.size() - 1 - i]}, 1);
      h = unet_blocks[i]->forward(h);
    }
    return h;
  }

  nn::ModuleList transpose_layers{nullptr}, unet_blocks{nullptr};
};
IPUML_MODULE(UNetDecoder);

// x [B, in_channels, H, W] (H and W multiples of 2^depth) -> logits [B, num_classes, H, W].
class UNetImpl : public nn::Module {
 public:
  explicit UNetImpl(const UNetConfig& c = UNetConfig()) : nn::Module("UNet"), config(c) {
    config.validate();
    encoder = register_module("encoder", UNetEncoder(config));
    bottleneck = register_module(
        "bottleneck", UNetBlock(config, config.encoder_filters().back(), config.bottleneck()));
    decoder = register_module("decoder", UNetDecoder(config));
    nn::Sequential fc;
    fc->push_back(
        nn::Conv2d(nn::Conv2dOptions(config.decoder_widths().back(), config.num_classes(), 1)));
    final_conv = register_module("final_conv", fc);
    reset_parameters();
  }

  // modelzoo's reset_parameters for its named initializers; "pytorch" leaves each layer's own.
  void reset_parameters() {
    const std::string& init = config.initializer();
    if (init == "pytorch") return;
    NoGradGuard no_grad;
    for (auto& [name, m] : named_modules()) {
      Tensor w, b;
      if (auto conv = std::dynamic_pointer_cast<nn::Conv2dImpl>(m)) {
        w = conv->weight, b = conv->bias;
      } else if (auto up = std::dynamic_pointer_cast<nn::ConvTranspose2dImpl>(m)) {
        w = up->weight, b = up->bias;
      } else if (auto bn = std::dynamic_pointer_cast<nn::BatchNorm2dImpl>(m)) {
        bn->reset_parameters();
        continue;
      } else {
        continue;
      }
      if (init == "glorot_uniform") nn::init::xavier_uniform_(w);
      if (init == "glorot_normal") nn::init::xavier_normal_(w);
      if (init == "kaiming_uniform")
        nn::init::kaiming_uniform_(w, 0.0, nn::init::FanMode::FanIn, nn::init::Nonlinearity::ReLU);
      if (init == "kaiming_normal")
        nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::FanIn, nn::init::Nonlinearity::ReLU);
      if (b.defined()) nn::init::zeros_(b);
    }
  }

  Tensor forward(const Tensor& x) override {
    IPUML_CHECK(x.dim() == 4 && x.size(1) == config.in_channels(), "UNet: expected an input [B, ",
                config.in_channels(), ", H, W], got shape ", shape_str(x.shape()));
    config.check_image_size(x.size(2), x.size(3), "UNet: ");
    std::vector<Tensor> skips;
    Tensor h = encoder->forward(x, skips);
    h = bottleneck(h);
    h = decoder->forward(h, skips);
    return final_conv(h);
  }

  // modelzoo's loss for this head: BCE with logits against a float mask [B, 1, H, W] (or
  // [B, H, W]) for one logit channel, cross entropy against int64 classes [B, H, W] otherwise.
  Tensor loss(const Tensor& logits, const Tensor& target) const;

  UNetConfig config;
  UNetEncoder encoder{nullptr};
  UNetBlock bottleneck{nullptr};
  UNetDecoder decoder{nullptr};
  nn::Sequential final_conv{nullptr};
};
IPUML_MODULE(UNet);

// torch.nn.functional.binary_cross_entropy_with_logits, composed in PyTorch's own stable form:
// (1 - y) x + m + log(exp(-m) + exp(-x - m)) with m = max(-x, 0), so no exp overflows and the
// log's argument is in [1, 2]. m cancels in the derivative, whose value is sigmoid(x) - y
// exactly (whatever the max's subgradient at 0). target is a float tensor of logits' shape
// (values in [0, 1]; soft labels allowed).
inline Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                               Reduction reduction = Reduction::Mean) {
  IPUML_CHECK(logits.shape() == target.shape(),
              "binary_cross_entropy_with_logits: logits of shape ", shape_str(logits.shape()),
              " and target of shape ", shape_str(target.shape()), " differ");
  IPUML_CHECK(is_floating(target.dtype()),
              "binary_cross_entropy_with_logits: expected a floating target (0/1 or soft "
              "labels), got dtype ",
              dtype_name(target.dtype()));
  const Tensor m = relu(neg(logits));
  const Tensor loss =
      add(add(mul(1.0 - target, logits), m), log(add(exp(neg(m)), exp(sub(neg(logits), m)))));
  if (reduction == Reduction::Sum) return sum(loss);
  if (reduction == Reduction::Mean) return mean(loss);
  return loss;
}

inline Tensor UNetImpl::loss(const Tensor& logits, const Tensor& target) const {
  if (config.num_classes() == 1) {
    const Tensor t = target.dim() == 3 ? unsqueeze(target, 1) : target;
    return binary_cross_entropy_with_logits(logits,
                                            t.dtype() == logits.dtype() ? t : t.to(logits.dtype()));
  }
  return cross_entropy(logits, target);
}

// Overlap of a binary prediction with a binary mask, counted over every pixel of the batch (as
// modelzoo's DiceCoefficient and MeanIOU metrics accumulate their confusion matrix).
struct SegmentationCounts {
  double intersection = 0;  // predicted and true
  double predicted = 0;
  double actual = 0;
  // 2|P n T| / (|P| + |T|); 1 when both are empty (nothing to find, nothing found).
  double dice() const {
    const double d = predicted + actual;
    return d == 0 ? 1.0 : 2.0 * intersection / d;
  }
  // |P n T| / |P u T|; 1 when both are empty.
  double iou() const {
    const double u = predicted + actual - intersection;
    return u == 0 ? 1.0 : intersection / u;
  }
};

// One logit channel [B, 1, H, W] thresholded at 0 (sigmoid 0.5) against a 0/1 mask of the same
// number of elements ([B, 1, H, W] or [B, H, W]).
inline SegmentationCounts segmentation_counts(const Tensor& logits, const Tensor& mask) {
  IPUML_CHECK(logits.dim() == 4 && logits.size(1) == 1,
              "segmentation_counts: expected binary logits [B, 1, H, W], got shape ",
              shape_str(logits.shape()));
  IPUML_CHECK(mask.numel() == logits.numel(), "segmentation_counts: a mask of shape ",
              shape_str(mask.shape()), " for logits of shape ", shape_str(logits.shape()));
  NoGradGuard no_grad;
  const Tensor p = gt(logits, 0.0).to(kFloat32);
  const Tensor t = gt(reshape(mask, logits.shape()), 0.5).to(kFloat32);
  SegmentationCounts c;
  c.intersection = sum(mul(p, t)).item<double>();
  c.predicted = sum(p).item<double>();
  c.actual = sum(t).item<double>();
  return c;
}

inline double dice_score(const Tensor& logits, const Tensor& mask) {
  return segmentation_counts(logits, mask).dice();
}
inline double iou_score(const Tensor& logits, const Tensor& mask) {
  return segmentation_counts(logits, mask).iou();
}

}  // namespace ipuml::models
