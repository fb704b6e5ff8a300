// Optimizers against PyTorch's trajectories (tests/golden/optim.json), parameter groups, option
// validation, state_dict round trips, gradient clipping and loss scaling.
#include <cmath>
#include <limits>
#include <memory>

#include <catch2/catch.hpp>

#include <ipuml/optim/optim.hpp>

#include "../support/golden.hpp"

using namespace ipuml;
using ipuml::testing::load_golden;
using ipuml::testing::require_close;
using ipuml::testing::tensor_from_json;
using Json = nlohmann::json;

namespace {

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind,
                                                 std::vector<Tensor> params, const Json& o) {
  if (kind == "SGD")
    return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions(o.at("lr"))
                                                               .momentum(o.at("momentum"))
                                                               .dampening(o.at("dampening"))
                                                               .weight_decay(o.at("weight_decay"))
                                                               .nesterov(o.at("nesterov")));
  const optim::Betas betas(o.at("betas")[0].get<double>(), o.at("betas")[1].get<double>());
  if (kind == "Adam")
    return std::make_unique<optim::Adam>(std::move(params), optim::AdamOptions(o.at("lr"))
                                                                .betas(betas)
                                                                .eps(o.at("eps"))
                                                                .weight_decay(o.at("weight_decay"))
                                                                .amsgrad(o.at("amsgrad")));
  if (kind == "AdamW")
    return std::make_unique<optim::AdamW>(std::move(params), optim::AdamWOptions(o.at("lr"))
                                                                 .betas(betas)
                                                                 .eps(o.at("eps"))
                                                                 .weight_decay(o.at("weight_decay"))
                                                                 .amsgrad(o.at("amsgrad")));
  if (kind == "LAMB")
    return std::make_unique<optim::LAMB>(std::move(params),
                                         optim::LAMBOptions(o.at("lr"))
                                             .betas(betas)
                                             .eps(o.at("eps"))
                                             .weight_decay(o.at("weight_decay")));
  FAIL("unknown optimizer " << kind);
  return nullptr;
}

Tensor golden_loss(const Tensor& x, const Tensor& y, const Tensor& w, const Tensor& b) {
  return mean(pow(sub(add(matmul(x, w), b), y), 2.0));
}

struct Problem {
  Tensor x, y, w, b;
  explicit Problem(const Json& c)
      : x(tensor_from_json(c.at("x"))),
        y(tensor_from_json(c.at("y"))),
        w(tensor_from_json(c.at("w0")).requires_grad_()),
        b(tensor_from_json(c.at("b0")).requires_grad_()) {}
  void step(optim::Optimizer& opt) const {
    opt.zero_grad();
    golden_loss(x, y, w, b).backward();
    opt.step();
  }
};

const Json& golden_case(const std::string& name) {
  static const Json doc = load_golden("optim.json");
  for (auto& c : doc.at("cases"))
    if (c.at("name") == name) return c;
  FAIL("no optimizer case " << name);
  return doc;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.to_vector<float>() == b.to_vector<float>();
}

}  // namespace

TEST_CASE("optimizers follow PyTorch's parameter trajectories", "[optim]") {
  const Json doc = load_golden("optim.json");
  for (auto& c : doc.at("cases")) {
    const std::string name = c.at("name");
    SECTION(name) {
      Problem pb(c);
      auto opt = make_optimizer(c.at("optimizer"), {pb.w, pb.b}, c.at("options"));
      int k = 0;
      for (auto& expect : c.at("steps")) {
        pb.step(*opt);
        ++k;
        require_close(pb.w, expect.at("w"), 1e-6, 1e-5,
                      name + " w after step " + std::to_string(k));
        require_close(pb.b, expect.at("b"), 1e-6, 1e-5,
                      name + " b after step " + std::to_string(k));
      }
      CHECK(k == 5);
    }
  }
}

TEST_CASE("optimizer options chain and are validated", "[optim][errors]") {
  Tensor w = ones({2, 2}).requires_grad_();
  auto o = optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-4);
  CHECK(o.lr() == 0.1);
  CHECK(o.momentum() == 0.9);
  CHECK(o.nesterov());
  CHECK(o.weight_decay() == 1e-4);

  CHECK_THROWS_WITH(optim::SGD({w}, optim::SGDOptions(-0.1)), Catch::Contains("SGD") &&
                                                                  Catch::Contains("lr -0.1") &&
                                                                  Catch::Contains(">= 0"));
  // Infinite values pass ">= 0" but would make every parameter NaN: refused up front.
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(optim::SGD({w}, optim::SGDOptions(0.1).momentum(inf)),
                    Catch::Contains("SGD: invalid momentum inf") && Catch::Contains("finite"));
  CHECK_THROWS_WITH(optim::SGD({w}, optim::SGDOptions(0.1).weight_decay(inf)),
                    Catch::Contains("weight_decay") && Catch::Contains("finite"));
  CHECK_THROWS_WITH(optim::SGD({w}, optim::SGDOptions(inf)), Catch::Contains("lr inf"));
  CHECK_THROWS_WITH(optim::AdamW({w}, optim::AdamWOptions(1e-3).weight_decay(inf)),
                    Catch::Contains("weight_decay inf"));
  CHECK_THROWS_WITH(optim::Adam({w}, optim::AdamOptions(1e-3).eps(inf)),
                    Catch::Contains("eps inf"));
  CHECK_THROWS_WITH(optim::SGD({w}, optim::SGDOptions(0.1).nesterov(true)),
                    Catch::Contains("nesterov") && Catch::Contains("momentum > 0"));
  CHECK_THROWS_WITH(optim::SGD({}, optim::SGDOptions(0.1)),
                    Catch::Contains("empty parameter list"));
  CHECK_THROWS_WITH(optim::SGD({w, w}, optim::SGDOptions(0.1)), Catch::Contains("appears twice"));
  CHECK_THROWS_WITH(optim::Adam({w}, optim::AdamOptions(1e-3).betas({1.0, 0.999})),
                    Catch::Contains("beta1") && Catch::Contains("in [0, 1)"));
  CHECK_THROWS_WITH(optim::AdamW({w}, optim::AdamWOptions(1e-3).betas({0.9, -0.1})),
                    Catch::Contains("beta2"));
  CHECK_THROWS_WITH(optim::Adam({w}, optim::AdamOptions(1e-3).eps(-1)), Catch::Contains("eps"));
  CHECK_THROWS_WITH(optim::LAMB({w}, optim::LAMBOptions(1e-3).weight_decay(-1)),
                    Catch::Contains("weight_decay"));
  CHECK_THROWS_WITH(optim::SGD({mul(ones({2}).requires_grad_(), 2.0)}, optim::SGDOptions(0.1)),
                    Catch::Contains("not a leaf"));
  optim::SGD sgd({w}, optim::SGDOptions(0.1));
  CHECK_THROWS_WITH(sgd.set_lr(0, -1.0), Catch::Contains("lr"));
  CHECK_THROWS_WITH(sgd.get_lr(3), Catch::Contains("param group 3 is out of range"));
  CHECK_THROWS_WITH(sgd.add_param_group({w}), Catch::Contains("already appears in another group"));
}

TEST_CASE("parameter groups keep their own options and params without grad are skipped",
          "[optim]") {
  Tensor a = full({3}, 1.0).requires_grad_();
  Tensor b = full({3}, 1.0).requires_grad_();
  Tensor c = full({3}, 1.0).requires_grad_();
  optim::SGD opt({a}, optim::SGDOptions(0.1).momentum(0.5));
  opt.add_param_group({b, c}, optim::SGDOptions(0.01).momentum(0.5));
  REQUIRE(opt.num_param_groups() == 2);
  CHECK(opt.get_lr(0) == 0.1);
  CHECK(opt.get_lr(1) == 0.01);
  CHECK(opt.options(1).lr() == 0.01);
  CHECK(opt.parameters().size() == 3);

  opt.zero_grad();
  sum(add(mul(a, 2.0), mul(b, 2.0))).backward();  // c gets no gradient
  REQUIRE_FALSE(c.grad().defined());
  opt.step();
  CHECK(a.to_vector<float>() == std::vector<float>(3, 1.0f - 0.2f));
  CHECK(b.to_vector<float>() == std::vector<float>(3, 1.0f - 0.02f));
  CHECK(c.to_vector<float>() == std::vector<float>(3, 1.0f));
  CHECK(opt.state(2)[0].second.to_vector<float>() == std::vector<float>(3, 0.0f));

  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  CHECK_FALSE(b.grad().defined());

  opt.set_lr(1, 0.5);
  CHECK(opt.get_lr(1) == 0.5);
  CHECK(opt.options(1).lr() == 0.5);
  CHECK(opt.lr_tensor(1).item<float>() == 0.5f);
  CHECK(opt.get_lr(0) == 0.1);
}

TEST_CASE("optimizer state_dict round trip continues bit for bit", "[optim]") {
  for (const std::string name : {"sgd_momentum0.9_wd0.01", "adam_lr0.01_wd0.1",
                                 "adamw_lr0.01_wd0.1", "lamb_lr0.01_wd0.01"}) {
    SECTION(name) {
      const Json& c = golden_case(name);
      Problem pa(c);
      auto a = make_optimizer(c.at("optimizer"), {pa.w, pa.b}, c.at("options"));
      pa.step(*a);
      pa.step(*a);
      const nn::StateDict sd = a->state_dict();
      const Tensor w2 = pa.w.clone(), b2 = pa.b.clone();
      pa.step(*a);  // the uninterrupted third step (sd is a snapshot, not a view)

      Problem pb(c);
      {
        NoGradGuard ng;
        pb.w.copy_(w2);
        pb.b.copy_(b2);
      }
      auto b = make_optimizer(c.at("optimizer"), {pb.w, pb.b}, c.at("options"));
      b->set_lr(0, 123.0);  // overwritten by the load
      b->load_state_dict(sd);
      CHECK(b->get_lr(0) == Approx(a->get_lr(0)));
      pb.step(*b);
      CHECK(same_bits(pa.w, pb.w));
      CHECK(same_bits(pa.b, pb.b));
    }
  }
}

TEST_CASE("optimizer state_dict keys are stable and loading checks them", "[optim][errors]") {
  Tensor w = ones({2, 3}).requires_grad_();
  Tensor b = ones({3}).requires_grad_();
  optim::Adam adam({w, b}, optim::AdamOptions(1e-3).amsgrad(true));
  std::vector<std::string> keys;
  for (auto& [k, t] : adam.state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq",
                                         "state.0.max_exp_avg_sq", "state.1.step",
                                         "state.1.exp_avg", "state.1.exp_avg_sq",
                                         "state.1.max_exp_avg_sq", "group.0.lr"});

  optim::SGD sgd({w, b}, optim::SGDOptions(0.1).momentum(0.9));
  keys.clear();
  for (auto& [k, t] : sgd.state_dict()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"state.0.momentum_buffer", "state.1.momentum_buffer",
                                         "group.0.lr"});

  nn::StateDict sd = sgd.state_dict();
  nn::StateDict missing(sd.begin() + 1, sd.end());
  CHECK_THROWS_WITH(sgd.load_state_dict(missing),
                    Catch::Contains("missing key 'state.0.momentum_buffer'"));
  nn::StateDict extra = sd;
  extra.emplace_back("state.7.exp_avg", zeros({1}));
  CHECK_THROWS_WITH(sgd.load_state_dict(extra),
                    Catch::Contains("unexpected key 'state.7.exp_avg'"));
  nn::StateDict wrong = sd;
  wrong[1].second = zeros({4});
  CHECK_THROWS_WITH(
      sgd.load_state_dict(wrong),
      Catch::Contains("'state.1.momentum_buffer' has shape [4]") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(sgd.load_state_dict(adam.state_dict()), Catch::Contains("missing key"));
}

TEST_CASE("clip_grad_norm_ follows PyTorch's formula", "[optim]") {
  Tensor a = zeros({2}).requires_grad_();
  Tensor b = zeros({2}).requires_grad_();
  Tensor c = zeros({1}).requires_grad_();  // no grad: ignored
  a.set_grad(from_vector<float>({3.0f, 0.0f}, {2}));
  b.set_grad(from_vector<float>({0.0f, -4.0f}, {2}));

  SECTION("2-norm above max_norm scales every gradient") {
    Tensor total = optim::clip_grad_norm_({a, b, c}, 1.0);
    CHECK(total.dim() == 0);
    CHECK(total.item<float>() == Approx(5.0));
    const float coef = static_cast<float>(1.0 / (5.0 + 1e-6));
    CHECK(a.grad().to_vector<float>()[0] == Approx(3.0f * coef).epsilon(1e-6));
    CHECK(b.grad().to_vector<float>()[1] == Approx(-4.0f * coef).epsilon(1e-6));
    CHECK_FALSE(c.grad().defined());
  }
  SECTION("below max_norm leaves gradients unchanged") {
    Tensor total = optim::clip_grad_norm_({a, b}, 10.0);
    CHECK(total.item<float>() == Approx(5.0));
    CHECK(a.grad().to_vector<float>() == std::vector<float>{3.0f, 0.0f});
    CHECK(b.grad().to_vector<float>() == std::vector<float>{0.0f, -4.0f});
  }
  SECTION("inf and 1 norms") {
    CHECK(optim::clip_grad_norm_({a, b}, 100.0, std::numeric_limits<double>::infinity())
              .item<float>() == Approx(4.0));
    CHECK(optim::clip_grad_norm_({a, b}, 100.0, 1.0).item<float>() == Approx(7.0));
    CHECK(optim::clip_grad_norm_({a, b}, 100.0, 3.0).item<float>() ==
          Approx(std::cbrt(27.0 + 64.0)));
  }
  SECTION("clip_grad_value_") {
    optim::clip_grad_value_({a, b}, 2.0);
    CHECK(a.grad().to_vector<float>() == std::vector<float>{2.0f, 0.0f});
    CHECK(b.grad().to_vector<float>() == std::vector<float>{0.0f, -2.0f});
  }
  CHECK_THROWS_WITH(optim::clip_grad_norm_({a}, -1.0), Catch::Contains("max_norm"));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({a}, 1.0, 0.0), Catch::Contains("norm_type"));
}

TEST_CASE("LossScaler scales, unscales and skips steps with inf/nan gradients", "[optim]") {
  const Json& c = golden_case("adam_lr0.01");
  Problem ref(c), scaled(c);
  auto opt_ref = make_optimizer("Adam", {ref.w, ref.b}, c.at("options"));
  auto opt = make_optimizer("Adam", {scaled.w, scaled.b}, c.at("options"));
  optim::LossScaler scaler(1024.0);  // a power of two: scaling is exact
  CHECK_THROWS_WITH(optim::LossScaler(0.0), Catch::Contains("scale"));

  for (int k = 0; k < 2; ++k) {
    ref.step(*opt_ref);
    opt->zero_grad();
    scaler.scale(golden_loss(scaled.x, scaled.y, scaled.w, scaled.b)).backward();
    CHECK(scaler.step(*opt));
    CHECK_FALSE(scaler.last_step_skipped());
  }
  CHECK(same_bits(ref.w, scaled.w));
  CHECK(same_bits(ref.b, scaled.b));

  for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    const Tensor w_before = scaled.w.clone(), b_before = scaled.b.clone();
    const nn::StateDict state_before = opt->state_dict();
    opt->zero_grad();
    scaler.scale(golden_loss(scaled.x, scaled.y, scaled.w, scaled.b)).backward();
    Tensor g = scaled.w.grad().clone();
    g.data_ptr<float>()[3] = static_cast<float>(bad);
    scaled.w.set_grad(g);
    Tensor found = scaler.unscale_(*opt);
    CHECK(found.item<float>() == 1.0f);
    CHECK_FALSE(scaler.step(*opt));
    CHECK(scaler.last_step_skipped());
    CHECK(same_bits(scaled.w, w_before));
    CHECK(same_bits(scaled.b, b_before));
    const nn::StateDict state_after = opt->state_dict();
    for (size_t i = 0; i < state_before.size(); ++i)
      CHECK(same_bits(state_before[i].second, state_after[i].second));
  }
  CHECK(scaler.skipped_steps() == 2);
  CHECK(scaler.steps() == 4);
}
