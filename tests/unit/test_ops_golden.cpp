// Every op's forward values and gradients against PyTorch (tests/golden/ops.json, made by
// tests/golden/gen_ops.py with Debian's python3-torch).
#include <functional>
#include <map>
#include <optional>

#include "../support/golden.hpp"

using namespace ipuml;
using nlohmann::json;
using Ts = std::vector<Tensor>;

namespace {

std::vector<int64_t> ints(const json& j) { return j.get<std::vector<int64_t>>(); }
std::vector<int64_t> dims_or_all(const json& j) {
  return j.is_null() ? std::vector<int64_t>{} : ints(j);
}

// F::InterpolateFuncOptions from the case's attrs (null: not set).
nn::functional::InterpolateFuncOptions interpolate_options(const json& a) {
  static const std::map<std::string, nn::InterpolateMode> modes = {
      {"nearest", kNearest}, {"nearest-exact", kNearestExact}, {"bilinear", kBilinear},
      {"bicubic", kBicubic}, {"trilinear", kTrilinear},        {"area", kArea}};
  nn::functional::InterpolateFuncOptions o;
  const std::string mode = a["mode"];
  if (mode == "linear")
    o.mode(kLinear);  // LibTorch's torch::kLinear
  else
    o.mode(modes.at(mode));
  if (!a["size"].is_null()) o.size(ints(a["size"]));
  if (!a["scale_factor"].is_null()) o.scale_factor(a["scale_factor"].get<std::vector<double>>());
  if (!a["align_corners"].is_null()) o.align_corners(a["align_corners"].get<bool>());
  if (!a["recompute_scale_factor"].is_null())
    o.recompute_scale_factor(a["recompute_scale_factor"].get<bool>());
  return o;
}

// F::RotaryEmbeddingFuncOptions from the case's attrs (rotary_dim null: all of head_dim).
nn::functional::RotaryEmbeddingFuncOptions rotary_options(const json& a) {
  auto o = nn::functional::RotaryEmbeddingFuncOptions()
               .offset(a["offset"].get<int64_t>())
               .seq_dim(a["seq_dim"].get<int64_t>())
               .base(a["base"].get<double>())
               .style(a["style"] == "gptj" ? nn::RotaryStyle::Interleaved : nn::RotaryStyle::Half);
  if (!a["rotary_dim"].is_null()) o.rotary_dim(a["rotary_dim"].get<int64_t>());
  return o;
}

using OpFn = std::function<Ts(const json&, const Ts&)>;

const std::map<std::string, OpFn>& ops() {
  static const std::map<std::string, OpFn> m = {
      {"add", [](auto&, auto& x) { return Ts{add(x[0], x[1])}; }},
      {"sub", [](auto&, auto& x) { return Ts{sub(x[0], x[1])}; }},
      {"mul", [](auto&, auto& x) { return Ts{mul(x[0], x[1])}; }},
      {"div", [](auto&, auto& x) { return Ts{div(x[0], x[1])}; }},
      {"pow", [](auto&, auto& x) { return Ts{pow(x[0], x[1])}; }},
      {"pow_scalar",
       [](auto& a, auto& x) { return Ts{pow(x[0], a["exponent"].template get<double>())}; }},
      {"maximum", [](auto&, auto& x) { return Ts{maximum(x[0], x[1])}; }},
      {"minimum", [](auto&, auto& x) { return Ts{minimum(x[0], x[1])}; }},
      {"neg", [](auto&, auto& x) { return Ts{neg(x[0])}; }},
      {"exp", [](auto&, auto& x) { return Ts{exp(x[0])}; }},
      {"log", [](auto&, auto& x) { return Ts{log(x[0])}; }},
      {"sqrt", [](auto&, auto& x) { return Ts{sqrt(x[0])}; }},
      {"rsqrt", [](auto&, auto& x) { return Ts{rsqrt(x[0])}; }},
      {"abs", [](auto&, auto& x) { return Ts{abs(x[0])}; }},
      {"tanh", [](auto&, auto& x) { return Ts{tanh(x[0])}; }},
      {"sigmoid", [](auto&, auto& x) { return Ts{sigmoid(x[0])}; }},
      {"relu", [](auto&, auto& x) { return Ts{relu(x[0])}; }},
      {"gelu",
       [](auto& a, auto& x) {
         return Ts{gelu(x[0], a["approximate"].template get<std::string>())};
       }},
      {"sum",
       [](auto& a, auto& x) {
         return Ts{sum(x[0], dims_or_all(a["dims"]), a["keepdim"].template get<bool>())};
       }},
      {"mean",
       [](auto& a, auto& x) {
         return Ts{mean(x[0], dims_or_all(a["dims"]), a["keepdim"].template get<bool>())};
       }},
      {"amax",
       [](auto& a, auto& x) {
         return Ts{amax(x[0], ints(a["dims"]), a["keepdim"].template get<bool>())};
       }},
      {"amin",
       [](auto& a, auto& x) {
         return Ts{amin(x[0], ints(a["dims"]), a["keepdim"].template get<bool>())};
       }},
      {"max_dim",
       [](auto& a, auto& x) {
         auto [v, i] =
             max(x[0], a["dim"].template get<int64_t>(), a["keepdim"].template get<bool>());
         return Ts{v, i};
       }},
      {"min_dim",
       [](auto& a, auto& x) {
         auto [v, i] =
             min(x[0], a["dim"].template get<int64_t>(), a["keepdim"].template get<bool>());
         return Ts{v, i};
       }},
      {"argmax",
       [](auto& a, auto& x) {
         return Ts{
             argmax(x[0], a["dim"].template get<int64_t>(), a["keepdim"].template get<bool>())};
       }},
      {"argmin",
       [](auto& a, auto& x) {
         return Ts{
             argmin(x[0], a["dim"].template get<int64_t>(), a["keepdim"].template get<bool>())};
       }},
      {"var",
       [](auto& a, auto& x) {
         return Ts{var(x[0], dims_or_all(a["dims"]), a["correction"].template get<int64_t>(),
                       a["keepdim"].template get<bool>())};
       }},
      {"matmul", [](auto&, auto& x) { return Ts{matmul(x[0], x[1])}; }},
      {"linear",
       [](auto&, auto& x) { return Ts{linear(x[0], x[1], x.size() > 2 ? x[2] : Tensor())}; }},
      {"conv2d",
       [](auto& a, auto& x) {
         return Ts{conv2d(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), ints(a["stride"]),
                          ints(a["padding"]), ints(a["dilation"]),
                          a["groups"].template get<int64_t>())};
       }},
      // PyTorch's argument order: groups before dilation.
      {"conv_transpose2d",
       [](auto& a, auto& x) {
         return Ts{conv_transpose2d(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), ints(a["stride"]),
                                    ints(a["padding"]), ints(a["output_padding"]),
                                    a["groups"].template get<int64_t>(), ints(a["dilation"]))};
       }},
      {"rotary_embedding",
       [](auto& a, auto& x) { return Ts{nn::functional::rotary_embedding(x[0], rotary_options(a))}; }},
      {"conv1d",
       [](auto& a, auto& x) {
         return Ts{conv1d(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), ints(a["stride"])[0],
                          ints(a["padding"])[0], ints(a["dilation"])[0],
                          a["groups"].template get<int64_t>())};
       }},
      {"max_pool2d",
       [](auto& a, auto& x) {
         return Ts{max_pool2d(x[0], ints(a["kernel_size"]), ints(a["stride"]), ints(a["padding"]))};
       }},
      {"max_pool1d",
       [](auto& a, auto& x) {
         return Ts{max_pool1d(x[0], ints(a["kernel_size"])[0], ints(a["stride"])[0],
                              ints(a["padding"])[0])};
       }},
      {"avg_pool2d",
       [](auto& a, auto& x) {
         return Ts{avg_pool2d(x[0], ints(a["kernel_size"]), ints(a["stride"]), ints(a["padding"]),
                              a["count_include_pad"].template get<bool>())};
       }},
      {"adaptive_avg_pool2d",
       [](auto& a, auto& x) { return Ts{adaptive_avg_pool2d(x[0], ints(a["output_size"]))}; }},
      {"softmax",
       [](auto& a, auto& x) { return Ts{softmax(x[0], a["dim"].template get<int64_t>())}; }},
      {"log_softmax",
       [](auto& a, auto& x) { return Ts{log_softmax(x[0], a["dim"].template get<int64_t>())}; }},
      {"cross_entropy",
       [](auto& a, auto& x) {
         return Ts{cross_entropy(x[0], x[1], reduction_from_name(a["reduction"]),
                                 a["label_smoothing"].template get<double>(),
                                 x.size() > 2 ? x[2] : Tensor(),
                                 a.value("ignore_index", int64_t{-100}))};
       }},
      {"nll_loss",
       [](auto& a, auto& x) {
         return Ts{nll_loss(x[0], x[1], reduction_from_name(a["reduction"]),
                            x.size() > 2 ? x[2] : Tensor(), a.value("ignore_index", int64_t{-100}))};
       }},
      {"triu",
       [](auto& a, auto& x) { return Ts{triu(x[0], a["diagonal"].template get<int64_t>())}; }},
      // The method form, so both spellings are covered.
      {"tril",
       [](auto& a, auto& x) { return Ts{x[0].tril(a["diagonal"].template get<int64_t>())}; }},
      {"bmm", [](auto&, auto& x) { return Ts{x[0].bmm(x[1])}; }},
      {"baddbmm",
       [](auto& a, auto& x) {
         return Ts{baddbmm(x[0], x[1], x[2], a["beta"].template get<double>(),
                           a["alpha"].template get<double>())};
       }},
      {"einsum",
       [](auto& a, auto& x) { return Ts{einsum(a["equation"].template get<std::string>(), x)}; }},
      {"scaled_dot_product_attention",
       [](auto& a, auto& x) {
         std::optional<double> scale;
         if (!a["scale"].is_null()) scale = a["scale"].template get<double>();
         return Ts{scaled_dot_product_attention(x[0], x[1], x[2], x.size() > 3 ? x[3] : Tensor(),
                                                0.0, a["is_causal"].template get<bool>(), scale)};
       }},
      {"mse_loss",
       [](auto& a, auto& x) {
         return Ts{mse_loss(x[0], x[1], reduction_from_name(a["reduction"]))};
       }},
      {"batch_norm",
       [](auto& a, auto& x) {
         Tensor y =
             batch_norm(x[0], x[3], x[4], x[1], x[2], a["training"].template get<bool>(),
                        a["momentum"].template get<double>(), a["eps"].template get<double>());
         return Ts{y, x[3], x[4]};
       }},
      {"layer_norm",
       [](auto& a, auto& x) {
         return Ts{layer_norm(x[0], a["normalized_shape"].template get<Shape>(),
                              x.size() > 1 ? x[1] : Tensor(), x.size() > 2 ? x[2] : Tensor(),
                              a["eps"].template get<double>())};
       }},
      {"group_norm",
       [](auto& a, auto& x) {
         return Ts{group_norm(x[0], a["num_groups"].template get<int64_t>(), x[1], x[2],
                              a["eps"].template get<double>())};
       }},
      {"embedding", [](auto&, auto& x) { return Ts{embedding(x[0], x[1])}; }},
      // LibTorch's F::embedding(input, weight, options): the indices first.
      {"embedding_opts",
       [](auto& a, auto& x) {
         auto o = nn::functional::EmbeddingFuncOptions()
                      .norm_type(a["norm_type"].template get<double>())
                      .scale_grad_by_freq(a["scale_grad_by_freq"].template get<bool>());
         if (!a["padding_idx"].is_null()) o.padding_idx(a["padding_idx"].template get<int64_t>());
         if (!a["max_norm"].is_null()) o.max_norm(a["max_norm"].template get<double>());
         return Ts{nn::functional::embedding(x[1], x[0], o)};
       }},
      {"cat", [](auto& a, auto& x) { return Ts{cat(x, a["dim"].template get<int64_t>())}; }},
      {"stack", [](auto& a, auto& x) { return Ts{stack(x, a["dim"].template get<int64_t>())}; }},
      {"split",
       [](auto& a, auto& x) {
         return split(x[0], a["split_size"].template get<int64_t>(),
                      a["dim"].template get<int64_t>());
       }},
      {"chunk",
       [](auto& a, auto& x) {
         return chunk(x[0], a["chunks"].template get<int64_t>(), a["dim"].template get<int64_t>());
       }},
      {"where", [](auto&, auto& x) { return Ts{where(x[0], x[1], x[2])}; }},
      {"masked_fill",
       [](auto& a, auto& x) {
         return Ts{masked_fill(x[0], x[1], a["value"].template get<double>())};
       }},
      {"index_select",
       [](auto& a, auto& x) {
         return Ts{index_select(x[0], a["dim"].template get<int64_t>(), x[1])};
       }},
      {"gather",
       [](auto& a, auto& x) { return Ts{gather(x[0], a["dim"].template get<int64_t>(), x[1])}; }},
      {"clamp",
       [](auto& a, auto& x) {
         std::optional<double> lo, hi;
         if (!a["min"].is_null()) lo = a["min"].template get<double>();
         if (!a["max"].is_null()) hi = a["max"].template get<double>();
         return Ts{clamp(x[0], lo, hi)};
       }},
      {"reshape",
       [](auto& a, auto& x) { return Ts{x[0].reshape(a["shape"].template get<Shape>())}; }},
      {"permute", [](auto& a, auto& x) { return Ts{x[0].permute(ints(a["dims"]))}; }},
      {"transpose",
       [](auto& a, auto& x) {
         return Ts{
             x[0].transpose(a["dim0"].template get<int64_t>(), a["dim1"].template get<int64_t>())};
       }},
      {"narrow",
       [](auto& a, auto& x) {
         return Ts{x[0].narrow(a["dim"].template get<int64_t>(), a["start"].template get<int64_t>(),
                               a["length"].template get<int64_t>())};
       }},
      {"slice",
       [](auto& a, auto& x) {
         return Ts{x[0].slice(a["dim"].template get<int64_t>(), a["start"].template get<int64_t>(),
                              a["end"].template get<int64_t>(), a["step"].template get<int64_t>())};
       }},
      {"expand",
       [](auto& a, auto& x) { return Ts{x[0].expand(a["shape"].template get<Shape>())}; }},
      {"squeeze",
       [](auto& a, auto& x) { return Ts{x[0].squeeze(a["dim"].template get<int64_t>())}; }},
      {"interpolate",
       [](auto& a, auto& x) {
         return Ts{nn::functional::interpolate(x[0], interpolate_options(a))};
       }},
      {"unsqueeze",
       [](auto& a, auto& x) { return Ts{x[0].unsqueeze(a["dim"].template get<int64_t>())}; }},
  };
  return m;
}

}  // namespace

TEST_CASE("every op matches PyTorch's values and gradients", "[ops][golden]") {
  // Catch runs the case again from the top for each of its 200-odd sections: parse once.
  static const json golden = testing::load_golden("ops.json");
  REQUIRE(golden["cases"].size() > 200);
  for (const auto& c : golden["cases"]) {
    const std::string name = c["name"];
    DYNAMIC_SECTION(name) {
      auto it = ops().find(c["op"].get<std::string>());
      REQUIRE(it != ops().end());
      Ts inputs;
      for (size_t i = 0; i < c["inputs"].size(); ++i) {
        Tensor t = testing::tensor_from_json(c["inputs"][i]);
        if (!c["grads"][i].is_null()) t.requires_grad_();
        inputs.push_back(t);
      }
      Ts outputs = it->second(c["attrs"], inputs);
      REQUIRE(outputs.size() == c["outputs"].size());
      // Sums over many products carry more float32 rounding than elementwise ops.
      const double atol = 2e-5, rtol = 2e-4;
      for (size_t i = 0; i < outputs.size(); ++i)
        testing::require_close(outputs[i], c["outputs"][i], atol, rtol,
                               name + " output " + std::to_string(i));

      Tensor loss;
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (c["grad_outputs"][i].is_null()) continue;
        Tensor term = sum(mul(outputs[i], testing::tensor_from_json(c["grad_outputs"][i])));
        loss = loss.defined() ? add(loss, term) : term;
      }
      bool any_grad = false;
      for (auto& g : c["grads"]) any_grad |= !g.is_null();
      if (!any_grad || !loss.defined()) continue;
      loss.backward();
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (c["grads"][i].is_null()) continue;
        // An input the op ignores (baddbmm with beta = 0) has no gradient: PyTorch's is zero.
        Tensor g = inputs[i].grad().defined() ? inputs[i].grad() : zeros_like(inputs[i]);
        testing::require_close(g, c["grads"][i], 1e-4, 1e-3,
                               name + " grad of input " + std::to_string(i));
      }
    }
  }
}
