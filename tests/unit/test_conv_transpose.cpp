// conv_transpose2d and nn::ConvTranspose2d: values against a naive scatter loop and as conv2d's
// adjoint, gradients by finite differences, half precision against float32, the module's
// parameters, initialisation and forward, and the errors bad shapes and options get. (PyTorch's
// values and gradients: test_ops_golden.cpp; the repr: test_nn_golden.cpp.)
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

using namespace ipuml;
using Catch::Matchers::Contains;
using Ts = std::vector<Tensor>;

namespace {

struct Geometry {
  int64_t n, c_in, h, w, c_out, kh, kw;
  std::vector<int64_t> stride, padding, output_padding;
  int64_t groups;
  std::vector<int64_t> dilation;
};

// The definition: every input element scatters its products with the kernel to
// (i * stride - padding + k * dilation); positions past the output are dropped.
std::vector<double> naive(const Geometry& g, const std::vector<double>& x,
                          const std::vector<double>& w, const std::vector<double>& bias,
                          int64_t& oh, int64_t& ow) {
  oh = (g.h - 1) * g.stride[0] - 2 * g.padding[0] + g.dilation[0] * (g.kh - 1) +
       g.output_padding[0] + 1;
  ow = (g.w - 1) * g.stride[1] - 2 * g.padding[1] + g.dilation[1] * (g.kw - 1) +
       g.output_padding[1] + 1;
  const int64_t cig = g.c_in / g.groups, cog = g.c_out / g.groups;
  std::vector<double> y(static_cast<size_t>(g.n * g.c_out * oh * ow), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t ci = 0; ci < g.c_in; ++ci)
      for (int64_t i = 0; i < g.h; ++i)
        for (int64_t j = 0; j < g.w; ++j) {
          const double xv = x[static_cast<size_t>(((n * g.c_in + ci) * g.h + i) * g.w + j)];
          const int64_t grp = ci / cig;
          for (int64_t oc = 0; oc < cog; ++oc)
            for (int64_t ki = 0; ki < g.kh; ++ki)
              for (int64_t kj = 0; kj < g.kw; ++kj) {
                const int64_t r = i * g.stride[0] - g.padding[0] + ki * g.dilation[0];
                const int64_t c = j * g.stride[1] - g.padding[1] + kj * g.dilation[1];
                if (r < 0 || r >= oh || c < 0 || c >= ow) continue;
                const double wv = w[static_cast<size_t>(((ci * cog + oc) * g.kh + ki) * g.kw + kj)];
                y[static_cast<size_t>(((n * g.c_out + grp * cog + oc) * oh + r) * ow + c)] +=
                    xv * wv;
              }
        }
  if (!bias.empty())
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t c = 0; c < g.c_out; ++c)
        for (int64_t p = 0; p < oh * ow; ++p)
          y[static_cast<size_t>((n * g.c_out + c) * oh * ow + p)] += bias[static_cast<size_t>(c)];
  return y;
}

Tensor leaf(const Shape& s, Generator& g, double scale = 1.0) {
  return mul(randn(s, &g), scale).detach().requires_grad_();
}

Tensor run(const Geometry& g, const Tensor& x, const Tensor& w, const Tensor& b) {
  return conv_transpose2d(x, w, b, g.stride, g.padding, g.output_padding, g.groups, g.dilation);
}

const std::vector<Geometry>& geometries() {
  static const std::vector<Geometry> gs = {
      {2, 4, 3, 5, 6, 2, 2, {2, 2}, {0, 0}, {0, 0}, 1, {1, 1}},  // UNet's up-convolution
      {1, 3, 4, 3, 2, 3, 3, {2, 2}, {1, 1}, {1, 1}, 1, {1, 1}},
      {2, 4, 3, 4, 6, 3, 2, {1, 2}, {0, 1}, {0, 1}, 2, {1, 1}},
      {1, 2, 4, 4, 4, 3, 3, {1, 1}, {2, 1}, {0, 0}, 2, {2, 2}},
      {1, 3, 3, 4, 2, 2, 3, {3, 2}, {1, 2}, {2, 1}, 1, {1, 2}},
      // output_padding >= stride (below the dilation): zero rows past the kernel's reach, and
      // rows only the padding hid.
      {1, 2, 3, 4, 3, 3, 2, {1, 1}, {0, 0}, {1, 1}, 1, {2, 2}},
      {2, 2, 3, 3, 2, 2, 3, {1, 2}, {1, 2}, {2, 1}, 2, {3, 3}},
      {1, 3, 2, 3, 3, 3, 2, {2, 1}, {3, 0}, {2, 0}, 1, {4, 1}},
  };
  return gs;
}

}  // namespace

TEST_CASE("conv_transpose2d gives the naive scatter loop's values", "[ops][conv_transpose]") {
  Generator gen(21);
  int idx = 0;
  for (const auto& g : geometries()) {
    for (bool with_bias : {true, false}) {
      INFO("geometry " << idx << (with_bias ? " with bias" : " without bias"));
      Tensor x = randn({g.n, g.c_in, g.h, g.w}, &gen);
      Tensor w = randn({g.c_in, g.c_out / g.groups, g.kh, g.kw}, &gen);
      Tensor b = with_bias ? randn({g.c_out}, &gen) : Tensor();
      int64_t oh = 0, ow = 0;
      const auto want = naive(g, x.to_vector<double>(), w.to_vector<double>(),
                              with_bias ? b.to_vector<double>() : std::vector<double>{}, oh, ow);
      const Tensor y = run(g, x, w, b);
      REQUIRE(y.shape() == Shape{g.n, g.c_out, oh, ow});
      const auto got = y.to_vector<double>();
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("element " << i);
        REQUIRE(got[i] == Approx(want[i]).margin(1e-5).epsilon(1e-5));
      }
    }
    ++idx;
  }
}

TEST_CASE("conv_transpose2d is the adjoint of conv2d", "[ops][conv_transpose]") {
  // <conv2d(x, w), y> = <x, conv_transpose2d(y, w)> with the same stride, padding, dilation and
  // groups, output_padding picking x's size among those conv2d maps onto y's.
  Generator gen(22);
  struct Case {
    Shape x, w;
    std::vector<int64_t> stride, padding, dilation;
    int64_t groups;
  };
  for (const Case& c : {Case{{2, 4, 9, 8}, {6, 2, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 2},
                        Case{{1, 3, 10, 7}, {4, 3, 2, 3}, {3, 2}, {0, 1}, {2, 1}, 1},
                        Case{{2, 2, 6, 6}, {2, 1, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 2}}) {
    const Tensor x = randn(c.x, &gen), w = randn(c.w, &gen);
    const Tensor y = conv2d(x, w, Tensor(), c.stride, c.padding, c.dilation, c.groups);
    const Tensor dy = randn(y.shape(), &gen);
    std::vector<int64_t> op(2);
    for (size_t i = 0; i < 2; ++i)
      op[i] = (c.x[2 + i] + 2 * c.padding[i] - c.dilation[i] * (c.w[2 + i] - 1) - 1) % c.stride[i];
    const Tensor t =
        conv_transpose2d(dy, w, Tensor(), c.stride, c.padding, op, c.groups, c.dilation);
    REQUIRE(t.shape() == x.shape());
    const double lhs = sum(mul(y, dy)).item<float>();
    const double rhs = sum(mul(x, t)).item<float>();
    CHECK(lhs == Approx(rhs).epsilon(1e-4).margin(1e-3));
  }
}

TEST_CASE("conv_transpose2d passes gradcheck for input weight and bias",
          "[ops][conv_transpose][gradcheck]") {
  Generator gen(23);
  int idx = 0;
  for (const auto& g : geometries()) {
    INFO("geometry " << idx++);
    const Ts in{leaf({g.n, g.c_in, g.h, g.w}, gen),
                leaf({g.c_in, g.c_out / g.groups, g.kh, g.kw}, gen, 0.5), leaf({g.c_out}, gen)};
    const auto r = autograd::gradcheck([&](const Ts& v) { return run(g, v[0], v[1], v[2]); }, in);
    INFO(r.message);
    CHECK(r.ok);
  }
  // Only the input, only the weight: the other gradient is not computed.
  const auto& g = geometries()[1];
  Tensor x = leaf({g.n, g.c_in, g.h, g.w}, gen);
  Tensor w = randn({g.c_in, g.c_out, g.kh, g.kw}, &gen);
  sum(run(g, x, w, Tensor())).backward();
  CHECK(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("conv_transpose2d in float16 and bfloat16 is close to float32",
          "[ops][conv_transpose][half]") {
  Generator gen(24);
  const auto& g = geometries()[1];
  const Tensor x = randn({g.n, g.c_in, g.h, g.w}, &gen);
  const Tensor w = mul(randn({g.c_in, g.c_out, g.kh, g.kw}, &gen), 0.5);
  const Tensor b = randn({g.c_out}, &gen);
  for (auto [dt, tol] : {std::pair{kFloat16, 4e-3}, std::pair{kBFloat16, 3e-2}}) {
    INFO(dtype_name(dt));
    // One op without the bias: the float32 result of the rounded operands, rounded once.
    const Tensor xh = x.to(dt), wh = w.to(dt);
    const Tensor once = run(g, xh, wh, Tensor());
    REQUIRE(once.dtype() == dt);
    CHECK(
        once.to(kFloat32).to_vector<float>() ==
        run(g, xh.to(kFloat32), wh.to(kFloat32), Tensor()).to(dt).to(kFloat32).to_vector<float>());
    // With the bias, and the zero-filled geometry, against float32 on the unrounded values.
    for (size_t k : {size_t{1}, size_t{5}}) {
      const auto& gk = geometries()[k];
      const Tensor xk = randn({gk.n, gk.c_in, gk.h, gk.w}, &gen);
      const Tensor wk = mul(randn({gk.c_in, gk.c_out / gk.groups, gk.kh, gk.kw}, &gen), 0.5);
      const Tensor bk = randn({gk.c_out}, &gen);
      const Tensor ref = run(gk, xk, wk, bk);
      const Tensor half = run(gk, xk.to(dt), wk.to(dt), bk.to(dt));
      REQUIRE(half.dtype() == dt);
      const double err =
          amax(abs(sub(half.to(kFloat32), ref))).item<float>() / amax(abs(ref)).item<float>();
      INFO("geometry " << k << ": max error " << err << " of the largest output");
      CHECK(err < tol);
    }
    // Gradients flow in the half dtype.
    Tensor xg = xh.detach().requires_grad_(), wg = wh.detach().requires_grad_();
    sum(run(g, xg, wg, b.to(dt))).backward();
    CHECK(xg.grad().dtype() == dt);
    CHECK(wg.grad().dtype() == dt);
  }
}

TEST_CASE("conv_transpose2d rejects bad shapes and options naming them",
          "[ops][conv_transpose][errors]") {
  const Tensor x = randn({1, 4, 5, 5}), w = randn({4, 3, 3, 3});
  auto call = [&](const Tensor& xi, const Tensor& wi, const Tensor& b, std::vector<int64_t> s,
                  std::vector<int64_t> p, std::vector<int64_t> op, int64_t groups,
                  std::vector<int64_t> d) {
    return conv_transpose2d(xi, wi, b, s, p, op, groups, d);
  };
  CHECK_THROWS_WITH(
      call(x, randn({4, 3, 3}), {}, {1}, {0}, {0}, 1, {1}),
      Contains("conv_transpose2d: expected a 4-d weight [C_in, C_out/groups, kH, kW]") &&
          Contains("[4, 3, 3]"));
  CHECK_THROWS_WITH(call(randn({4, 5, 5}), w, {}, {1}, {0}, {0}, 1, {1}),
                    Contains("expected a 4-d input [N, C_in, H, W]"));
  CHECK_THROWS_WITH(
      call(randn({1, 3, 5, 5}), w, {}, {1}, {0}, {0}, 1, {1}),
      Contains("the input has 3 channels but the weight of shape [4, 3, 3, 3] takes 4"));
  CHECK_THROWS_WITH(call(x, w, {}, {2}, {0}, {2}, 1, {1}),
                    Contains("output_padding must be smaller than either stride or dilation") &&
                        Contains("output_padding=[2, 2]"));
  CHECK_THROWS_WITH(call(x, w, {}, {1, 2}, {0}, {1, 1}, 1, {1, 1}),
                    Contains("output_padding must be smaller than either stride or dilation"));
  // Below the dilation it is allowed.
  CHECK(call(x, w, {}, {1}, {0}, {1}, 1, {2}).shape() == Shape{1, 3, 10, 10});
  CHECK_THROWS_WITH(call(x, w, {}, {0, 1}, {0}, {0}, 1, {1}),
                    Contains("stride and dilation must be positive"));
  CHECK_THROWS_WITH(call(x, w, {}, {1}, {0}, {0}, 1, {0}),
                    Contains("stride and dilation must be positive"));
  CHECK_THROWS_WITH(call(x, w, {}, {1}, {-1}, {0}, 1, {1}),
                    Contains("padding and output_padding must be non-negative"));
  CHECK_THROWS_WITH(call(x, w, {}, {2}, {0}, {-1}, 1, {1}),
                    Contains("padding and output_padding must be non-negative"));
  CHECK_THROWS_WITH(call(x, randn({4, 3, 0, 3}), {}, {1}, {0}, {0}, 1, {1}),
                    Contains("the weight's sizes must be positive"));
  CHECK_THROWS_WITH(call(randn({1, 4, 0, 5}), w, {}, {1}, {0}, {0}, 1, {1}),
                    Contains("the input's spatial sizes must be positive"));
  CHECK_THROWS_WITH(call(x, w, {}, {1}, {0}, {0}, 0, {1}), Contains("groups must be positive"));
  CHECK_THROWS_WITH(call(x, w, {}, {1}, {0}, {0}, 3, {1}),
                    Contains("groups=3 must divide the input channels 4"));
  CHECK_THROWS_WITH(call(x, w, {}, {1}, {4}, {0}, 1, {1}),
                    Contains("the output would be -1x-1") && Contains("padding too large"));
  CHECK_THROWS_WITH(call(x, w, randn({4}), {1}, {0}, {0}, 1, {1}),
                    Contains("bias of shape [4]") && Contains("expected [3]"));
  CHECK_THROWS_WITH(call(x, w, {}, {1, 1, 1}, {0}, {0}, 1, {1}),
                    Contains("stride must have 1 or 2 values"));
  CHECK_THROWS_WITH(call(randint(0, 3, {1, 4, 5, 5}), w, {}, {1}, {0}, {0}, 1, {1}),
                    Contains("expected floating-point input and weight of one dtype"));
}

TEST_CASE("nn ConvTranspose2d has PyTorch's parameters init and forward", "[nn][conv_transpose]") {
  manual_seed(31);
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions(32, 48, 3).groups(2));
  // The transposed layout [in, out / groups, kH, kW], registered as weight and bias.
  std::vector<std::string> names;
  for (auto& [k, v] : up->named_parameters()) names.push_back(k);
  CHECK(names == std::vector<std::string>{"weight", "bias"});
  REQUIRE(up->weight.shape() == Shape{32, 24, 3, 3});
  REQUIRE(up->bias.shape() == Shape{48});
  // fan_in as PyTorch reads it off this weight: dim 1 times the kernel, 24 * 9 (not the 16 * 9
  // of in_channels / groups): both bounds are 1 / sqrt(fan_in), and 6912 draws come close to it.
  const double bound = 1.0 / std::sqrt(24.0 * 9.0);
  const auto w = up->weight.to_vector<double>();
  double wmax = 0;
  for (double v : w) wmax = std::max(wmax, std::abs(v));
  CHECK(wmax <= bound);
  CHECK(wmax > 0.99 * bound);
  for (double v : up->bias.to_vector<double>()) CHECK(std::abs(v) <= bound);

  nn::ConvTranspose2d nobias(nn::ConvTranspose2dOptions(4, 2, {2, 3}).bias(false));
  CHECK(nobias->named_parameters().size() == 1);
  CHECK_FALSE(nobias->bias.defined());

  // forward is the op with the options; an unbatched input gives the batched result's row.
  nn::ConvTranspose2d m(
      nn::ConvTranspose2dOptions(4, 6, 3).stride(2).padding(1).output_padding(1).groups(2).dilation(
          {1, 2}));
  Generator gen(32);
  const Tensor x = randn({2, 4, 3, 5}, &gen);
  const Tensor y = m(x);
  const Tensor want = conv_transpose2d(x, m->weight, m->bias, {2, 2}, {1, 1}, {1, 1}, 2, {1, 2});
  CHECK(y.to_vector<float>() == want.to_vector<float>());
  const Tensor y1 = m(x.select(0, 1));
  REQUIRE(y1.shape() == Shape{6, 6, 12});
  const auto v1 = y1.to_vector<float>(), v = y.select(0, 1).to_vector<float>();
  for (size_t i = 0; i < v.size(); ++i) REQUIRE(v1[i] == Approx(v[i]).margin(1e-6).epsilon(1e-6));
  // F:: with LibTorch's options struct.
  namespace F = nn::functional;
  const Tensor f = F::conv_transpose2d(x, m->weight,
                                       F::ConvTranspose2dFuncOptions()
                                           .bias(m->bias)
                                           .stride(2)
                                           .padding(1)
                                           .output_padding(1)
                                           .groups(2)
                                           .dilation({1, 2}));
  CHECK(f.to_vector<float>() == want.to_vector<float>());
  // Every parameter gets a gradient.
  sum(mul(m(x), m(x))).backward();
  CHECK(m->weight.grad().defined());
  CHECK(m->bias.grad().defined());
}

TEST_CASE("nn ConvTranspose2d rejects bad options and inputs naming them",
          "[nn][conv_transpose][errors]") {
  using O = nn::ConvTranspose2dOptions;
  CHECK_THROWS_WITH(nn::ConvTranspose2d(O(0, 4, 2)),
                    Contains("ConvTranspose2d: in_channels and out_channels must be positive"));
  CHECK_THROWS_WITH(nn::ConvTranspose2d(O(6, 4, 2).groups(4)),
                    Contains("in_channels=6 must be divisible by groups=4"));
  CHECK_THROWS_WITH(nn::ConvTranspose2d(O(4, 6, 2).groups(4)),
                    Contains("out_channels=6 must be divisible by groups=4"));
  CHECK_THROWS_WITH(nn::ConvTranspose2d(O(4, 4, {2, 0})),
                    Contains("kernel_size, stride and dilation must be positive"));
  CHECK_THROWS_WITH(nn::ConvTranspose2d(O(4, 4, 2).stride(0)),
                    Contains("kernel_size, stride and dilation must be positive"));
  CHECK_THROWS_WITH(nn::ConvTranspose2d(O(4, 4, 2).padding(-1)),
                    Contains("padding and output_padding must be non-negative"));
  CHECK_THROWS_WITH(nn::ConvTranspose2d(O(4, 4, 3).stride(2).output_padding(2)),
                    Contains("output_padding must be smaller than either stride or dilation"));
  CHECK_THROWS_WITH(nn::ConvTranspose2d(O(4, 4, 3).output_padding({0, 1})),
                    Contains("output_padding must be smaller than either stride or dilation"));
  nn::ConvTranspose2d m(O(4, 2, 2).stride(2));
  CHECK_THROWS_WITH(m(randn({1, 3, 4, 4})),
                    Contains("expected an input with 4 channel(s) (in_channels), got 3"));
  CHECK_THROWS_WITH(m(randn({4, 4})),
                    Contains("expected a 3-d (unbatched) or 4-d (batched) input"));
}

TEST_CASE("nn ConvTranspose2d forward with output_size picks the output_padding",
          "[nn][conv_transpose]") {
  // Stride 3: an input of 5 x 4 can give 13..15 rows and 10..12 columns (kernel 3, padding 1).
  manual_seed(4);
  nn::ConvTranspose2d up(nn::ConvTranspose2dOptions(2, 3, 3).stride(3).padding(1));
  Generator gen(5);
  const Tensor x = randn({1, 2, 5, 4}, &gen);
  for (int64_t ph : {0, 1, 2})
    for (int64_t pw : {0, 2}) {
      INFO("output_padding " << ph << " " << pw);
      nn::ConvTranspose2d fixed(
          nn::ConvTranspose2dOptions(2, 3, 3).stride(3).padding(1).output_padding({ph, pw}));
      {
        NoGradGuard ng;
        fixed->weight.copy_(up->weight);
        fixed->bias.copy_(up->bias);
      }
      const Tensor want = fixed(x);
      CHECK(want.sizes() == Shape{1, 3, 13 + ph, 10 + pw});
      CHECK(up->forward(x, {13 + ph, 10 + pw}).to_vector<float>() == want.to_vector<float>());
      // A full shape is read by its last two entries, as PyTorch reads it.
      CHECK(up->forward(x, {1, 3, 13 + ph, 10 + pw}).sizes() == want.sizes());
    }
  // Unbatched input.
  CHECK(up->forward(squeeze(x, 0), {14, 11}).sizes() == Shape{3, 14, 11});
  auto refused = [&](const std::vector<int64_t>& size) {
    try {
      up->forward(x, size);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(refused({16, 10}),
             Contains("requested an output size of [16, 10], but valid sizes range from "
                      "[13, 10] to [15, 12] (for an input of shape [1, 2, 5, 4])"));
  CHECK_THAT(refused({12, 10}), Contains("valid sizes range from [13, 10] to [15, 12]"));
  CHECK_THAT(refused({13}), Contains("output_size must have 2 entries"));
}
