// GPT-J (models/gptj.hpp): Hugging Face's parameter names and shapes, GPT-J-6B's size from its
// config, the tiny model's logits, loss and gradients against PyTorch 1.13
// (tests/golden/gptj.json, made by gen_gptj.py after HF's modeling_gptj.py), causality, a
// training step, the traced step giving the eager numbers, and bad configs refused by field.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/models/models.hpp>

#include "../support/error_of.hpp"
#include "../support/golden.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using namespace ipuml;
using namespace ipuml::models;
using ipuml::testing::error_of;
using ipuml::testing::require_close;
using nlohmann::json;

namespace {

// gen_gptj.py's formulas: parameter k (state_dict order), element i, s = sin(0.37 i + 1.3 k):
// LayerNorm weights 1 + 0.1 s, other vectors 0.1 s, matrices s / sqrt(numel / rows).
Tensor formula(int k, const std::string& name, const Shape& shape) {
  const int64_t n = numel(shape);
  const bool ln_weight =
      name.find(".ln_") != std::string::npos && name.size() > 7 && name.ends_with(".weight");
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double s = std::sin(0.37 * static_cast<double>(i) + 1.3 * k);
    double x = 0;
    if (shape.size() == 1)
      x = ln_weight ? 1.0 + 0.1 * s : 0.1 * s;
    else
      x = s / std::sqrt(static_cast<double>(n / shape[0]));
    v[static_cast<size_t>(i)] = static_cast<float>(x);
  }
  return from_vector(v, shape);
}

void load_formula_weights(GPTJForCausalLM& net) {
  nn::StateDict d;
  int k = 0;
  for (auto& [name, p] : net->named_parameters())
    d.emplace_back(name, formula(k++, name, p.shape()));
  net->load_state_dict(d);
}

// gen_gptj.py's input: (7 i + 3) mod vocab, [2, 8].
Tensor formula_ids(int64_t vocab) {
  std::vector<int64_t> v(16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (7 * static_cast<int64_t>(i) + 3) % vocab;
  return from_vector(v, {2, 8});
}

double max_abs_error(const Tensor& a, const json& expected) {
  const auto got = a.to_vector<double>();
  const auto& e = expected.at("data");
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - e[i].get<double>()));
  return worst;
}

}  // namespace

TEST_CASE("gptj: Hugging Face's parameter names and shapes", "[zoo][gptj]") {
  const json g = ipuml::testing::load_golden("gptj.json");
  GPTJForCausalLM net(GPTJConfig::tiny());
  std::vector<std::string> keys;
  int64_t count = 0;
  for (auto& [k, t] : net->state_dict()) {
    keys.push_back(k);
    CHECK(t.shape() == g.at("shapes").at(k).get<Shape>());
    count += t.numel();
  }
  CHECK(keys == g.at("keys").get<std::vector<std::string>>());
  CHECK(count == net->config().num_parameters());
  CHECK(net->transformer->h->size() == 2);
  CHECK_FALSE(net->transformer->blocks[0]->attn->q_proj->bias.defined());
  CHECK(net->lm_head->bias.defined());
  CHECK(net->transformer->blocks[0]->mlp->act->options.approximate() == "tanh");
  // HF's _init_weights: N(0, 0.02) weights, zero biases, LayerNorms at 1/0.
  CHECK(amax(abs(net->lm_head->bias)).item<float>() == 0.0f);
  CHECK(amin(net->transformer->ln_f->weight).item<float>() == 1.0f);
  const double sd = std::sqrt(var(net->transformer->wte->weight).item<float>());
  CHECK(sd == Approx(0.02).epsilon(0.1));

  // Tied: lm_head.weight is wte.weight, listed once by parameters(), kept under both names.
  GPTJForCausalLM tied(GPTJConfig::tiny().tie_word_embeddings(true));
  CHECK(tied->lm_head->weight.impl_ptr() == tied->transformer->wte->weight.impl_ptr());
  int64_t tied_count = 0;
  for (const Tensor& p : tied->parameters()) tied_count += p.numel();
  CHECK(tied_count == tied->config().num_parameters());
  CHECK(tied_count == count - 64 * 32);
}

TEST_CASE("gptj: the 6B config's size computed from the config", "[zoo][gptj]") {
  const GPTJConfig c = GPTJConfig::gptj_6b();
  CHECK(c.vocab_size() == 50400);
  CHECK(c.n_positions() == 2048);
  CHECK(c.n_embd() == 4096);
  CHECK(c.n_layer() == 28);
  CHECK(c.n_head() == 16);
  CHECK(c.head_dim() == 256);
  CHECK(c.rotary_features() == 64);
  CHECK(c.inner_dim() == 16384);
  CHECK(c.activation_function() == "gelu_new");
  CHECK(c.layer_norm_epsilon() == 1e-5);
  CHECK_FALSE(c.tie_word_embeddings());
  CHECK(c.resid_pdrop() == 0.0);
  CHECK_NOTHROW(c.validate());
  // What HF's GPTJForCausalLM(GPTJConfig()).num_parameters() counts; gen_gptj.py builds the
  // same modules on PyTorch's meta device and counts them.
  CHECK(c.num_parameters() == 6'050'882'784);
  CHECK(c.num_parameters() ==
        ipuml::testing::load_golden("gptj.json").at("num_parameters_6b").get<int64_t>());
  // The model card's 6,053,381,344 is mesh-transformer-jax's checkpoint summed over its 8
  // tensor-parallel shards: each shard holds its own copy of every layer norm (28 ln_1 and
  // the final one, 2 x 4096 each) and of every fc_out bias (4096), and its one-hot embedding
  // has a bias of 4096 per shard, which HF's wte does not.
  const int64_t e = c.n_embd(), shards = 8;
  const int64_t replicated = (shards - 1) * (c.n_layer() * (2 * e + e) + 2 * e) + shards * e;
  CHECK(replicated == 610 * 4096);
  CHECK(c.num_parameters() + replicated == 6'053'381'344);

  CHECK(GPTJConfig::from_name("EleutherAI/gpt-j-6B").num_parameters() == c.num_parameters());
  CHECK(GPTJConfig::preset("gptj-tiny").n_embd() == 32);
  CHECK_THAT(error_of([] { GPTJConfig::from_name("gptj-20b"); }),
             Catch::Contains("GPTJConfig: unknown preset 'gptj-20b'"));
}

TEST_CASE("gptj: logits loss and gradients match PyTorch", "[zoo][gptj][golden]") {
  const json g = ipuml::testing::load_golden("gptj.json");
  const json& c = g.at("config");
  GPTJForCausalLM net(GPTJConfig()
                          .vocab_size(c.at("vocab_size"))
                          .n_positions(c.at("n_positions"))
                          .n_embd(c.at("n_embd"))
                          .n_layer(c.at("n_layer"))
                          .n_head(c.at("n_head"))
                          .rotary_dim(c.at("rotary_dim").get<int64_t>())
                          .layer_norm_epsilon(c.at("layer_norm_epsilon")));
  load_formula_weights(net);
  const Tensor ids = formula_ids(c.at("vocab_size"));
  CHECK(ids.to_vector<int64_t>() == g.at("input_ids").at("data").get<std::vector<int64_t>>());
  const Tensor logits = net(ids);
  INFO("max |logits error| " << max_abs_error(logits, g.at("logits")));
  require_close(logits, g.at("logits"), 1e-5, 1e-5, "logits");
  const Tensor loss = shifted_causal_lm_loss(logits, ids);
  CHECK(loss.item<float>() == Approx(g.at("loss").get<double>()).epsilon(1e-6));
  loss.backward();
  for (auto& [k, p] : net->named_parameters())
    if (g.at("grads").contains(k)) {
      INFO(k << ": max |grad error| " << max_abs_error(p.grad(), g.at("grads").at(k)));
      require_close(p.grad(), g.at("grads").at(k), 1e-6, 1e-4, k);
    }
}

TEST_CASE("gptj: a position sees only itself and earlier positions", "[zoo][gptj]") {
  manual_seed(11);
  GPTJForCausalLM net(GPTJConfig::tiny());
  NoGradGuard no_grad;
  Tensor ids = from_vector(std::vector<int64_t>{5, 9, 2, 33, 7, 60}, {1, 6});
  Tensor changed = from_vector(std::vector<int64_t>{5, 9, 2, 33, 8, 61}, {1, 6});
  const Tensor a = net(ids), b = net(changed);
  CHECK(amax(abs(sub(slice(a, 1, 0, 4), slice(b, 1, 0, 4)))).item<float>() == 0.0f);
  CHECK(amax(abs(sub(slice(a, 1, 4, 6), slice(b, 1, 4, 6)))).item<float>() > 1e-4f);
  CHECK_THAT(error_of([&] {
               net(zeros({1, 33}, kInt64));
             }),
             Catch::Contains("GPTJModel: sequence length 33 must be between 1 and n_positions=32"));
  CHECK_THAT(error_of([&] { net(zeros({1, 4})); }), Catch::Contains("expected input_ids"));
}

TEST_CASE("gptj: a training step of the tiny model lowers the loss", "[zoo][gptj]") {
  manual_seed(12);
  GPTJForCausalLM net(GPTJConfig::tiny());
  Generator gen(13);
  const Tensor ids = randint(0, 64, {4, 16}, &gen);
  optim::AdamW opt(net->parameters(), optim::AdamWOptions(1e-2));
  std::vector<float> losses;
  for (int step = 0; step < 6; ++step) {
    opt.zero_grad();
    const Tensor loss = shifted_causal_lm_loss(net(ids), ids);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  INFO("losses " << losses[0] << " " << losses[1] << " ... " << losses.back());
  CHECK(losses[0] == Approx(std::log(64.0)).margin(0.05));  // N(0, 0.02) weights: near uniform
  CHECK(losses[1] < losses[0]);
  CHECK(losses.back() < losses[0] - 0.3f);
  // The other loss form: already shifted labels.
  auto [x, y] = shift_tokens(ids);
  NoGradGuard no_grad;
  const Tensor full = net(ids);
  CHECK(causal_lm_loss(slice(full, 1, 0, 15), y).item<float>() ==
        Approx(shifted_causal_lm_loss(full, ids).item<float>()).epsilon(1e-6));
}

TEST_CASE("gptj: a traced training step gives the eager numbers", "[zoo][gptj]") {
  Generator gen(14);
  const Tensor ids = randint(0, 64, {2, 12}, &gen);
  auto [x, y] = shift_tokens(ids);
  std::vector<std::vector<float>> losses;
  for (const bool traced : {false, true}) {
    manual_seed(15);
    GPTJForCausalLM net(GPTJConfig::tiny());
    optim::SGD sgd(net->parameters(), optim::SGDOptions(0.5));
    std::vector<float> l;
    if (traced) {
      auto tm = trainingModel(
          net.ptr(), Options().useIpuModel(false).showCompilationProgressBar(false), sgd,
          [](const Tensor& out, const Tensor& t) { return causal_lm_loss(out, t); });
      for (int step = 0; step < 3; ++step) l.push_back(tm(x, y).to_vector<float>()[0]);
    } else {
      for (int step = 0; step < 3; ++step) {
        sgd.zero_grad();
        const Tensor loss = causal_lm_loss(net(x), y);
        loss.backward();
        sgd.step();
        l.push_back(loss.item<float>());
      }
    }
    losses.push_back(l);
  }
  INFO("eager " << losses[0][0] << " " << losses[0][2] << ", traced " << losses[1][0] << " "
                << losses[1][2]);
  CHECK(losses[0][2] < losses[0][0]);
  for (size_t i = 0; i < losses[0].size(); ++i)
    CHECK(losses[1][i] == Approx(losses[0][i]).epsilon(1e-4));
}

TEST_CASE("gptj: bad configs are refused naming the field", "[zoo][gptj]") {
  auto built = [](const GPTJConfig& c) { return error_of([&] { GPTJForCausalLM net(c); }); };
  CHECK_THAT(built(GPTJConfig::tiny().n_embd(30)),
             Catch::Contains("GPTJConfig: n_embd=30 must be divisible by n_head=4"));
  CHECK_THAT(built(GPTJConfig::tiny().rotary_dim(16)),
             Catch::Contains("GPTJConfig: rotary_dim=16 must be at most head_dim=8 (n_embd=32 / "
                             "n_head=4)"));
  CHECK_THAT(built(GPTJConfig::tiny().rotary_dim(3)),
             Catch::Contains("GPTJConfig: rotary_dim=3 must be even and positive"));
  CHECK_THAT(built(GPTJConfig::tiny().rotary_dim(0)),
             Catch::Contains("GPTJConfig: rotary_dim=0 must be even and positive"));
  CHECK_THAT(built(GPTJConfig::tiny().n_head(0)),
             Catch::Contains("vocab_size, n_positions, n_embd, n_layer and n_head must be "
                             "positive"));
  CHECK_THAT(
      built(GPTJConfig::tiny().activation_function("relu")),
      Catch::Contains("GPTJConfig: activation_function 'relu' is not one of gelu_new, gelu"));
  CHECK_THAT(built(GPTJConfig::tiny().dropout(1.5)),
             Catch::Contains("dropout probabilities must be in [0, 1], got 1.5"));
  CHECK_THAT(built(GPTJConfig::tiny().layer_norm_epsilon(0)),
             Catch::Contains("layer_norm_epsilon must be positive"));
  CHECK_THAT(built(GPTJConfig::tiny().n_inner(-1)),
             Catch::Contains("n_inner must be positive, got -1"));
  // rotary_dim unset rotates all of head_dim.
  CHECK(GPTJConfig::tiny().rotary_dim(std::nullopt).rotary_features() == 8);
  CHECK_NOTHROW(GPTJForCausalLM(GPTJConfig::tiny().rotary_dim(std::nullopt)));
}
