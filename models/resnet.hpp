// torchvision's ResNet (v1.5: the stride sits on the bottleneck's 3x3 conv), resnet18..152, with
// torchvision's parameter names, the CIFAR stem, GroupNorm and Graphcore's pipeline splits.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/ir/trace.hpp>
#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

enum class ResNetNorm { Batch, Group };

// Graphcore's `--norm-type` spellings.
inline ResNetNorm resnet_norm_from_name(const std::string& name) {
  if (name == "batch") return ResNetNorm::Batch;
  if (name == "group") return ResNetNorm::Group;
  fail("ResNet: unknown norm type '", name, "' (expected 'batch' or 'group')");
}

struct ResNetOptions {
  IPUML_ARG(int64_t, num_classes) = 1000;
  // Starts each residual branch as the identity (the last norm's gamma = 0), which helps large
  // batches (Goyal et al.); torchvision's option of the same name.
  IPUML_ARG(bool, zero_init_residual) = false;
  // For 32x32 inputs: a 3x3 stride-1 stem conv and no max-pool, so layer1 still sees 32x32.
  IPUML_ARG(bool, cifar_stem) = false;
  IPUML_ARG(ResNetNorm, norm) = ResNetNorm::Batch;
  IPUML_ARG(int64_t, norm_groups) = 32;
  IPUML_ARG(double, norm_eps) = 1e-5;
  IPUML_ARG(double, bn_momentum) = 0.1;
  // Where a new IPU starts, in forward order: "layer3" (a whole stage) or "layer4/0" (a block),
  // as Graphcore's `--pipeline-splits`; also "avgpool" and "fc". Split i starts IPU i + 1.
  IPUML_ARG(std::vector<std::string>, pipeline_splits);
  // A recomputation checkpoint after the stem and every residual block (Graphcore's
  // `--recompute-mode`): a traced training step keeps only the blocks' outputs for backward.
  IPUML_ARG(bool, recompute_blocks) = false;
};

namespace resnet_detail {

inline std::shared_ptr<nn::Module> make_norm(const ResNetOptions& o, int64_t channels) {
  if (o.norm() == ResNetNorm::Group)
    return nn::GroupNorm(nn::GroupNormOptions(o.norm_groups(), channels).eps(o.norm_eps())).ptr();
  return nn::BatchNorm2d(
             nn::BatchNorm2dOptions(channels).eps(o.norm_eps()).momentum(o.bn_momentum()))
      .ptr();
}

inline nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}
inline nn::Conv2d conv1x1(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false));
}

// act(norm(x) + residual), act = ReLU when `relu`: batch norms run it as one fused pass over x
// (BatchNorm2dImpl::forward_act), group norms op by op.
inline Tensor norm_act(const std::shared_ptr<nn::Module>& norm, const Tensor& x,
                       const Tensor& residual, bool relu) {
  if (auto bn = std::dynamic_pointer_cast<nn::BatchNorm2dImpl>(norm))
    return bn->forward_act(x, residual, relu);
  Tensor y = norm->forward(x);
  if (residual.defined()) y = add(y, residual);
  return relu ? ipuml::relu(y) : y;
}

inline void zero_weight(const std::shared_ptr<nn::Module>& norm) {
  NoGradGuard no_grad;
  for (auto& [name, p] : norm->named_parameters(false))
    if (name == "weight") p.fill_(0.0);
}

}  // namespace resnet_detail

// What both block kinds share: the residual add, and the norm that zero_init_residual zeroes.
class ResNetBlockImpl : public nn::Module {
 public:
  using nn::Module::Module;
  virtual std::shared_ptr<nn::Module> last_norm() const = 0;

  nn::ReLU relu{nullptr};
  nn::Sequential downsample{nullptr};

 protected:
  // relu(norm(pre) + identity), the block's tail.
  Tensor residual(const Tensor& x, const Tensor& pre, const std::shared_ptr<nn::Module>& norm) {
    Tensor identity = downsample ? downsample(x) : x;
    return resnet_detail::norm_act(norm, pre, identity, true);
  }
  void add_downsample(const ResNetOptions& o, int64_t in, int64_t out, int64_t stride) {
    if (stride == 1 && in == out) return;
    downsample = register_module(
        "downsample",
        nn::Sequential(resnet_detail::conv1x1(in, out, stride), resnet_detail::make_norm(o, out)));
  }
};

class BasicBlockImpl : public ResNetBlockImpl {
 public:
  static constexpr int64_t expansion = 1;
  BasicBlockImpl(const ResNetOptions& o, int64_t inplanes, int64_t planes, int64_t stride)
      : ResNetBlockImpl("BasicBlock") {
    using namespace resnet_detail;
    conv1 = register_module("conv1", conv3x3(inplanes, planes, stride));
    bn1 = register_module("bn1", make_norm(o, planes));
    relu = register_module("relu", nn::ReLU(nn::ReLUOptions(true)));
    conv2 = register_module("conv2", conv3x3(planes, planes, 1));
    bn2 = register_module("bn2", make_norm(o, planes));
    add_downsample(o, inplanes, planes * expansion, stride);
  }
  Tensor forward(const Tensor& x) override {
    Tensor out = resnet_detail::norm_act(bn1, conv1(x), Tensor(), true);
    return residual(x, conv2(out), bn2);
  }
  std::shared_ptr<nn::Module> last_norm() const override { return bn2; }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  std::shared_ptr<nn::Module> bn1, bn2;
};

class BottleneckImpl : public ResNetBlockImpl {
 public:
  static constexpr int64_t expansion = 4;
  BottleneckImpl(const ResNetOptions& o, int64_t inplanes, int64_t planes, int64_t stride)
      : ResNetBlockImpl("Bottleneck") {
    using namespace resnet_detail;
    conv1 = register_module("conv1", conv1x1(inplanes, planes, 1));
    bn1 = register_module("bn1", make_norm(o, planes));
    // v1.5: the stride is here, not on conv1 as in the original paper (better accuracy).
    conv2 = register_module("conv2", conv3x3(planes, planes, stride));
    bn2 = register_module("bn2", make_norm(o, planes));
    conv3 = register_module("conv3", conv1x1(planes, planes * expansion, 1));
    bn3 = register_module("bn3", make_norm(o, planes * expansion));
    relu = register_module("relu", nn::ReLU(nn::ReLUOptions(true)));
    add_downsample(o, inplanes, planes * expansion, stride);
  }
  Tensor forward(const Tensor& x) override {
    Tensor out = resnet_detail::norm_act(bn1, conv1(x), Tensor(), true);
    out = resnet_detail::norm_act(bn2, conv2(out), Tensor(), true);
    return residual(x, conv3(out), bn3);
  }
  std::shared_ptr<nn::Module> last_norm() const override { return bn3; }

  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  std::shared_ptr<nn::Module> bn1, bn2, bn3;
};

enum class ResNetBlock { Basic, Bottleneck };

// [B, 3, H, W] -> logits [B, num_classes].
class ResNetImpl : public nn::Module {
 public:
  ResNetImpl(ResNetBlock block, std::vector<int64_t> layers, const ResNetOptions& options_ = {})
      : nn::Module("ResNet"), options(options_), block_(block) {
    IPUML_CHECK(layers.size() == 4, "ResNet: expected 4 stage depths, got ", layers);
    for (int64_t n : layers)
      IPUML_CHECK(n > 0, "ResNet: stage depths must be positive, got ", layers);
    IPUML_CHECK(options.num_classes() > 0, "ResNet: num_classes must be positive, got ",
                options.num_classes());
    IPUML_CHECK(options.norm() != ResNetNorm::Group ||
                    (options.norm_groups() > 0 && 64 % options.norm_groups() == 0),
                "ResNet: norm_groups=", options.norm_groups(),
                " must divide every stage's channel count (64, 128, 256, 512, ...)");
    const auto splits = parse_splits(options.pipeline_splits(), layers);
    if (options.cifar_stem()) {
      conv1 =
          register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 3).padding(1).bias(false)));
    } else {
      conv1 = register_module(
          "conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    }
    bn1 = register_module("bn1", resnet_detail::make_norm(options, 64));
    relu = register_module("relu", nn::ReLU(nn::ReLUOptions(true)));
    if (!options.cifar_stem())
      maxpool =
          register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    const int64_t planes[4] = {64, 128, 256, 512};
    for (size_t i = 0; i < 4; ++i)
      stages_[i] = register_module("layer" + std::to_string(i + 1),
                                   make_layer(planes[i], layers[i], i == 0 ? 1 : 2));
    layer1 = stages_[0], layer2 = stages_[1], layer3 = stages_[2], layer4 = stages_[3];
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    fc = register_module("fc", nn::Linear(512 * expansion(), options.num_classes()));
    reset_parameters();
    apply_pipeline_splits(splits);
  }

  // torchvision's initialisation: Kaiming-normal (fan_out, ReLU) convs, norms at 1/0 (batch
  // norms' running statistics reset too), the default Linear; with zero_init_residual each
  // block's last norm gamma at 0.
  void reset_parameters() {
    NoGradGuard no_grad;
    for (auto& [name, m] : named_modules()) {
      if (auto conv = std::dynamic_pointer_cast<nn::Conv2dImpl>(m)) {
        nn::init::kaiming_normal_(conv->weight, 0.0, nn::init::FanMode::FanOut,
                                  nn::init::Nonlinearity::ReLU);
      } else if (auto bn = std::dynamic_pointer_cast<nn::BatchNorm2dImpl>(m)) {
        bn->reset_parameters();
      } else if (auto gn = std::dynamic_pointer_cast<nn::GroupNormImpl>(m)) {
        gn->weight.fill_(1.0);
        gn->bias.fill_(0.0);
      }
    }
    fc->reset_parameters();
    if (options.zero_init_residual())
      for (auto& stage : stages_)
        for (auto& [name, blk] : *stage)
          resnet_detail::zero_weight(std::static_pointer_cast<ResNetBlockImpl>(blk)->last_norm());
  }

  Tensor forward(const Tensor& x) override {
    IPUML_CHECK(x.dim() == 4 && x.size(1) == 3,
                "ResNet: expected an input [B, 3, H, W], got shape ", shape_str(x.shape()));
    Tensor h = resnet_detail::norm_act(bn1, conv1(x), Tensor(), true);
    if (maxpool) h = maxpool(h);
    if (options.recompute_blocks()) h = recomputation_checkpoint(h);
    for (auto& stage : stages_) h = run_stage(stage, h, options.recompute_blocks());
    return fc(flatten(avgpool(h), 1));
  }

  int64_t expansion() const {
    return block_ == ResNetBlock::Basic ? BasicBlockImpl::expansion : BottleneckImpl::expansion;
  }
  // How many IPUs the pipeline splits use (1 without splits).
  int64_t num_ipus() const { return static_cast<int64_t>(options.pipeline_splits().size()) + 1; }

  ResNetOptions options;
  nn::Conv2d conv1{nullptr};
  std::shared_ptr<nn::Module> bn1;
  nn::ReLU relu{nullptr};
  nn::MaxPool2d maxpool{nullptr};
  nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};

 private:
  nn::Sequential make_layer(int64_t planes, int64_t blocks, int64_t stride) {
    nn::Sequential seq;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t s = b == 0 ? stride : 1;
      if (block_ == ResNetBlock::Basic)
        seq->push_back(std::make_shared<BasicBlockImpl>(options, inplanes_, planes, s));
      else
        seq->push_back(std::make_shared<BottleneckImpl>(options, inplanes_, planes, s));
      inplanes_ = planes * expansion();
    }
    return seq;
  }

  // Sequential::forward calls its children directly, so BeginBlock on a single block (split
  // "layer4/0") is honoured here, where the blocks are run one by one.
  static Tensor run_stage(const nn::Sequential& stage, Tensor h, bool checkpoint) {
    if (stage->block_placement() >= 0) ir::PlacementGuard::set_current(stage->block_placement());
    for (auto& [name, blk] : *stage) {
      if (blk->block_placement() >= 0) ir::PlacementGuard::set_current(blk->block_placement());
      h = blk->forward(h);
      if (checkpoint) h = recomputation_checkpoint(h);
    }
    return h;
  }

  // A place in forward order where an IPU can start: a stage (block -1: the whole stage), a
  // block of a stage, avgpool (stage 4) or fc (stage 5).
  struct SplitPoint {
    int64_t stage = 0, block = -1;
    int64_t order() const { return 1000 * stage + std::max<int64_t>(block, 0); }
  };

  // Checked before any weight is made, so a wrong name fails at once.
  static std::vector<SplitPoint> parse_splits(const std::vector<std::string>& splits,
                                              const std::vector<int64_t>& depths) {
    std::vector<SplitPoint> out;
    for (size_t i = 0; i < splits.size(); ++i) {
      out.push_back(parse_split(splits[i], depths));
      IPUML_CHECK(i == 0 || out[i].order() > out[i - 1].order(), "ResNet: pipeline split '",
                  splits[i], "' does not come after '", splits[i - 1],
                  "' in forward order (splits must be listed in the order the model runs them, "
                  "each at most once)");
    }
    return out;
  }

  static SplitPoint parse_split(const std::string& name, const std::vector<int64_t>& depths) {
    if (name == "avgpool") return {4, -1};
    if (name == "fc") return {5, -1};
    const size_t slash = name.find('/');
    const std::string stage = name.substr(0, slash);
    SplitPoint p{-1, -1};
    for (int64_t k = 0; k < 4; ++k)
      if (stage == "layer" + std::to_string(k + 1)) p.stage = k;
    IPUML_CHECK(p.stage >= 0, "ResNet: unknown pipeline split '", name,
                "' (expected 'layer<1-4>', 'layer<1-4>/<block>', 'avgpool' or 'fc')");
    if (slash == std::string::npos) return p;
    const std::string idx = name.substr(slash + 1);
    const int64_t n = depths[static_cast<size_t>(p.stage)];
    for (int64_t k = 0; k < n; ++k)
      if (idx == std::to_string(k)) p.block = k;
    IPUML_CHECK(p.block >= 0, "ResNet: pipeline split '", name, "' names block '", idx, "' but ",
                stage, " has blocks 0..", n - 1);
    return p;
  }

  // Split i starts IPU i + 1 (PopTorch's BeginBlock on that module).
  void apply_pipeline_splits(const std::vector<SplitPoint>& points) {
    for (size_t i = 0; i < points.size(); ++i) {
      const SplitPoint& p = points[i];
      std::shared_ptr<nn::Module> m;
      if (p.stage == 4) {
        m = avgpool.ptr();
      } else if (p.stage == 5) {
        m = fc.ptr();
      } else {
        const auto& seq = stages_[static_cast<size_t>(p.stage)];
        m = p.block < 0 ? seq.ptr() : seq->ptr(static_cast<size_t>(p.block));
      }
      m->begin_block(static_cast<int>(i) + 1);
    }
  }

  ResNetBlock block_;
  int64_t inplanes_ = 64;
  std::array<nn::Sequential, 4> stages_{nullptr, nullptr, nullptr, nullptr};
};
IPUML_MODULE(ResNet);

inline ResNet resnet18(const ResNetOptions& o = {}) {
  return ResNet(ResNetBlock::Basic, std::vector<int64_t>{2, 2, 2, 2}, o);
}
inline ResNet resnet34(const ResNetOptions& o = {}) {
  return ResNet(ResNetBlock::Basic, std::vector<int64_t>{3, 4, 6, 3}, o);
}
inline ResNet resnet50(const ResNetOptions& o = {}) {
  return ResNet(ResNetBlock::Bottleneck, std::vector<int64_t>{3, 4, 6, 3}, o);
}
inline ResNet resnet101(const ResNetOptions& o = {}) {
  return ResNet(ResNetBlock::Bottleneck, std::vector<int64_t>{3, 4, 23, 3}, o);
}
inline ResNet resnet152(const ResNetOptions& o = {}) {
  return ResNet(ResNetBlock::Bottleneck, std::vector<int64_t>{3, 8, 36, 3}, o);
}

// By torchvision's name: "resnet18", "resnet34", "resnet50", "resnet101" or "resnet152".
inline ResNet resnet(const std::string& name, const ResNetOptions& o = {}) {
  if (name == "resnet18") return resnet18(o);
  if (name == "resnet34") return resnet34(o);
  if (name == "resnet50") return resnet50(o);
  if (name == "resnet101") return resnet101(o);
  if (name == "resnet152") return resnet152(o);
  fail("ResNet: unknown model '", name,
       "' (expected resnet18, resnet34, resnet50, resnet101 or resnet152)");
}

}  // namespace ipuml::models
