// F::interpolate with LibTorch's InterpolateFuncOptions: values worked out by hand for small
// inputs, gradients against finite differences, the refusals LibTorch makes, and the eager IPU
// device. PyTorch's own values and gradients for every mode are in tests/golden/ops.json
// ("interpolate_*" cases, run by test_ops_golden.cpp).
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

#include "../support/error_of.hpp"

using namespace ipuml;
namespace F = ipuml::nn::functional;
using Catch::Matchers::Contains;
using ipuml::testing::error_of;

namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

void require_near(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).margin(1e-6));
  }
}

}  // namespace

TEST_CASE("interpolate: LibTorch's call shapes and values worked out by hand",
          "[interpolate][libtorch]") {
  const Tensor x = tensor({{0.f, 1.f}, {2.f, 3.f}}).reshape({1, 1, 2, 2});

  // Nearest (the default mode), x2: every sample repeated in a 2x2 block.
  Tensor n = F::interpolate(x, F::InterpolateFuncOptions().size(std::vector<int64_t>({4, 4})));
  CHECK(n.shape() == Shape{1, 1, 4, 4});
  CHECK(values(n) == std::vector<float>{0, 0, 1, 1, 0, 0, 1, 1, 2, 2, 3, 3, 2, 2, 3, 3});
  CHECK(values(F::interpolate(x, F::InterpolateFuncOptions().scale_factor({2.0, 2.0}))) ==
        values(n));

  // Bilinear, align_corners: the corners stay and the rest is linear between them.
  Tensor ac = F::interpolate(
      x, F::InterpolateFuncOptions().size({3, 3}).mode(kBilinear).align_corners(true));
  require_near(values(ac), {0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3});

  // Bilinear, half-pixel centres (align_corners false): source = (o + 0.5) / 2 - 0.5, clamped
  // at 0, so output column 1 reads 0.25 of the way from column 0 to 1.
  Tensor hp = F::interpolate(
      x, F::InterpolateFuncOptions().size({4, 4}).mode(kBilinear).align_corners(false));
  const std::vector<float> row = {0, 0.25, 0.75, 1};
  std::vector<float> want;
  for (float r : {0.f, 0.25f, 0.75f, 1.f})
    for (float c : row) want.push_back(2 * r + c);
  require_near(values(hp), want);

  // Linear on [N, C, L] with torch::kLinear (ipuml's kLinear).
  Tensor l =
      F::interpolate(tensor({0.f, 10.f, 20.f}).reshape({1, 1, 3}),
                     F::InterpolateFuncOptions().size({5}).mode(kLinear).align_corners(true));
  require_near(values(l), {0, 5, 10, 15, 20});

  // Bicubic with align_corners: the samples themselves are kept (weights 0, 1, 0, 0 there),
  // and away from the borders (where the clamped reads bend it) a ramp stays a straight line,
  // since the cubic kernel reproduces straight lines.
  Tensor ramp = arange(0.0, 6.0).reshape({1, 1, 1, 6});
  const auto c = values(F::interpolate(
      ramp, F::InterpolateFuncOptions().size({1, 11}).mode(kBicubic).align_corners(true)));
  REQUIRE(c.size() == 11);
  for (size_t o = 0; o < 11; o += 2) CHECK(c[o] == static_cast<float>(o / 2));
  for (size_t o = 2; o < 8; ++o) CHECK(c[o] == Approx(0.5 * static_cast<double>(o)).margin(1e-6));
  CHECK(c[1] != Approx(0.5).margin(1e-3));  // the border's clamped read bends it

  // Area: averages of equal blocks.
  Tensor a = F::interpolate(arange(0.0, 16.0).reshape({1, 1, 4, 4}),
                            F::InterpolateFuncOptions().size({2, 2}).mode(kArea));
  require_near(values(a), {2.5, 4.5, 10.5, 12.5});

  // Nearest-exact rounds half-pixel centres: 5 -> 3 picks 0, 2, 4 (nearest picks 0, 1, 3).
  Tensor five = arange(0.0, 5.0).reshape({1, 1, 5});
  CHECK(values(F::interpolate(five, F::InterpolateFuncOptions().size({3}).mode(kNearestExact))) ==
        std::vector<float>{0, 2, 4});
  CHECK(values(F::interpolate(five, F::InterpolateFuncOptions().size({3}))) ==
        std::vector<float>{0, 1, 3});

  // 5-d trilinear up by one in each dimension with align_corners keeps the corners.
  Tensor v = arange(0.0, 8.0).reshape({1, 1, 2, 2, 2});
  Tensor t = F::interpolate(
      v, F::InterpolateFuncOptions().size({3, 3, 3}).mode(kTrilinear).align_corners(true));
  CHECK(t.shape() == Shape{1, 1, 3, 3, 3});
  CHECK(t.index({0, 0, 2, 2, 2}).item<float>() == Approx(7.0));
  CHECK(t.index({0, 0, 1, 1, 1}).item<float>() == Approx(3.5));
}

TEST_CASE("interpolate: gradients pass gradcheck", "[interpolate][autograd]") {
  Generator gen(5);
  struct Case {
    const char* name;
    Shape shape;
    F::InterpolateFuncOptions options;
  };
  const std::vector<Case> cases = {
      {"nearest 2d", {1, 2, 3, 2}, F::InterpolateFuncOptions().size({5, 3})},
      {"linear", {2, 1, 4}, F::InterpolateFuncOptions().size({7}).mode(kLinear)},
      {"bilinear", {1, 2, 3, 4}, F::InterpolateFuncOptions().size({5, 3}).mode(kBilinear)},
      {"bilinear align_corners",
       {1, 1, 3, 3},
       F::InterpolateFuncOptions().scale_factor({1.5, 2.0}).mode(kBilinear).align_corners(true)},
      {"bicubic", {1, 1, 4, 3}, F::InterpolateFuncOptions().size({6, 5}).mode(kBicubic)},
      {"bicubic down align_corners",
       {1, 1, 5, 6},
       F::InterpolateFuncOptions().size({3, 4}).mode(kBicubic).align_corners(true)},
      {"trilinear", {1, 1, 2, 3, 2}, F::InterpolateFuncOptions().size({3, 2, 4}).mode(kTrilinear)},
      {"area", {1, 1, 5, 4}, F::InterpolateFuncOptions().size({2, 3}).mode(kArea)},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Tensor x = randn(c.shape, &gen).requires_grad_();
    auto f = [&](const std::vector<Tensor>& in) { return F::interpolate(in[0], c.options); };
    const auto result = autograd::gradcheck(f, {x});
    INFO(result.message);
    CHECK(result.ok);
  }
}

TEST_CASE("interpolate: refuses what LibTorch refuses, with its messages",
          "[interpolate][errors]") {
  const Tensor x4 = ones({1, 1, 2, 2});
  using O = F::InterpolateFuncOptions;
  CHECK_THAT(error_of([&] { F::interpolate(x4, O().mode(kBilinear)); }),
             Contains("either size or scale_factor should be defined"));
  CHECK_THAT(error_of([&] {
               F::interpolate(x4, O().size({3, 3}).scale_factor({2.0, 2.0}));
             }),
             Contains("only one of size or scale_factor should be defined"));
  CHECK_THAT(error_of([&] {
               F::interpolate(x4, O().size({3, 3}).align_corners(true));
             }),
             Contains("align_corners option can only be set with the interpolating modes"));
  CHECK_THAT(error_of([&] { F::interpolate(x4, O().size({3}).mode(kLinear)); }),
             Contains("got 4D input, but linear mode needs 3D input"));
  CHECK_THAT(error_of([&] {
               F::interpolate(ones({1, 1, 3}), O().size({3}).mode(kBilinear));
             }),
             Contains("got 3D input, but bilinear mode needs 4D input"));
  CHECK_THAT(error_of([&] { F::interpolate(x4, O().scale_factor({2.0})); }),
             Contains("scale_factor shape must match input shape. Input is 2D"));
  CHECK_THAT(error_of([&] { F::interpolate(x4, O().size({3})); }),
             Contains("size must have 2 values"));
  CHECK_THAT(error_of([&] {
               F::interpolate(ones({4, 4}), O().size({3}));
             }),
             Contains("only 3-d, 4-d and 5-d inputs"));
  CHECK_THAT(error_of([&] {
               F::interpolate(x4, O().scale_factor({0.1, 1.0}));
             }),
             Contains("output's spatial sizes must be positive"));
  CHECK_THAT(error_of([&] {
               F::interpolate(x4, O().size({3, 3}).mode(kBilinear).antialias(true));
             }),
             Contains("antialias is not implemented"));
  CHECK_THAT(error_of([&] {
               F::interpolate(ones({1, 1, 2, 2}, kInt64), O().size({3, 3}).mode(kBicubic));
             }),
             Contains("needs a floating-point input"));
  CHECK_THAT(error_of([&] { O().mode(kReLU); }), Contains("expected an interpolation mode"));
  // Nearest copies any dtype.
  CHECK(F::interpolate(tensor({1, 2}).reshape({1, 1, 2}), O().size({4})).to_vector<int64_t>() ==
        std::vector<int64_t>{1, 1, 2, 2});
}

TEST_CASE("interpolate: runs on the eager IPU device with the CPU's values",
          "[interpolate][devices]") {
  Generator gen(9);
  Tensor x = randn({1, 2, 3, 4}, &gen);
  const auto o = F::InterpolateFuncOptions().size({5, 6}).mode(kBilinear).align_corners(false);
  Tensor on_cpu = F::interpolate(x, o);
  Tensor on_ipu = F::interpolate(x.to(kIPU), o);
  CHECK(on_ipu.device() == Device(kIPU));
  require_near(values(on_ipu.cpu()), values(on_cpu));
}
