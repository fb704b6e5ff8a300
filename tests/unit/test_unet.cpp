// UNet 2-D for binary segmentation (models/unet.hpp) and its Severstal-like data set
// (datasets/generated_masks.hpp): modelzoo's checkpoint names, the parameter count of the
// 256x256 config, config and input errors, BCE with logits against its definition, the forward
// pass and gradients against PyTorch 1.13 (tests/golden/unet.json, made by gen_unet.py), the data
// set's determinism, and training reaching a dice score well above the trivial one.
#include <catch2/catch.hpp>

#include <ipuml/datasets/generated_masks.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/unet.hpp>

#include "../support/error_of.hpp"
#include "../support/golden.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace ipuml;
using namespace ipuml::models;
using ipuml::datasets::GeneratedMasks;
using ipuml::datasets::GeneratedMasksOptions;
using ipuml::testing::error_of;
using ipuml::testing::formula_weights;
using ipuml::testing::require_close;
using nlohmann::json;

namespace {

Tensor formula_input(int64_t channels) {
  std::vector<float> v(static_cast<size_t>(2 * channels * 256));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(0.5 + 0.5 * std::cos(0.011 * static_cast<double>(i) + 0.3));
  return from_vector(v, {2, channels, 16, 16});
}

Tensor formula_mask() {
  std::vector<float> v(2 * 256);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(0.23 * static_cast<double>(i) + 0.5) > 0.3 ? 1.0f : 0.0f;
  return from_vector(v, {2, 1, 16, 16});
}

// A 3x3 same conv stack of `convs` convolutions with biases, counted by hand.
int64_t conv_params(int64_t in, int64_t out, int64_t k, bool bias) {
  return in * out * k * k + (bias ? out : 0);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.numel()) * 4) == 0;
}

// Adam on the tiny UNet over `steps` batches of the generated set; returns the dice score on
// held-out samples and the dice of the best trivial prediction (every pixel a defect) there.
std::pair<double, double> train_tiny(int steps, int64_t batch, double lr) {
  manual_seed(11);
  UNet net(UNetConfig::tiny());
  GeneratedMasks train(GeneratedMasksOptions{.size = 4096, .height = 16, .width = 16, .seed = 1});
  GeneratedMasks held_out(GeneratedMasksOptions{.size = 256, .height = 16, .width = 16, .seed = 2});
  optim::Adam adam(net->parameters(), optim::AdamOptions(lr));
  std::vector<int64_t> idx(static_cast<size_t>(batch));
  for (int step = 0; step < steps; ++step) {
    for (int64_t r = 0; r < batch; ++r)
      idx[static_cast<size_t>(r)] = (step * batch + r) % train.size();
    const data::Example ex = train.get_batch(idx);
    adam.zero_grad();
    const Tensor loss = net->loss(net(ex.data), ex.target);
    loss.backward();
    adam.step();
  }
  std::vector<int64_t> all(static_cast<size_t>(held_out.size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const data::Example ex = held_out.get_batch(all);
  NoGradGuard no_grad;
  const SegmentationCounts c = segmentation_counts(net(ex.data), ex.target);
  const double positives = c.actual, pixels = static_cast<double>(ex.target.numel());
  INFO("dice " << c.dice() << ", iou " << c.iou() << ", defect pixels " << positives / pixels);
  return {c.dice(), 2.0 * positives / (pixels + positives)};
}

}  // namespace

TEST_CASE("unet: modelzoo's parameter names and the 256x256 config's size", "[zoo][unet]") {
  UNet tiny(UNetConfig::tiny());
  std::vector<std::string> keys;
  for (auto& [name, t] : tiny->state_dict()) keys.push_back(name);
  REQUIRE(keys.size() == 2 * (2 * 2) * 2 + 2 * 2 + 2 * 2 + 2);
  CHECK(keys.front() == "encoder.unet_blocks.0.layers.0.0.weight");
  CHECK(keys[8] == "bottleneck.layers.0.0.weight");
  CHECK(keys[12] == "decoder.unet_blocks.0.layers.0.0.weight");
  CHECK(keys[20] == "decoder.transpose_layers.0.weight");
  CHECK(keys.back() == "final_conv.0.bias");
  CHECK(tiny->decoder->transpose_layers->at<nn::ConvTranspose2dImpl>(0).weight.shape() ==
        Shape{16, 8, 2, 2});
  CHECK(tiny(zeros({2, 1, 16, 16})).shape() == Shape{2, 1, 16, 16});
  CHECK(tiny(zeros({1, 1, 32, 8})).shape() == Shape{1, 1, 32, 8});

  // unet_256 with RGB input, counted here layer by layer: 3x3 convs with biases, 2x2 up-convs
  // with biases, the final 1x1 conv.
  const std::vector<int64_t> f{64, 128, 256, 512};
  int64_t expect = 0, in = 3;
  for (int64_t w : f) {
    expect += conv_params(in, w, 3, true) + conv_params(w, w, 3, true);
    in = w;
  }
  expect += conv_params(512, 1024, 3, true) + conv_params(1024, 1024, 3, true);
  in = 1024;
  for (int64_t i = 3; i >= 0; --i) {
    const int64_t w = f[static_cast<size_t>(i)];
    expect += conv_params(in, w, 2, true);                                  // up-conv
    expect += conv_params(2 * w, w, 3, true) + conv_params(w, w, 3, true);  // after the concat
    in = w;
  }
  expect += conv_params(64, 1, 1, true);
  CHECK(expect == 31031745);  // as PyTorch counts gen_unet.py's UNet(3, [64..512], 1024)
  const UNetConfig big = UNetConfig::unet_256().in_channels(3);
  CHECK(big.num_parameters() == expect);
  UNet net(big);
  int64_t count = 0;
  for (auto& p : net->parameters()) count += p.numel();
  CHECK(count == expect);
  // With batch norm (Severstal's config) the convs lose their biases and gain gamma and beta.
  UNet bn(UNetConfig::tiny().norm(true));
  int64_t bn_count = 0;
  for (auto& p : bn->parameters()) bn_count += p.numel();
  CHECK(bn_count == UNetConfig::tiny().norm(true).num_parameters());
  auto& cna = bn->bottleneck->layers->at<nn::SequentialImpl>(0);  // conv, norm, act
  REQUIRE(cna.size() == 3);
  CHECK(cna[1]->type_name() == "BatchNorm2d");
  CHECK(cna[2]->type_name() == "ReLU");
  CHECK_FALSE(cna.at<nn::Conv2dImpl>(0).bias.defined());
}

TEST_CASE("unet: bad configs and inputs are refused naming what was wrong", "[zoo][unet]") {
  auto built = [](const UNetConfig& c) { return error_of([&] { UNet net(c); }); };
  CHECK_THAT(built(UNetConfig::tiny().height(18)),
             Catch::Contains("an image of 18x16 cannot go through 2 2x2 max-pools") &&
                 Catch::Contains("multiples of 2^2 = 4"));
  CHECK_THAT(built(UNetConfig().width(100)), Catch::Contains("an image of 256x100"));
  CHECK_THAT(built(UNetConfig::tiny().in_channels(0)),
             Catch::Contains("in_channels must be in [1, 65536], got 0"));
  CHECK_THAT(built(UNetConfig::tiny().num_classes(-1)), Catch::Contains("got -1"));
  CHECK_THAT(built(UNetConfig::tiny().encoder_filters({})),
             Catch::Contains("encoder_filters must have 1 to 12 entries, got 0"));
  CHECK_THAT(built(UNetConfig::tiny().encoder_filters({4, 0})),
             Catch::Contains("encoder_filters must be in [1, 65536], got [4, 0]"));
  CHECK_THAT(built(UNetConfig::tiny().decoder_filters({8})),
             Catch::Contains("decoder_filters needs one entry per encoder block (2), got 1"));
  CHECK_THAT(built(UNetConfig::tiny().activation("gelu")),
             Catch::Contains("activation 'gelu' is not supported"));
  CHECK_THAT(built(UNetConfig::tiny().initializer("orthogonal")),
             Catch::Contains("initializer 'orthogonal' is not one of"));
  CHECK_THAT(built(UNetConfig::tiny().kernel_size(4)), Catch::Contains("kernel_size must be odd"));
  CHECK_THAT(built(UNetConfig::tiny().convs_per_block(0)),
             Catch::Contains("convs_per_block must be in [1, 16], got 0"));
  CHECK_THAT(built(UNetConfig().encoder_filters({65536, 65536, 65536}).bottleneck(65536)),
             Catch::Contains("parameters, expected at most 2^32"));

  UNet net(UNetConfig::tiny());
  CHECK_THAT(error_of([&] {
               net(zeros({2, 1, 18, 16}));
             }),
             Catch::Contains("UNet: an image of 18x16 cannot go through 2 2x2 max-pools"));
  CHECK_THAT(error_of([&] { net(zeros({2, 1, 16, 2})); }), Catch::Contains("an image of 16x2"));
  CHECK_THAT(error_of([&] {
               net(zeros({2, 3, 16, 16}));
             }),
             Catch::Contains("UNet: expected an input [B, 1, H, W], got shape [2, 3, 16, 16]"));
  CHECK_THAT(error_of([&] { net(zeros({1, 16, 16})); }), Catch::Contains("got shape [1, 16, 16]"));
  CHECK_THAT(error_of([&] {
               binary_cross_entropy_with_logits(zeros({2, 1, 4, 4}), zeros({2, 4}));
             }),
             Catch::Contains("logits of shape [2, 1, 4, 4] and target of shape [2, 4] differ"));
  CHECK_THAT(error_of([&] { binary_cross_entropy_with_logits(zeros({4}), zeros({4}, kInt64)); }),
             Catch::Contains("expected a floating target") && Catch::Contains("int64"));
  CHECK_THAT(error_of([&] {
               dice_score(zeros({2, 2, 4, 4}), zeros({2, 1, 4, 4}));
             }),
             Catch::Contains("expected binary logits [B, 1, H, W], got shape [2, 2, 4, 4]"));
  CHECK_THAT(error_of([&] {
               iou_score(zeros({2, 1, 4, 4}), zeros({2, 1, 4, 3}));
             }),
             Catch::Contains("a mask of shape [2, 1, 4, 3] for logits of shape [2, 1, 4, 4]"));
}

TEST_CASE("unet: BCE with logits and the scores against their definitions", "[zoo][unet]") {
  // Extreme logits: the naive -y log s(x) - (1-y) log(1-s(x)) would give inf or nan.
  const std::vector<float> xs{-200.0f, -20.0f, -1.5f, 0.0f, 0.25f, 3.0f, 30.0f, 150.0f};
  const std::vector<float> ys{0.0f, 1.0f, 1.0f, 0.0f, 0.7f, 0.0f, 1.0f, 0.0f};
  Tensor x = from_vector(xs, {8}).requires_grad_(true);
  const Tensor y = from_vector(ys, {8});
  const Tensor per = binary_cross_entropy_with_logits(x, y, Reduction::None);
  const auto got = per.to_vector<float>();
  double total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double xi = xs[i], yi = ys[i];
    const double expect = std::max(xi, 0.0) - xi * yi + std::log1p(std::exp(-std::abs(xi)));
    CHECK(got[i] == Approx(expect).epsilon(1e-6).margin(1e-6));
    total += expect;
  }
  const Tensor loss = binary_cross_entropy_with_logits(x, y);
  CHECK(loss.item<float>() == Approx(total / 8).epsilon(1e-6));
  CHECK(binary_cross_entropy_with_logits(x, y, Reduction::Sum).item<float>() ==
        Approx(total).epsilon(1e-6));
  loss.backward();
  const auto g = x.grad().to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double s = 1.0 / (1.0 + std::exp(-static_cast<double>(xs[i])));
    CHECK(g[i] == Approx((s - ys[i]) / 8).margin(1e-7));  // exact at x = 0 too
  }

  // Dice and IoU by counting: predicted {0, 1, 2}, actual {1, 2, 3}.
  const Tensor logits = from_vector(std::vector<float>{2, 1, 0.5f, -1, -3, -0.1f}, {1, 1, 2, 3});
  const Tensor mask = from_vector(std::vector<float>{0, 1, 1, 1, 0, 0}, {1, 1, 2, 3});
  CHECK(dice_score(logits, mask) == Approx(2.0 * 2 / 6));
  CHECK(iou_score(logits, mask) == Approx(2.0 / 4));
  CHECK(dice_score(full({1, 1, 2, 3}, -1.0), zeros({1, 2, 3})) == 1.0);  // nothing, none found
  CHECK(iou_score(full({1, 1, 2, 3}, 1.0), zeros({1, 1, 2, 3})) == 0.0);
}

TEST_CASE("unet: forward and gradients match PyTorch", "[zoo][unet][golden]") {
  const json g = ipuml::testing::load_golden("unet.json");
  for (const json& c : g.at("cases")) {
    INFO("case " << c.at("name").get<std::string>());
    const int64_t channels = c.at("in_channels");
    UNet net(UNetConfig::tiny()
                 .in_channels(channels)
                 .encoder_filters(c.at("encoder_filters").get<std::vector<int64_t>>())
                 .bottleneck(c.at("bottleneck"))
                 .norm(c.at("norm").get<bool>())
                 .enable_bias(c.at("bias").get<bool>()));
    std::vector<std::string> keys;
    for (auto& [k, t] : net->state_dict()) {
      keys.push_back(k);
      CHECK(t.shape() == c.at("shapes").at(k).get<Shape>());
    }
    CHECK(keys == c.at("keys").get<std::vector<std::string>>());

    const auto params = c.at("params").get<std::vector<std::string>>();
    nn::StateDict d;
    const nn::StateDict named = net->named_parameters();
    REQUIRE(named.size() == params.size());
    for (size_t k = 0; k < params.size(); ++k) {
      REQUIRE(named[k].first == params[k]);
      d.emplace_back(params[k], formula_weights(static_cast<int>(k), named[k].second.shape()));
    }
    for (auto& [k, t] : net->named_buffers()) d.emplace_back(k, t.clone());
    net->load_state_dict(d);
    net->train();

    const Tensor logits = net(formula_input(channels));
    require_close(logits, c.at("logits"), 1e-5, 1e-5, "logits");
    const double expect_loss = c.at("loss");
    const Tensor loss = net->loss(logits, formula_mask());
    CHECK(loss.item<float>() == Approx(expect_loss).epsilon(1e-5));
    loss.backward();
    const double logit_err =
        amax(abs(sub(logits, testing::tensor_from_json(c.at("logits"))))).item<float>();
    double grad_err = 0;
    for (auto& [k, p] : net->named_parameters()) {
      if (!c.at("grads").contains(k)) continue;
      require_close(p.grad(), c.at("grads").at(k), 1e-6, 1e-4, k);
      grad_err = std::max<double>(
          grad_err,
          amax(abs(sub(p.grad(), testing::tensor_from_json(c.at("grads").at(k))))).item<float>());
    }
    INFO("max |logit error| " << logit_err << ", max |gradient error| " << grad_err << ", loss "
                              << loss.item<float>() << " vs " << expect_loss);
  }
}

TEST_CASE("unet: the generated masks are a pure function of seed and index", "[unet][data]") {
  const GeneratedMasksOptions o{.size = 64, .channels = 3, .height = 32, .width = 48, .seed = 7};
  GeneratedMasks a(o), b(o);
  const data::Example x = a.get(5), y = b.get(5);
  CHECK(x.data.shape() == Shape{3, 32, 48});
  CHECK(x.target.shape() == Shape{1, 32, 48});
  CHECK(same_bits(x.data, y.data));
  CHECK(same_bits(x.target, y.target));
  CHECK_FALSE(same_bits(a.get(6).data, x.data));
  // A batch holds the same bits as the samples one by one, in any order.
  const std::vector<int64_t> idx{9, 5, 9};
  const data::Example batch = a.get_batch(idx);
  CHECK(batch.data.shape() == Shape{3, 3, 32, 48});
  CHECK(batch.target.shape() == Shape{3, 1, 32, 48});
  CHECK(same_bits(batch.data.select(0, 1), x.data));
  CHECK(same_bits(batch.target.select(0, 0), batch.target.select(0, 2)));
  // Another seed, other images.
  GeneratedMasksOptions other = o;
  other.seed = 8;
  CHECK_FALSE(same_bits(GeneratedMasks(other).get(5).data, x.data));

  // Masks are 0/1, most are not empty, defects differ from the surface around them.
  int nonempty = 0, distinct_masks = 0;
  double inside = 0, outside = 0, n_in = 0, n_out = 0;
  Tensor previous;
  for (int64_t i = 0; i < o.size; ++i) {
    const data::Example e = a.get(i);
    const auto m = e.target.to_vector<float>();
    const auto px = e.data.to_vector<float>();
    int64_t ones = 0;
    for (float v : m) {
      REQUIRE((v == 0.0f || v == 1.0f));
      ones += v == 1.0f;
    }
    nonempty += ones > 0;
    CHECK(ones < static_cast<int64_t>(m.size()) / 2);  // defects, not the whole surface
    if (previous.defined() && !same_bits(previous, e.target)) ++distinct_masks;
    previous = e.target;
    for (size_t k = 0; k < px.size(); ++k) {
      const double dev = std::abs(px[k] - 0.5);
      (m[k % m.size()] == 1.0f ? inside : outside) += dev;
      (m[k % m.size()] == 1.0f ? n_in : n_out) += 1;
    }
  }
  INFO(nonempty << " of 64 masks non-empty");
  CHECK(nonempty >= 45);
  CHECK(nonempty < 64);  // some clean surfaces, as in Severstal
  CHECK(distinct_masks >= 50);
  CHECK(inside / n_in > 1.5 * (outside / n_out));

  // Noise level 0: every channel the same, and surface pixels only vary by the gradient.
  GeneratedMasksOptions quiet = o;
  quiet.noise = 0.0;
  const Tensor img = GeneratedMasks(quiet).get(3).data;
  CHECK(same_bits(img.select(0, 0), img.select(0, 2)));

  auto made = [](GeneratedMasksOptions opt) { return error_of([&] { GeneratedMasks m(opt); }); };
  GeneratedMasksOptions bad = o;
  bad.height = 0;
  CHECK_THAT(made(bad), Catch::Contains("height 0 and width 48 must all be >= 1"));
  bad = o;
  bad.noise = -0.5;
  CHECK_THAT(made(bad), Catch::Contains("noise must be in [0, 10], got -0.5"));
  bad = o;
  bad.noise = std::nan("");
  CHECK_THAT(made(bad), Catch::Contains("noise must be in [0, 10]"));
  bad = o;
  bad.max_defects = 0;
  CHECK_THAT(made(bad), Catch::Contains("max_defects must be in [1, 64], got 0"));
  bad = o;
  bad.channels = 1000;
  CHECK_THAT(made(bad), Catch::Contains("an image of 1000x32x48 is too large"));
  CHECK_THAT(error_of([&] { a.get(64); }), Catch::Contains("GeneratedMasks::get"));
  CHECK_THAT(error_of([&] {
               const std::vector<int64_t> i{0, -1};
               a.get_batch(i);
             }),
             Catch::Contains("GeneratedMasks::get_batch"));
}

TEST_CASE("unet: a short training run beats the trivial dice score", "[zoo][unet]") {
  const auto [dice, trivial] = train_tiny(300, 16, 1e-2);
  WARN("tiny UNet, 300 Adam steps of 16: held-out dice " << dice << " (predicting every pixel "
                                                         << "a defect: " << trivial << ")");
  CHECK(trivial < 0.35);
  CHECK(dice > 0.6);
  CHECK(dice > trivial + 0.4);
}

TEST_CASE("unet: a few hundred steps learn the defects", "[.][zoo][unet][unet_slow]") {
  const auto [dice, trivial] = train_tiny(1000, 32, 5e-3);
  WARN("tiny UNet, 1000 Adam steps of 32: held-out dice " << dice << " (predicting every pixel "
                                                          << "a defect: " << trivial << ")");
  CHECK(dice > 0.85);
  CHECK(dice > trivial + 0.6);
}
