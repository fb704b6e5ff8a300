// LibTorch's idioms under ipuml's names: Tensor::index / index_put_ (recorded by autograd) with
// torch::indexing's kinds, the tensor literal factory, comparison operators, Dropout1d/2d,
// F::*FuncOptions, F::embedding's order, nn::Functional, named_parameters() items, nn::init's
// kFanIn/kReLU, ipuml::save / load of modules, tensors and optimizers. Values are checked
// against index arithmetic and the plain ops written out by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <numeric>

#include <ipuml/ipuml.hpp>

#include "../support/error_of.hpp"
#include "../support/golden.hpp"
#include "../support/temp_dir.hpp"

using namespace ipuml;
using namespace ipuml::indexing;
namespace F = ipuml::nn::functional;
using Catch::Matchers::Contains;
using ipuml::testing::error_of;

namespace {

// 0, 1, ..., 23 as a float [2, 3, 4] tensor: x[i][j][k] = 12 i + 4 j + k.
Tensor iota234() { return arange(0.0, 24.0).reshape({2, 3, 4}); }

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

}  // namespace

TEST_CASE("Tensor index with integers, Slice, None, Ellipsis and booleans", "[libtorch][index]") {
  const Tensor x = iota234();

  Tensor a = x.index({1});
  CHECK(a.shape() == Shape{3, 4});
  CHECK(values(a) == values(arange(12.0, 24.0)));

  Tensor b = x.index({Slice(), 1});
  CHECK(b.shape() == Shape{2, 4});
  CHECK(values(b) == std::vector<float>{4, 5, 6, 7, 16, 17, 18, 19});

  Tensor c = x.index({Ellipsis, Slice(1, None, 2)});
  REQUIRE(c.shape() == Shape{2, 3, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k)
        CHECK(c.index({i, j, k}).item<float>() == static_cast<float>(12 * i + 4 * j + 1 + 2 * k));

  Tensor d = x.index({None, 0, Slice(-2)});
  CHECK(d.shape() == Shape{1, 2, 4});
  CHECK(values(d) == values(arange(4.0, 12.0)));

  CHECK(x.index({"...", None}).shape() == Shape{2, 3, 4, 1});
  CHECK(x.index({-1, -1, -1}).item<float>() == 23.0f);
  CHECK(x.index({-1, -1, -1}).dim() == 0);
  CHECK(x.index({true}).shape() == Shape{1, 2, 3, 4});
  CHECK(x.index({false}).shape() == Shape{0, 2, 3, 4});
  CHECK(x.index({Slice(None, None, 3), Slice(5, 10)}).shape() == Shape{1, 0, 4});
  // Slices share storage, as LibTorch's views do.
  CHECK(x.index({Slice(), 2}).impl()->storage == x.impl()->storage);
}

TEST_CASE("Tensor index with integer tensors and boolean masks", "[libtorch][index]") {
  const Tensor x = iota234();

  Tensor a = x.index({Slice(), tensor({2, 0, -1})});
  REQUIRE(a.shape() == Shape{2, 3, 4});
  const int64_t rows[3] = {2, 0, 2};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        CHECK(a.index({i, j, k}).item<float>() == static_cast<float>(12 * i + 4 * rows[j] + k));

  // A 2-d index tensor puts its shape where the indexed dimension was.
  Tensor b = x.index({Ellipsis, tensor({{0, 3}, {1, 1}})});
  REQUIRE(b.shape() == Shape{2, 3, 2, 2});
  CHECK(values(b.index({1, 2})) == std::vector<float>{20, 23, 21, 21});

  // A mask over every dim gives the selected elements in row-major order.
  Tensor m = x.index({x > 10.5});
  CHECK(values(m) == values(arange(11.0, 24.0)));
  // A mask over the first two dims keeps the last one.
  Tensor mask2 = tensor({{true, false, true}, {false, false, true}});
  Tensor m2 = x.index({mask2});
  REQUIRE(m2.shape() == Shape{3, 4});
  CHECK(values(m2) == std::vector<float>{0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23});
  // A mask in the middle, after a slice.
  Tensor m3 = x.index({Slice(), tensor({false, true, true}), 3});
  REQUIRE(m3.shape() == Shape{2, 2});
  CHECK(values(m3) == std::vector<float>{7, 11, 19, 23});
  CHECK(x.index({x > 100.0}).shape() == Shape{0});
}

TEST_CASE("Tensor index refuses what LibTorch refuses, with a message", "[libtorch][index]") {
  const Tensor x = iota234();
  CHECK_THAT(error_of([&] { x.index({0, 0, 0, 0}); }), Contains("too many indices"));
  CHECK_THAT(error_of([&] {
               x.index({0, 3});
             }),
             Contains("index 3 is out of bounds for dimension 1 with size 3"));
  CHECK_THAT(error_of([&] { x.index({Ellipsis, Ellipsis}); }), Contains("single ellipsis"));
  CHECK_THAT(error_of([&] { x.index({tensor({0.5f})}); }), Contains("int64, int32 or bool"));
  CHECK_THAT(error_of([&] {
               x.index({tensor({true, false, true})});
             }),
             Contains("does not match the indexed tensor's shape"));
  CHECK_THAT(error_of([&] { x.index({tensor({0}), tensor({0})}); }), Contains("only one tensor"));
  CHECK_THAT(error_of([&] { x.index({Slice(), tensor({5})}); }), Contains("out of bounds"));
  CHECK_THAT(error_of([&] { Slice(0, 4, 0); }), Contains("step must be positive"));
  CHECK_THAT(error_of([&] { x.index({"..x"}); }), Contains("\"...\""));
}

TEST_CASE("Tensor index is differentiable", "[libtorch][index]") {
  Tensor x = iota234().requires_grad_();
  // Basic indices (views), an integer tensor with a repeat, and a mask, each weighted.
  Tensor loss = x.index({Slice(), 1, Slice(1, None, 2)}).sum() +
                mul(x.index({0, tensor({2, 2, 0})}), 2.0).sum() +
                mul(x.index({x.detach() > 21.5}), 10.0).sum();
  loss.backward();
  std::vector<float> expect(24, 0.0f);
  for (int i = 0; i < 2; ++i)
    for (int k = 1; k < 4; k += 2) expect[static_cast<size_t>(12 * i + 4 + k)] += 1.0f;
  for (int k = 0; k < 4; ++k) {
    expect[static_cast<size_t>(8 + k)] += 4.0f;  // row 2 picked twice
    expect[static_cast<size_t>(k)] += 2.0f;
  }
  expect[22] += 10.0f;
  expect[23] += 10.0f;
  CHECK(values(x.grad()) == expect);
}

TEST_CASE("Tensor index_put_ writes through integers, slices, tensors and masks",
          "[libtorch][index]") {
  Tensor z = zeros({3, 4});
  z.index_put_({1}, 5);
  CHECK(values(z.index({1})) == std::vector<float>{5, 5, 5, 5});
  CHECK(values(z.index({0})) == std::vector<float>{0, 0, 0, 0});

  z.index_put_({Slice(), Slice(None, None, 2)}, tensor({1.f, 2.f}));
  CHECK(values(z) == std::vector<float>{1, 0, 2, 0, 1, 5, 2, 5, 1, 0, 2, 0});

  z.index_put_({tensor({2, 0}), Slice(1, 3)}, tensor({{7.f, 8.f}, {9.f, 10.f}}));
  CHECK(values(z) == std::vector<float>{1, 9, 10, 0, 1, 5, 2, 5, 1, 7, 8, 0});

  z.index_put_({z > 6.5}, -1.0);
  CHECK(values(z) == std::vector<float>{1, -1, -1, 0, 1, 5, 2, 5, 1, -1, -1, 0});

  z.index_put_({z == 0.0}, tensor({30.f, 31.f}));
  CHECK(values(z) == std::vector<float>{1, -1, -1, 30, 1, 5, 2, 5, 1, -1, -1, 31});

  z.index_put_({Ellipsis, -1}, zeros({3}));
  CHECK(values(z.index({Slice(), 3})) == std::vector<float>{0, 0, 0});

  Tensor w = ones({2, 2}).requires_grad_();
  CHECK_THAT(error_of([&] { w.index_put_({0}, 3.0); }),
             Contains("a leaf Variable that requires grad is being used in an in-place operation"));
  CHECK(values(w) == std::vector<float>{1, 1, 1, 1});
  {
    NoGradGuard ng;
    w.index_put_({0, 1}, 3.0);
  }
  CHECK(values(w) == std::vector<float>{1, 3, 1, 1});
  CHECK(w.is_leaf());
}

TEST_CASE("Tensor index_put_ is recorded by autograd", "[libtorch][index][autograd]") {
  // y = 2x, then y[1, 1:3] = v: x's gradient is 2g except where v was written, v's is g there.
  Tensor x = arange(0.0, 12.0).reshape({3, 4}).requires_grad_();
  Tensor v = tensor({10.f, 20.f}).requires_grad_();
  Tensor y = x * 2.0;
  y.index_put_({1, Slice(1, 3)}, v);
  CHECK(values(y) == std::vector<float>{0, 2, 4, 6, 8, 10, 20, 14, 16, 18, 20, 22});
  CHECK(y.grad_fn() != nullptr);
  const Tensor g = arange(1.0, 13.0).reshape({3, 4});
  sum(mul(y, g)).backward();
  CHECK(values(x.grad()) == std::vector<float>{2, 4, 6, 8, 10, 0, 0, 16, 18, 20, 22, 24});
  CHECK(values(v.grad()) == std::vector<float>{6, 7});

  // Into a tensor that needs no gradient itself (LibTorch's "fill a buffer" idiom), twice, with
  // a broadcast value: the value's gradient sums over the rows it was copied to.
  Tensor a = tensor({1.f, 2.f, 3.f}).requires_grad_();
  Tensor b = tensor({5.f}).requires_grad_();
  Tensor out = zeros({4, 3});
  out.index_put_({tensor({0, 2})}, a);
  out.index_put_({Slice(), 1}, b);
  CHECK(values(out) == std::vector<float>{1, 5, 3, 0, 5, 0, 1, 5, 3, 0, 5, 0});
  sum(mul(out, arange(0.0, 12.0).reshape({4, 3}))).backward();
  CHECK(values(a.grad()) == std::vector<float>{0 + 6, 0, 2 + 8});  // column 1 overwritten by b
  CHECK(values(b.grad()) == std::vector<float>{1 + 4 + 7 + 10});

  // A value that views the tensor written into is read before the write.
  Tensor p = arange(0.0, 6.0).reshape({3, 2}).requires_grad_();
  Tensor q = p.clone();
  q.index_put_({0}, q.index({2}));
  CHECK(values(q) == std::vector<float>{4, 5, 2, 3, 4, 5});
  q.sum().backward();
  CHECK(values(p.grad()) == std::vector<float>{0, 0, 1, 1, 2, 2});

  // Under NoGradGuard nothing is recorded.
  Tensor r = x * 1.0;
  {
    NoGradGuard ng;
    r.index_put_({0}, 7.0);
  }
  CHECK(r.grad_fn()->name == "MulBackward");
}

TEST_CASE("Tensor index_put_ gradients pass gradcheck", "[libtorch][index][autograd]") {
  Generator gen(11);
  const Tensor mask =
      tensor({{true, false, true, false}, {false, false, true, true}, {true, true, false, false}});
  struct Case {
    const char* name;
    std::vector<TensorIndex> index;
    Shape value_shape;
  };
  const std::vector<Case> cases = {
      {"slices", {Slice(), Slice(1, None, 2)}, {3, 2}},
      {"slice broadcast row", {Slice(0, 2), Slice()}, {4}},
      {"int and negative int", {-1, 2}, {}},
      {"integer tensor", {tensor({2, 0})}, {2, 4}},
      {"integer tensor broadcast", {Slice(), tensor({3, 1, 0})}, {3, 1}},
      {"integer tensor int32", {Ellipsis, tensor({1, 2}, kInt32)}, {2}},
      {"bool mask", {mask}, {6}},
      {"bool mask scalar", {mask}, {1}},
      {"bool mask of rows", {tensor({true, false, true}), Slice(1, 3)}, {2, 2}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Tensor x = randn({3, 4}, &gen).requires_grad_();
    Tensor v = randn(c.value_shape, &gen).requires_grad_();
    auto f = [&](const std::vector<Tensor>& in) {
      Tensor y = in[0].mul(in[0]);  // not linear in x, so the zeroed gradient is checked too
      y.index_put_(c.index, in[1]);
      return y.mul(1.5);
    };
    const auto result = autograd::gradcheck(f, {x, v});
    INFO(result.message);
    CHECK(result.ok);
  }
}

TEST_CASE("Tensor index_put_ refuses writes autograd could not follow",
          "[libtorch][index][errors]") {
  Tensor x = randn({3, 4}).requires_grad_();
  // exp saves its result for backward: writing into it would change that backward's input.
  Tensor e = exp(x);
  const auto before = values(e);
  CHECK_THAT(error_of([&] { e.index_put_({0}, 1.0); }),
             Contains("index_put_: the tensor's memory is shared with 1 other tensor(s)") &&
                 Contains("x.clone()"));
  CHECK(values(e) == before);
  // So does a live view of it.
  Tensor c = x * 2.0;
  Tensor row = c.index({1});
  CHECK_THAT(error_of([&] { c.index_put_({1}, 0.0); }), Contains("shared with 1 other tensor"));
  CHECK(values(row) == values(mul(x.detach().index({1}), 2.0)));
  // A clone is free to be written.
  Tensor ec = e.clone();
  ec.index_put_({0}, 1.0);
  ec.sum().backward();
  CHECK(values(x.grad().index({0})) == std::vector<float>{0, 0, 0, 0});
  CHECK(values(x.grad().index({1})) == values(e.detach().index({1})));
  // Undefined values are refused with a message.
  Tensor z = zeros({2});
  CHECK_THAT(error_of([&] { z.index_put_({0}, Tensor()); }), Contains("undefined"));
}

TEST_CASE("tensor literals, comparison operators and members", "[libtorch]") {
  Tensor f = tensor({1.f, 2.5f, -3.f});
  CHECK(f.dtype() == kFloat32);
  CHECK(f.shape() == Shape{3});
  CHECK(values(f) == std::vector<float>{1, 2.5f, -3});
  Tensor i = tensor({1, 2, 3});
  CHECK(i.dtype() == kInt64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  Tensor d = tensor({{1.5, 2.5}, {3.5, 4.5}});
  CHECK(d.dtype() == kFloat32);
  CHECK(d.shape() == Shape{2, 2});
  CHECK(values(d) == std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f});
  CHECK(tensor(true).dtype() == kBool);
  CHECK(tensor(2.0).dim() == 0);
  CHECK(tensor({1, 2}, kFloat32).dtype() == kFloat32);
  CHECK_THAT(error_of([] { tensor({{1, 2}, {3}}); }), Contains("equal lengths"));

  CHECK((f > 0.0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0});
  CHECK((f <= 1.0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK((f == tensor({1.f, 0.f, -3.f})).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK((f != 2.5).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(f.lt(0.0).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 1});
  CHECK(f.ge(2.5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  CHECK(f.eq(f).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1});
  CHECK(f.ne(-3.0).dtype() == kBool);
}

TEST_CASE("named_parameters items have key and value, and nn::init takes kFanOut and kReLU",
          "[libtorch]") {
  nn::Linear fc(nn::LinearOptions(3, 2));
  std::vector<std::string> keys;
  for (const auto& item : fc->named_parameters()) {
    keys.push_back(item.key());
    CHECK(item.value().same(item.key() == "weight" ? fc->weight : fc->bias));
  }
  CHECK(keys == std::vector<std::string>{"weight", "bias"});
  for (auto& [name, t] : fc->named_parameters()) CHECK(t.requires_grad());

  manual_seed(3);
  Tensor w = empty({256, 512});
  nn::init::kaiming_normal_(w, 0, kFanOut, kReLU);
  const auto v = values(w);
  double sq = 0;
  for (float e : v) sq += static_cast<double>(e) * e;
  const double std_dev = std::sqrt(sq / static_cast<double>(v.size()));
  CHECK(std_dev == Approx(std::sqrt(2.0 / 256.0)).epsilon(0.03));
  nn::init::kaiming_uniform_(w, 0, kFanIn, kLinear);
  const double bound = std::sqrt(3.0 / 512.0);
  CHECK(w.abs().amax({}).item<float>() <= bound * (1 + 1e-6));
  CHECK(w.abs().amax({}).item<float>() > 0.99 * bound);
}

TEST_CASE("Dropout2d and Dropout1d drop whole channels, deterministically", "[libtorch][dropout]") {
  const Tensor x = ones({4, 8, 5, 5});
  nn::Dropout2d drop(nn::Dropout2dOptions(0.5));
  manual_seed(11);
  const Tensor y = drop(x);
  manual_seed(11);
  CHECK(values(drop(x)) == values(y));
  int dropped = 0;
  for (int n = 0; n < 4; ++n)
    for (int c = 0; c < 8; ++c) {
      const Tensor plane = y.index({n, c});
      const float first = plane.index({0, 0}).item<float>();
      CHECK((first == 0.0f || first == 2.0f));
      CHECK(values(plane) == std::vector<float>(25, first));
      dropped += first == 0.0f;
    }
  CHECK(dropped > 4);
  CHECK(dropped < 28);
  drop->eval();
  CHECK(values(drop(x)) == values(x));
  CHECK(drop->to_string() == "Dropout2d(p=0.5, inplace=False)");
  // Unbatched [C, H, W].
  drop->train();
  const Tensor u = drop(ones({16, 3, 3}));
  for (int c = 0; c < 16; ++c) {
    const float first = u.index({c, 0, 0}).item<float>();
    CHECK(values(u.index({c})) == std::vector<float>(9, first));
  }
  CHECK_THAT(error_of([&] { drop(ones({2, 3})); }), Contains("Dropout2d: expected a 3-d"));

  nn::Dropout1d drop1(0.25);
  const Tensor y1 = drop1(ones({3, 6, 7}));
  for (int n = 0; n < 3; ++n)
    for (int c = 0; c < 6; ++c) {
      const float first = y1.index({n, c, 0}).item<float>();
      CHECK((first == 0.0f || std::abs(first - 1.0f / 0.75f) < 1e-6f));
      CHECK(values(y1.index({n, c})) == std::vector<float>(7, first));
    }
  CHECK(values(F::dropout2d(x, F::Dropout2dFuncOptions().p(0.3).training(false))) == values(x));
  CHECK(values(F::dropout1d(ones({2, 3}), F::Dropout1dFuncOptions().p(1.0))) ==
        std::vector<float>(6, 0.0f));
}

TEST_CASE("F FuncOptions give the plain ops' values", "[libtorch][functional]") {
  manual_seed(5);
  const Tensor x = randn({2, 3, 6, 6});
  const Tensor w = randn({4, 3, 3, 3});
  const Tensor b = randn({4});

  CHECK(values(F::conv2d(x, w, F::Conv2dFuncOptions().bias(b).stride(2).padding(1))) ==
        values(conv2d(x, w, b, {2, 2}, {1, 1})));
  CHECK(values(F::max_pool2d(x, F::MaxPool2dFuncOptions(2))) == values(max_pool2d(x, {2, 2})));
  CHECK(values(F::max_pool2d(x, F::MaxPool2dFuncOptions({3, 2}).stride(1))) ==
        values(max_pool2d(x, {3, 2}, {1, 1})));
  CHECK(values(F::avg_pool2d(x, F::AvgPool2dFuncOptions(3))) == values(avg_pool2d(x, {3, 3})));
  const auto pooled = values(F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({1, 1})));
  const auto means = values(mean(x, {2, 3}, true));
  REQUIRE(pooled.size() == means.size());
  for (size_t i = 0; i < means.size(); ++i) CHECK(pooled[i] == Approx(means[i]).margin(1e-6));
  CHECK(values(F::log_softmax(x, F::LogSoftmaxFuncOptions(1))) == values(log_softmax(x, 1)));
  CHECK(values(F::softmax(x, 1)) == values(softmax(x, 1)));
  CHECK(values(F::dropout(x, F::DropoutFuncOptions().p(0.5).training(false))) == values(x));
  CHECK(values(F::layer_norm(x, F::LayerNormFuncOptions({6}).eps(1e-3))) ==
        values(layer_norm(x, {6}, Tensor(), Tensor(), 1e-3)));
  CHECK(values(F::gelu(x, F::GELUFuncOptions().approximate("tanh"))) == values(gelu(x, "tanh")));
  CHECK_THAT(error_of([&] { F::max_pool2d(x, F::MaxPool2dFuncOptions(2).ceil_mode(true)); }),
             Contains("ceil_mode"));

  // nll_loss with a class weight, by hand: -sum_i w[t_i] lp[i, t_i] / sum_i w[t_i].
  const Tensor lp = tensor({{-0.5f, -1.5f, -2.0f}, {-1.0f, -0.25f, -3.0f}, {-2.0f, -1.0f, -0.1f}});
  const Tensor t = tensor({0, 2, 2});
  const Tensor cw = tensor({2.f, 1.f, 0.5f});
  const double expect = (2.0 * 0.5 + 0.5 * 3.0 + 0.5 * 0.1) / (2.0 + 0.5 + 0.5);
  CHECK(F::nll_loss(lp, t, F::NLLLossFuncOptions().weight(cw)).item<float>() ==
        Approx(expect).epsilon(1e-6));
  CHECK(F::nll_loss(lp, t, F::NLLLossFuncOptions().weight(cw).reduction(kSum)).item<float>() ==
        Approx(2.0 * 0.5 + 0.5 * 3.0 + 0.5 * 0.1).epsilon(1e-6));
  CHECK(F::nll_loss(lp, t, F::NLLLossFuncOptions().ignore_index(0)).item<float>() ==
        Approx((3.0 + 0.1) / 2.0).epsilon(1e-6));
  CHECK(F::cross_entropy(lp, t, F::CrossEntropyFuncOptions().weight(cw)).item<float>() ==
        Approx(cross_entropy(lp, t, Reduction::Mean, 0.0, cw).item<float>()));
  CHECK(F::mse_loss(lp, zeros({3, 3}), F::MSELossFuncOptions(kSum)).item<float>() ==
        Approx(sum(mul(lp, lp)).item<float>()));
}

TEST_CASE("F::embedding takes LibTorch's order: input, weight, options",
          "[libtorch][functional][embedding]") {
  // Row r of the weight is [10 r, 10 r + 1].
  Tensor w = mul(arange(0.0, 10.0).reshape({5, 2}), 1.0).requires_grad_();
  {
    NoGradGuard ng;
    w.mul_(10.0);
    w.index_put_({Slice(), 1}, add(w.index({Slice(), 1}), -9.0));
  }
  REQUIRE(values(w) == std::vector<float>{0, 1, 20, 21, 40, 41, 60, 61, 80, 81});
  const Tensor idx = tensor({{4, 0}, {1, 4}});
  Tensor y = F::embedding(idx, w);
  CHECK(y.shape() == Shape{2, 2, 2});
  CHECK(values(y) == std::vector<float>{80, 81, 0, 1, 20, 21, 80, 81});
  // The same as ATen's order (ipuml::embedding(weight, indices)) and as the module.
  CHECK(values(embedding(w, idx)) == values(y));

  // padding_idx (here from the end: -1 is row 4): its lookups keep their values, get no gradient.
  Tensor p = F::embedding(idx, w, F::EmbeddingFuncOptions().padding_idx(-1));
  CHECK(values(p) == values(y));
  sum(mul(p, arange(1.0, 9.0).reshape({2, 2, 2}))).backward();
  CHECK(values(w.grad()) == std::vector<float>{3, 4, 5, 6, 0, 0, 0, 0, 0, 0});

  // scale_grad_by_freq: row 4 is looked up twice, so each lookup passes half its gradient.
  w.set_grad(Tensor());
  sum(F::embedding(idx, w, F::EmbeddingFuncOptions().scale_grad_by_freq(true))).backward();
  CHECK(values(w.grad()) == std::vector<float>{1, 1, 1, 1, 0, 0, 0, 0, 1, 1});

  // max_norm rescales the rows it looks up, in place: row 1 (norm 29) to norm 2, not row 2.
  Tensor v = w.detach().clone();
  Tensor r = F::embedding(tensor({1, 0}), v, F::EmbeddingFuncOptions().max_norm(2.0));
  const double n1 = std::sqrt(20.0 * 20.0 + 21.0 * 21.0);
  CHECK(r.index({0, 0}).item<float>() == Approx(20.0 * 2.0 / (n1 + 1e-7)));
  CHECK(v.index({1, 1}).item<float>() == Approx(21.0 * 2.0 / (n1 + 1e-7)));
  CHECK(v.index({2, 0}).item<float>() == 40.0f);

  // The weight first (the ATen order) is refused with the order to use.
  CHECK_THAT(error_of([&] { F::embedding(w, idx); }),
             Contains("LibTorch's order is F::embedding(input, weight, options)"));
  CHECK_THAT(error_of([&] { F::embedding(idx, w, F::EmbeddingFuncOptions().padding_idx(5)); }),
             Contains("padding_idx=5 must be within num_embeddings=5"));
  CHECK_THAT(error_of([&] { F::embedding(tensor({5}), w); }),
             Contains("index 5 is out of range for num_embeddings=5"));
  CHECK_THAT(error_of([&] { F::embedding(idx, w, F::EmbeddingFuncOptions().sparse(true)); }),
             Contains("sparse gradients are not implemented"));
}

TEST_CASE("nn::Functional wraps functions as modules", "[libtorch][functional]") {
  const Tensor x = arange(-8.0, 8.0).reshape({1, 1, 4, 4});
  nn::Functional relu_m(ipuml::relu);
  CHECK(values(relu_m(x)) == values(relu(x)));
  nn::Functional pool(F::max_pool2d, F::MaxPool2dFuncOptions(2));
  CHECK(values(pool(x)) == std::vector<float>{-3, -1, 5, 7});
  nn::Functional scaled([](const Tensor& t) { return mul(t, 3.0); });
  CHECK(values(scaled(x)) == values(mul(x, 3.0)));
  nn::Functional soft(ipuml::softmax, int64_t{1});
  CHECK(values(soft(x.reshape({4, 4}))) == values(softmax(x.reshape({4, 4}), 1)));

  nn::Sequential seq(nn::Flatten(), nn::Functional(ipuml::relu), nn::Linear(16, 2));
  CHECK(seq->to_string().find("(1): Functional()") != std::string::npos);
  CHECK(seq(x).shape() == Shape{1, 2});
  CHECK(seq->parameters().size() == 2);
}

#if IPUML_WITH_HDF5
TEST_CASE("ipuml::save and ipuml::load modules and tensors", "[libtorch][serialize]") {
  ipuml::testing::TempDir dir("ipuml_save");
  manual_seed(1);
  nn::Sequential a(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2));
  save(a, dir.file("model.h5"));
  manual_seed(2);
  nn::Sequential b(nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2));
  REQUIRE(values(b->parameters()[0]) != values(a->parameters()[0]));
  load(b, dir.file("model.h5"));
  for (size_t i = 0; i < a->parameters().size(); ++i)
    CHECK(values(b->parameters()[i]) == values(a->parameters()[i]));

  // A module of another shape is refused and left as it was.
  nn::Sequential c(nn::Linear(4, 5), nn::ReLU(), nn::Linear(5, 2));
  const auto before = values(c->parameters()[0]);
  CHECK_THAT(error_of([&] { load(c, dir.file("model.h5")); }), Contains("0.weight"));
  CHECK(values(c->parameters()[0]) == before);

  Tensor t = tensor({{1, 2, 3}, {4, 5, 6}});
  save(t, dir.file("t.h5"));
  Tensor u;
  load(u, dir.file("t.h5"));
  CHECK(u.dtype() == kInt64);
  CHECK(u.shape() == Shape{2, 3});
  CHECK(u.to_vector<int64_t>() == t.to_vector<int64_t>());

  std::vector<Tensor> ts{tensor({1.f}), ones({2, 2}), tensor({true, false})};
  save(ts, dir.file("ts.h5"));
  std::vector<Tensor> back;
  load(back, dir.file("ts.h5"));
  REQUIRE(back.size() == 3);
  CHECK(values(back[1]) == values(ts[1]));
  CHECK(back[2].dtype() == kBool);

  CHECK_THAT(error_of([&] { load(u, dir.file("model.h5")); }), Contains("expected one tensor"));
  // A damaged file fails its integrity check.
  {
    std::fstream f(dir.file("t.h5"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-8, std::ios::end);
    f.put('\x5a');
  }
  CHECK(error_of([&] { load(u, dir.file("t.h5")); }) != "(no error)");
}

namespace {

// A few steps of `optimizer` on a fixed regression problem for `model`.
void train_steps(nn::Sequential& model, optim::Optimizer& optimizer, int steps, uint64_t seed) {
  Generator gen(seed);
  for (int s = 0; s < steps; ++s) {
    Tensor x = randn({8, 4}, &gen), y = randn({8, 2}, &gen);
    optimizer.zero_grad();
    mse_loss(model->forward(x), y).backward();
    optimizer.step();
  }
}

nn::Sequential small_model() {
  manual_seed(3);
  return nn::Sequential(nn::Linear(4, 5), nn::Tanh(), nn::Linear(5, 2));
}

std::vector<std::vector<float>> params_of(nn::Sequential& m) {
  std::vector<std::vector<float>> out;
  for (auto& p : m->parameters()) out.push_back(values(p));
  return out;
}

template <typename Opt, typename Options>
void check_resume_bit_for_bit(const Options& options, const std::string& dir) {
  // Uninterrupted: 3 + 4 steps.
  nn::Sequential a = small_model();
  Opt opt_a(a->parameters(), options);
  train_steps(a, opt_a, 3, 10);
  train_steps(a, opt_a, 4, 20);

  // Interrupted after 3 steps: model and optimizer saved, then loaded into fresh ones.
  nn::Sequential b = small_model();
  {
    Opt opt_b(b->parameters(), options);
    train_steps(b, opt_b, 3, 10);
    save(b, dir + "/model.h5");
    save(opt_b, dir + "/optimizer.h5");
  }
  nn::Sequential c = small_model();
  load(c, dir + "/model.h5");
  Opt opt_c(c->parameters(), options);
  load(opt_c, dir + "/optimizer.h5");
  train_steps(c, opt_c, 4, 20);
  CHECK(params_of(c) == params_of(a));
  // Without the optimizer's state the run differs (momentum / moments start again).
  nn::Sequential d = small_model();
  load(d, dir + "/model.h5");
  Opt opt_d(d->parameters(), options);
  train_steps(d, opt_d, 4, 20);
  CHECK(params_of(d) != params_of(a));
}

}  // namespace

TEST_CASE("ipuml::save and ipuml::load optimizers: a resumed run matches bit for bit",
          "[libtorch][serialize][optim]") {
  ipuml::testing::TempDir dir("ipuml_save_optim");
  SECTION("SGD with momentum") {
    check_resume_bit_for_bit<optim::SGD>(optim::SGDOptions(0.05).momentum(0.9), dir.path.string());
  }
  SECTION("SGD with momentum and dampening (a step counter in the state)") {
    check_resume_bit_for_bit<optim::SGD>(optim::SGDOptions(0.05).momentum(0.9).dampening(0.1),
                                         dir.path.string());
  }
  SECTION("Adam") {
    check_resume_bit_for_bit<optim::Adam>(optim::AdamOptions(0.01), dir.path.string());
  }
  // The file says whose state it is.
  nn::Sequential m = small_model();
  optim::Adam adam(m->parameters(), optim::AdamOptions(0.01));
  save(adam, dir.file("adam.h5"));
  const io::Checkpoint c = io::read_checkpoint(dir.file("adam.h5"));
  CHECK(c.optimizer_record.type == "Adam");
  CHECK(c.optimizer_record.group_sizes == std::vector<int64_t>{4});
  CHECK(c.model.empty());
}

TEST_CASE("ipuml::load of an optimizer refuses another type or other parameters, unchanged",
          "[libtorch][serialize][optim][errors]") {
  ipuml::testing::TempDir dir("ipuml_load_optim");
  nn::Sequential m = small_model();
  optim::SGD sgd(m->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  train_steps(m, sgd, 2, 1);
  save(sgd, dir.file("sgd.h5"));

  auto state_values = [](const optim::Optimizer& o) {
    std::vector<std::vector<float>> v;
    for (auto& [k, t] : o.state_dict()) v.push_back(values(t));
    return v;
  };
  // Another type.
  optim::Adam adam(m->parameters(), optim::AdamOptions(0.01));
  train_steps(m, adam, 1, 2);
  const auto adam_before = state_values(adam);
  CHECK_THAT(
      error_of([&] { load(adam, dir.file("sgd.h5")); }),
      Contains("holds the state of an optimizer of type SGD, which cannot be loaded into one of "
               "type Adam"));
  CHECK(state_values(adam) == adam_before);
  // Fewer parameters, or the same ones grouped otherwise.
  auto params = m->parameters();
  optim::SGD fewer(std::vector<Tensor>(params.begin(), params.begin() + 2),
                   optim::SGDOptions(0.05).momentum(0.9));
  train_steps(m, fewer, 1, 3);
  const auto fewer_before = state_values(fewer);
  CHECK_THAT(error_of([&] { load(fewer, dir.file("sgd.h5")); }),
             Contains("the saved SGD optimized 4 parameters in groups of [4], this one optimizes 2 "
                      "in groups of [2]"));
  CHECK(state_values(fewer) == fewer_before);
  optim::SGD grouped(std::vector<Tensor>(params.begin(), params.begin() + 2),
                     optim::SGDOptions(0.05).momentum(0.9));
  grouped.add_param_group(std::vector<Tensor>(params.begin() + 2, params.end()));
  CHECK_THAT(error_of([&] { load(grouped, dir.file("sgd.h5")); }), Contains("groups of [2, 2]"));
  // The same type over the same parameters, but other options that keep other state.
  optim::SGD plain(m->parameters(), optim::SGDOptions(0.05));
  CHECK_THAT(error_of([&] { load(plain, dir.file("sgd.h5")); }),
             Contains("unexpected key 'state.0.momentum_buffer'"));
  // A module's file has no optimizer state; an optimizer's file has no module.
  save(m, dir.file("model.h5"));
  CHECK_THAT(
      error_of([&] { load(sgd, dir.file("model.h5")); }),
      Contains("expected an optimizer's state saved by ipuml::save(optimizer), found none") &&
          Contains("'0.weight'"));
  CHECK_THAT(error_of([&] { load(m, dir.file("sgd.h5")); }), Contains("missing '0.weight'"));
}
#endif

// PyTorch's x[index], its gradient and x[index] = value (tests/golden/indexing.json, made by
// tests/golden/gen_indexing.py with Debian's python3-torch).
TEST_CASE("Tensor index and index_put_ match PyTorch", "[libtorch][index][golden]") {
  const nlohmann::json golden = ipuml::testing::load_golden("indexing.json");
  REQUIRE(golden["cases"].size() >= 25);
  for (const auto& c : golden["cases"]) {
    const std::string name = c["name"];
    INFO("case " << name);
    std::vector<TensorIndex> index;
    for (const auto& i : c["index"]) {
      if (i.contains("int")) {
        index.emplace_back(i["int"].get<int64_t>());
      } else if (i.contains("slice")) {
        auto bound = [](const nlohmann::json& v) {
          return v.is_null() ? std::optional<int64_t>() : std::optional<int64_t>(v.get<int64_t>());
        };
        index.emplace_back(Slice(bound(i["slice"][0]), bound(i["slice"][1]), bound(i["slice"][2])));
      } else if (i.contains("none")) {
        index.emplace_back(None);
      } else if (i.contains("ellipsis")) {
        index.emplace_back(Ellipsis);
      } else if (i.contains("bool")) {
        index.emplace_back(i["bool"].get<bool>());
      } else {
        index.emplace_back(ipuml::testing::tensor_from_json(i["tensor"]));
      }
    }
    Tensor x = ipuml::testing::tensor_from_json(c["input"]).requires_grad_();
    Tensor out = x.index(index);
    ipuml::testing::require_close(out, c["output"], 1e-7, 1e-7, name + ": output");
    sum(mul(out, ipuml::testing::tensor_from_json(c["grad_output"]))).backward();
    ipuml::testing::require_close(x.grad(), c["grad"], 1e-6, 1e-6, name + ": grad");
    if (!c["put"].is_null()) {
      Tensor y = x.detach().clone();
      y.index_put_(index, ipuml::testing::tensor_from_json(c["value"]));
      ipuml::testing::require_close(y, c["put"], 1e-7, 1e-7, name + ": put");
    }
    // The write recorded by autograd: gradients reach the tensor written into (except where it
    // was overwritten) and the value (summed where it was broadcast).
    Tensor x2 = x.detach().clone().requires_grad_();
    Tensor v2 = ipuml::testing::tensor_from_json(c["value"]).requires_grad_();
    Tensor y2 = x2.clone();
    y2.index_put_(index, v2);
    sum(mul(y2, ipuml::testing::tensor_from_json(c["put_grad_output"]))).backward();
    ipuml::testing::require_close(x2.grad(), c["put_grad"], 1e-6, 1e-6, name + ": put grad");
    ipuml::testing::require_close(v2.grad(), c["put_grad_value"], 1e-5, 1e-6,
                                  name + ": put grad of the value");
  }
}
