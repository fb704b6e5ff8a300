// nn modules against PyTorch 1.13 (tests/golden/nn.json, made by tests/golden/gen_nn.py): reprs,
// the MNIST tutorial network, BatchNorm running statistics over steps, module-level logic, losses.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <ipuml/nn/nn.hpp>

#include "../support/golden.hpp"

using namespace ipuml;
using ipuml::testing::formula_weights;
using ipuml::testing::load_golden;
using ipuml::testing::require_close;
using ipuml::testing::tensor_from_json;
using nlohmann::json;

namespace {

const json& golden() {
  static const json j = load_golden("nn.json");
  return j;
}

// The MNIST tutorial's Block: Conv2d -> MaxPool2d -> ReLU.
struct BlockImpl : nn::Module {
  BlockImpl(int64_t in_channels, int64_t num_filters, int64_t kernel_size, int64_t pool_size)
      : Module("Block") {
    conv = register_module("conv",
                           nn::Conv2d(nn::Conv2dOptions(in_channels, num_filters, kernel_size)));
    pool = register_module("pool", nn::MaxPool2d(nn::MaxPool2dOptions(pool_size)));
    relu = register_module("relu", nn::ReLU());
  }
  Tensor forward(const Tensor& x) override { return relu(pool(conv(x))); }
  nn::Conv2d conv{nullptr};
  nn::MaxPool2d pool{nullptr};
  nn::ReLU relu{nullptr};
};
IPUML_MODULE(Block);

struct NetworkImpl : nn::Module {
  NetworkImpl() : Module("Network") {
    layer1 = register_module("layer1", Block(1, 32, 3, 2));
    layer2 = register_module("layer2", Block(32, 64, 3, 2));
    layer3 = register_module("layer3", nn::Linear(1600, 128));
    layer3_act = register_module("layer3_act", nn::ReLU());
    layer3_dropout = register_module("layer3_dropout", nn::Dropout(0.5));
    layer4 = register_module("layer4", nn::Linear(128, 10));
    softmax = register_module("softmax", nn::Softmax(1));
  }
  Tensor forward(const Tensor& input) override {
    Tensor x = layer2(layer1(input)).view({-1, 1600});
    x = layer3_act(layer3(x));
    return softmax(layer4(layer3_dropout(x)));
  }
  Block layer1{nullptr}, layer2{nullptr};
  nn::Linear layer3{nullptr}, layer4{nullptr};
  nn::ReLU layer3_act{nullptr};
  nn::Dropout layer3_dropout{nullptr};
  nn::Softmax softmax{nullptr};
};
IPUML_MODULE(Network);

nn::StateDict state_from_json(const json& j) {
  nn::StateDict d;
  for (auto& [k, v] : j.items()) d.emplace_back(k, tensor_from_json(v));
  return d;
}

std::vector<int64_t> ints(const json& j) { return j.get<std::vector<int64_t>>(); }

// Every module of gen_nn.py's reprs(), built with the same options.
std::shared_ptr<nn::Module> build_repr_case(const std::string& name) {
  using namespace nn;
  static const std::map<std::string, std::function<std::shared_ptr<Module>()>> m = {
      {"linear", [] { return Linear(1600, 128).ptr(); }},
      {"linear_nobias", [] { return Linear(LinearOptions(3, 4).bias(false)).ptr(); }},
      {"identity", [] { return Identity().ptr(); }},
      {"conv1d", [] { return Conv1d(4, 30, 4).ptr(); }},
      {"conv1d_opts",
       [] {
         return Conv1d(
                    Conv1dOptions(4, 8, 5).stride(2).padding(1).dilation(3).groups(2).bias(false))
             .ptr();
       }},
      {"conv2d", [] { return Conv2d(1, 32, 3).ptr(); }},
      {"conv2d_opts",
       [] {
         return Conv2d(
                    Conv2dOptions(3, 8, {3, 5}).stride(2).padding({1, 2}).dilation(2).bias(false))
             .ptr();
       }},
      {"conv2d_groups", [] { return Conv2d(Conv2dOptions(4, 8, 3).padding(1).groups(2)).ptr(); }},
      {"conv2d_same", [] { return Conv2d(Conv2dOptions(1, 2, 4).padding(kSame)).ptr(); }},
      {"conv2d_valid", [] { return Conv2d(Conv2dOptions(1, 2, 3).padding(kValid)).ptr(); }},
      {"convtranspose2d_unet",
       [] { return ConvTranspose2d(ConvTranspose2dOptions(64, 32, 2).stride(2)).ptr(); }},
      {"convtranspose2d_outpad",
       [] {
         return ConvTranspose2d(
                    ConvTranspose2dOptions(8, 4, 3).stride(2).padding(1).output_padding(1))
             .ptr();
       }},
      {"convtranspose2d_opts",
       [] {
         return ConvTranspose2d(ConvTranspose2dOptions(4, 6, {3, 2})
                                    .stride({2, 1})
                                    .padding(1)
                                    .output_padding({1, 0})
                                    .groups(2)
                                    .bias(false)
                                    .dilation(2))
             .ptr();
       }},
      {"maxpool1d", [] { return MaxPool1d(4).ptr(); }},
      {"maxpool1d_opts", [] { return MaxPool1d(MaxPool1dOptions(3).stride(2).padding(1)).ptr(); }},
      {"maxpool2d", [] { return MaxPool2d(2).ptr(); }},
      {"maxpool2d_opts",
       [] {
         return MaxPool2d(MaxPool2dOptions({2, 3}).stride(1).padding(1)).ptr();
       }},
      {"avgpool2d", [] { return AvgPool2d(2).ptr(); }},
      {"avgpool2d_opts",
       [] {
         return AvgPool2d(AvgPool2dOptions(3).stride({2, 1}).padding(1).count_include_pad(false))
             .ptr();
       }},
      {"adaptiveavgpool2d",
       [] {
         return AdaptiveAvgPool2d(AdaptiveAvgPool2dOptions({1, 1})).ptr();
       }},
      {"adaptiveavgpool2d_int", [] { return AdaptiveAvgPool2d(7).ptr(); }},
      {"batchnorm1d", [] { return BatchNorm1d(4320).ptr(); }},
      {"batchnorm1d_opts",
       [] { return BatchNorm1d(BatchNormOptions(4320).track_running_stats(false)).ptr(); }},
      {"batchnorm2d_opts",
       [] {
         return BatchNorm2d(BatchNormOptions(16).eps(1e-3).momentum(std::nullopt).affine(false))
             .ptr();
       }},
      {"groupnorm", [] { return GroupNorm(2, 4).ptr(); }},
      {"groupnorm_opts",
       [] { return GroupNorm(GroupNormOptions(4, 8).eps(1e-6).affine(false)).ptr(); }},
      {"layernorm", [] { return LayerNorm(768).ptr(); }},
      {"layernorm_opts",
       [] {
         return LayerNorm(LayerNormOptions({3, 4}).eps(1e-3).elementwise_affine(false)).ptr();
       }},
      {"embedding", [] { return Embedding(30522, 768).ptr(); }},
      {"embedding_pad", [] { return Embedding(EmbeddingOptions(10, 3).padding_idx(-1)).ptr(); }},
      {"dropout", [] { return Dropout(0.5).ptr(); }},
      {"dropout_opts", [] { return Dropout(DropoutOptions(0.05)).ptr(); }},
      {"relu", [] { return ReLU().ptr(); }},
      {"relu_inplace", [] { return ReLU(ReLUOptions(true)).ptr(); }},
      {"gelu", [] { return GELU().ptr(); }},
      {"gelu_tanh", [] { return GELU(GELUOptions().approximate("tanh")).ptr(); }},
      {"tanh", [] { return Tanh().ptr(); }},
      {"sigmoid", [] { return Sigmoid().ptr(); }},
      {"softmax", [] { return Softmax(1).ptr(); }},
      {"logsoftmax", [] { return LogSoftmax(-1).ptr(); }},
      {"flatten", [] { return Flatten().ptr(); }},
      {"flatten_opts", [] { return Flatten(FlattenOptions().start_dim(0).end_dim(2)).ptr(); }},
      {"crossentropyloss", [] { return CrossEntropyLoss().ptr(); }},
      {"crossentropyloss_opts",
       [] {
         return CrossEntropyLoss(CrossEntropyLossOptions().reduction(kSum).label_smoothing(0.1))
             .ptr();
       }},
      {"nllloss", [] { return NLLLoss().ptr(); }},
      {"mseloss", [] { return MSELoss(MSELossOptions().reduction(kNone)).ptr(); }},
      {"crossentropyloss_weight",
       [] {
         return CrossEntropyLoss(CrossEntropyLossOptions().weight(ones({3})).ignore_index(2)).ptr();
       }},
      {"multiheadattention", [] { return MultiheadAttention(8, 2).ptr(); }},
      {"multiheadattention_opts",
       [] {
         return MultiheadAttention(MultiheadAttentionOptions(8, 4)
                                       .dropout(0.1)
                                       .bias(false)
                                       .kdim(6)
                                       .vdim(4)
                                       .batch_first(true))
             .ptr();
       }},
      {"sequential",
       [] {
         return Sequential(Conv1d(4, 30, 4), MaxPool1d(4), ReLU(), Flatten(),
                           BatchNorm1d(BatchNormOptions(4320).track_running_stats(false)),
                           Linear(4320, 512), ReLU(), Dropout(0.05))
             .ptr();
       }},
      {"modulelist",
       [] { return ModuleList(Linear(2, 3), ReLU(), Sequential(Linear(3, 3), Tanh())).ptr(); }},
  };
  auto it = m.find(name);
  REQUIRE(it != m.end());
  return it->second();
}

}  // namespace

TEST_CASE("nn reprs match PyTorch 1.13", "[nn][golden]") {
  for (auto& c : golden().at("reprs")) {
    const std::string name = c.at("name");
    INFO("case " << name);
    CHECK(build_repr_case(name)->to_string() == c.at("repr").get<std::string>());
  }
}

TEST_CASE("nn MNIST tutorial network: repr, state_dict keys and eval forward match PyTorch",
          "[nn][golden]") {
  const json& g = golden().at("mnist");
  Network net;
  CHECK(net->to_string() == g.at("repr").get<std::string>());

  std::vector<std::string> keys;
  for (auto& [k, v] : net->state_dict()) keys.push_back(k);
  CHECK(keys == g.at("keys").get<std::vector<std::string>>());

  nn::StateDict d;
  int k = 0;
  for (auto& [name, p] : net->named_parameters())
    d.emplace_back(name, formula_weights(k++, p.shape()));
  net->load_state_dict(d);
  net->eval();
  NoGradGuard no_grad;
  Tensor y = net(tensor_from_json(g.at("input")));
  require_close(y, g.at("output"), 1e-5, 1e-4, "mnist output");

  // Eval mode switches the dropout child off, so the forward is repeatable.
  CHECK_FALSE(net->layer3_dropout->is_training());
  Tensor y2 = net(tensor_from_json(g.at("input")));
  CHECK(y2.to_vector<float>() == y.to_vector<float>());
}

TEST_CASE("nn BatchNorm running statistics over steps match PyTorch", "[nn][golden]") {
  for (auto& c : golden().at("batchnorm")) {
    const std::string name = c.at("name");
    INFO("case " << name);
    const json& o = c.at("options");
    nn::BatchNormOptions opts(o.at("num_features").get<int64_t>());
    if (o.contains("momentum"))
      opts.momentum(o["momentum"].is_null() ? std::optional<double>()
                                            : o["momentum"].get<double>());
    if (o.contains("eps")) opts.eps(o["eps"].get<double>());
    if (o.contains("affine")) opts.affine(o["affine"].get<bool>());
    if (o.contains("track_running_stats"))
      opts.track_running_stats(o["track_running_stats"].get<bool>());
    std::shared_ptr<nn::Module> m;
    if (c.at("module") == "BatchNorm2d")
      m = nn::BatchNorm2d(opts).ptr();
    else
      m = nn::BatchNorm1d(opts).ptr();
    m->load_state_dict(state_from_json(c.at("state")));

    int step = 0;
    for (auto& s : c.at("steps")) {
      INFO("step " << step++);
      m->train(s.at("train").get<bool>());
      Tensor y = m->forward(tensor_from_json(s.at("input")));
      require_close(y, s.at("output"), 1e-5, 1e-4, "output");
      auto buffers = m->named_buffers();
      REQUIRE(buffers.size() == s.at("buffers").size());
      for (auto& [k, v] : buffers) {
        INFO("buffer " << k);
        require_close(v, s.at("buffers").at(k), 1e-5, 1e-5, k);
      }
    }
  }
}

TEST_CASE("nn module forwards with their own logic match PyTorch", "[nn][golden]") {
  for (auto& c : golden().at("forward")) {
    const std::string name = c.at("name");
    INFO("case " << name);
    const json& o = c.at("options");
    const std::string mod = c.at("module");
    std::shared_ptr<nn::Module> m;
    if (mod == "Conv2d" || mod == "Conv1d") {
      auto kernel = ints(o.at("kernel"));
      auto set = [&](auto opts) {
        if (o.contains("stride")) opts.stride(ints(o["stride"]));
        if (o.contains("dilation")) opts.dilation(ints(o["dilation"]));
        if (o.contains("groups")) opts.groups(o["groups"].get<int64_t>());
        if (o.contains("padding")) {
          if (o["padding"].is_string())
            opts.padding(o["padding"] == "same" ? nn::kSame : nn::kValid);
          else
            opts.padding(ints(o["padding"]));
        }
        return opts;
      };
      const int64_t in = o.at("in"), out = o.at("out");
      if (mod == "Conv2d")
        m = nn::Conv2d(set(nn::Conv2dOptions(in, out, kernel))).ptr();
      else
        m = nn::Conv1d(set(nn::Conv1dOptions(in, out, kernel))).ptr();
    } else if (mod == "ConvTranspose2d") {
      nn::ConvTranspose2dOptions opts(o.at("in").get<int64_t>(), o.at("out").get<int64_t>(),
                                      ints(o.at("kernel")));
      if (o.contains("stride")) opts.stride(ints(o["stride"]));
      if (o.contains("padding")) opts.padding(ints(o["padding"]));
      if (o.contains("output_padding")) opts.output_padding(ints(o["output_padding"]));
      if (o.contains("groups")) opts.groups(o["groups"].get<int64_t>());
      if (o.contains("dilation")) opts.dilation(ints(o["dilation"]));
      if (o.contains("bias")) opts.bias(o["bias"].get<bool>());
      m = nn::ConvTranspose2d(opts).ptr();
    } else if (mod == "AvgPool2d") {
      nn::AvgPool2dOptions opts(ints(o.at("kernel")));
      opts.stride(ints(o.at("stride"))).padding(ints(o.at("padding")));
      if (o.contains("divisor_override"))
        opts.divisor_override(o["divisor_override"].get<int64_t>());
      if (o.contains("count_include_pad"))
        opts.count_include_pad(o["count_include_pad"].get<bool>());
      m = nn::AvgPool2d(opts).ptr();
    } else if (mod == "MaxPool1d") {
      m = nn::MaxPool1d(nn::MaxPool1dOptions(ints(o.at("kernel")))
                            .stride(ints(o.at("stride")))
                            .padding(ints(o.at("padding"))))
              .ptr();
    } else if (mod == "GroupNorm") {
      m = nn::GroupNorm(o.at("num_groups").get<int64_t>(), o.at("num_channels").get<int64_t>())
              .ptr();
    } else if (mod == "LayerNorm") {
      m = nn::LayerNorm(nn::LayerNormOptions(ints(o.at("normalized_shape")))).ptr();
    } else {
      FAIL("unknown module " << mod);
    }
    m->load_state_dict(state_from_json(c.at("state")));
    Tensor x = tensor_from_json(c.at("input"));
    require_close(m->forward(x), c.at("output"), 1e-5, 1e-4, name);
  }
}

TEST_CASE("nn loss modules match PyTorch", "[nn][golden]") {
  for (auto& c : golden().at("losses")) {
    const std::string name = c.at("name");
    INFO("case " << name);
    const json& o = c.at("options");
    const Reduction r = reduction_from_name(o.at("reduction"));
    Tensor x = tensor_from_json(c.at("input"));
    Tensor t = tensor_from_json(c.at("target"));
    Tensor y;
    const Tensor w = o.contains("weight") ? tensor_from_json(o["weight"]) : Tensor();
    const int64_t ignore = o.value("ignore_index", int64_t{-100});
    if (c.at("module") == "CrossEntropyLoss")
      y = nn::CrossEntropyLoss(nn::CrossEntropyLossOptions()
                                   .reduction(r)
                                   .label_smoothing(o.at("label_smoothing").get<double>())
                                   .weight(w)
                                   .ignore_index(ignore))(x, t);
    else if (c.at("module") == "NLLLoss")
      y = nn::NLLLoss(nn::NLLLossOptions().reduction(r).weight(w).ignore_index(ignore))(x, t);
    else
      y = nn::MSELoss(nn::MSELossOptions().reduction(r))(x, t);
    require_close(y, c.at("output"), 1e-5, 1e-5, name);
  }
}

TEST_CASE("nn MultiheadAttention matches PyTorch with every mask kind", "[nn][golden][attention]") {
  for (auto& c : golden().at("attention")) {
    const std::string name = c.at("name");
    INFO("case " << name);
    const json& o = c.at("options");
    const int64_t e = o.at("embed_dim");
    nn::MultiheadAttentionOptions opts(e, o.at("num_heads").get<int64_t>());
    opts.bias(o.value("bias", true))
        .kdim(o.value("kdim", e))
        .vdim(o.value("vdim", e))
        .batch_first(o.value("batch_first", false));
    nn::MultiheadAttention m(opts);
    m->eval();
    m->load_state_dict(state_from_json(c.at("state")));
    // Parameter names are PyTorch's (the JSON object's keys come sorted).
    std::vector<std::string> names;
    for (auto& [k, v] : m->named_parameters()) names.push_back(k);
    std::sort(names.begin(), names.end());
    std::vector<std::string> want;
    for (auto& [k, v] : c.at("state").items()) want.push_back(k);
    CHECK(names == want);

    Tensor q = tensor_from_json(c.at("query")).requires_grad_();
    Tensor k = c.at("self").get<bool>() ? q : tensor_from_json(c.at("key")).requires_grad_();
    Tensor v = c.at("self").get<bool>() ? q : tensor_from_json(c.at("value")).requires_grad_();
    auto opt_tensor = [&](const char* key) {
      return c.at(key).is_null() ? Tensor() : tensor_from_json(c.at(key));
    };
    auto [out, weights] =
        m(q, k, v, opt_tensor("key_padding_mask"), c.at("need_weights").get<bool>(),
          opt_tensor("attn_mask"), c.at("average_attn_weights").get<bool>(),
          c.at("is_causal").get<bool>());
    require_close(out, c.at("output"), 1e-5, 1e-4, name + " output");
    if (c.at("weights").is_null())
      CHECK_FALSE(weights.defined());
    else
      require_close(weights, c.at("weights"), 1e-5, 1e-4, name + " weights");
    sum(mul(out, tensor_from_json(c.at("grad_output")))).backward();
    const json& g = c.at("grads");
    require_close(q.grad(), g.at("query"), 1e-4, 1e-3, name + " grad query");
    if (!c.at("self").get<bool>()) {
      require_close(k.grad(), g.at("key"), 1e-4, 1e-3, name + " grad key");
      require_close(v.grad(), g.at("value"), 1e-4, 1e-3, name + " grad value");
    }
    for (auto& [pk, pv] : m->named_parameters())
      require_close(pv.grad(), g.at(pk), 1e-4, 1e-3, name + " grad " + pk);
  }
}
