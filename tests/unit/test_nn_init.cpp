// nn::init and the modules' default initialisation: PyTorch's bounds and statistics, in-place
// updates of parameters, reproducibility under manual_seed and an explicit Generator.
#include <cmath>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/nn/nn.hpp>

using namespace ipuml;
using Catch::Matchers::Contains;

namespace {

struct Stats {
  double min, max, mean, std;
};
Stats stats(const Tensor& t) {
  auto v = t.to_vector<double>();
  Stats s{v[0], v[0], 0.0, 0.0};
  for (double x : v) {
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    s.mean += x;
  }
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / static_cast<double>(v.size() - 1));
  return s;
}

}  // namespace

TEST_CASE("nn::init fan computation and gains follow PyTorch", "[nn][init]") {
  auto [in, out] = nn::init::calculate_fan_in_and_fan_out(zeros({64, 32, 3, 3}));
  CHECK(in == 32 * 9);
  CHECK(out == 64 * 9);
  auto [lin_in, lin_out] = nn::init::calculate_fan_in_and_fan_out(zeros({128, 1600}));
  CHECK(lin_in == 1600);
  CHECK(lin_out == 128);
  CHECK_THROWS_WITH(nn::init::calculate_fan_in_and_fan_out(zeros({5})),
                    Contains("fewer than 2 dimensions"));
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::ReLU) == Approx(std::sqrt(2.0)));
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::Tanh) == Approx(5.0 / 3.0));
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::LeakyReLU, std::sqrt(5.0)) ==
        Approx(std::sqrt(1.0 / 3.0)));
}

TEST_CASE("nn Linear(1600, 128) default init is U(-1/40, 1/40) for weight and bias", "[nn][init]") {
  manual_seed(3);
  nn::Linear fc(1600, 128);
  const double bound = 1.0 / 40.0;
  Stats w = stats(fc->weight);
  CHECK(w.min >= -bound);
  CHECK(w.max <= bound);
  CHECK(w.min < -0.99 * bound);  // the whole range is used
  CHECK(w.max > 0.99 * bound);
  CHECK(std::abs(w.mean) < 2e-4);
  CHECK(w.std == Approx(bound / std::sqrt(3.0)).epsilon(0.01));
  Stats b = stats(fc->bias);
  CHECK(b.min >= -bound);
  CHECK(b.max <= bound);
  CHECK(b.std == Approx(bound / std::sqrt(3.0)).epsilon(0.2));
  CHECK(fc->weight.requires_grad());
  CHECK(fc->weight.is_leaf());
}

TEST_CASE("nn Conv2d default init uses fan_in = in/groups * kH * kW", "[nn][init]") {
  manual_seed(4);
  nn::Conv2d conv(nn::Conv2dOptions(32, 64, 3).groups(2));
  CHECK(conv->weight.shape() == Shape{64, 16, 3, 3});
  const double bound = 1.0 / std::sqrt(16.0 * 9.0);
  Stats w = stats(conv->weight);
  CHECK(w.min >= -bound);
  CHECK(w.max <= bound);
  CHECK(w.std == Approx(bound / std::sqrt(3.0)).epsilon(0.02));
  Stats b = stats(conv->bias);
  CHECK(b.min >= -bound);
  CHECK(b.max <= bound);
}

TEST_CASE("nn Embedding is N(0, 1), norms are weight 1 bias 0, padding row zero", "[nn][init]") {
  manual_seed(5);
  nn::Embedding emb(nn::EmbeddingOptions(1000, 64).padding_idx(3));
  Stats e = stats(emb->weight.narrow(0, 4, 996));
  CHECK(std::abs(e.mean) < 0.01);
  CHECK(e.std == Approx(1.0).epsilon(0.01));
  for (float v : emb->weight.select(0, 3).to_vector<float>()) CHECK(v == 0.0f);

  nn::BatchNorm2d bn(8);
  nn::GroupNorm gn(2, 8);
  nn::LayerNorm ln(8);
  for (const Tensor* t : {&bn->weight, &gn->weight, &ln->weight})
    for (float v : t->to_vector<float>()) CHECK(v == 1.0f);
  for (const Tensor* t : {&bn->bias, &gn->bias, &ln->bias})
    for (float v : t->to_vector<float>()) CHECK(v == 0.0f);
  for (float v : bn->running_var.to_vector<float>()) CHECK(v == 1.0f);
  CHECK(bn->num_batches_tracked.item<int64_t>() == 0);
}

TEST_CASE("nn::init initialisers write in place with the requested distribution", "[nn][init]") {
  manual_seed(6);
  Tensor w = zeros({256, 512});
  w.requires_grad_(true);
  const Tensor same = w;
  nn::init::xavier_uniform_(w);
  CHECK(same.same(w));
  const double xb = std::sqrt(6.0 / (256.0 + 512.0));
  Stats xu = stats(w);
  CHECK(xu.min >= -xb);
  CHECK(xu.max <= xb);
  CHECK(xu.std == Approx(xb / std::sqrt(3.0)).epsilon(0.02));

  nn::init::xavier_normal_(w, 2.0);
  CHECK(stats(w).std == Approx(2.0 * std::sqrt(2.0 / 768.0)).epsilon(0.02));
  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::FanOut, nn::init::Nonlinearity::ReLU);
  CHECK(stats(w).std == Approx(std::sqrt(2.0 / 256.0)).epsilon(0.02));
  nn::init::kaiming_uniform_(w, 0.0, nn::init::FanMode::FanIn, nn::init::Nonlinearity::ReLU);
  CHECK(stats(w).max <= std::sqrt(6.0 / 512.0));
  nn::init::normal_(w, 3.0, 0.5);
  Stats n = stats(w);
  CHECK(n.mean == Approx(3.0).epsilon(0.01));
  CHECK(n.std == Approx(0.5).epsilon(0.02));
  nn::init::uniform_(w, 2.0, 4.0);
  Stats u = stats(w);
  CHECK(u.min >= 2.0);
  CHECK(u.max <= 4.0);
  nn::init::constant_(w, 0.25);
  CHECK(stats(w).min == 0.25);
  nn::init::ones_(w);
  CHECK(stats(w).max == 1.0);
  nn::init::zeros_(w);
  CHECK(stats(w).max == 0.0);
  CHECK(w.requires_grad());
  CHECK(w.grad_fn() == nullptr);
  CHECK_THROWS_WITH(nn::init::uniform_(w, 1.0, 0.0), Contains("exceeds upper bound"));
}

TEST_CASE("nn model init is reproducible under manual_seed and with a Generator", "[nn][init]") {
  auto build = [] {
    return nn::Sequential(nn::Conv2d(1, 4, 3), nn::ReLU(), nn::Flatten(),
                          nn::Linear(4 * 26 * 26, 10), nn::Embedding(7, 3));
  };
  manual_seed(42);
  auto a = build();
  manual_seed(42);
  auto b = build();
  manual_seed(43);
  auto c = build();
  auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  REQUIRE(pa.size() == 5);
  bool any_diff = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    CHECK(pa[i].to_vector<float>() == pb[i].to_vector<float>());
    any_diff = any_diff || pa[i].to_vector<float>() != pc[i].to_vector<float>();
  }
  CHECK(any_diff);

  // Weight and bias are separate draws.
  CHECK(pa[0].to_vector<float>()[0] != pa[1].to_vector<float>()[0]);

  Generator g1(9), g2(9);
  nn::Linear l1(10, 10), l2(10, 10);
  l1->reset_parameters(&g1);
  l2->reset_parameters(&g2);
  CHECK(l1->weight.to_vector<float>() == l2->weight.to_vector<float>());
  CHECK(l1->bias.to_vector<float>() == l2->bias.to_vector<float>());
}
