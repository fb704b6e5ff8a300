// Autograd against central finite differences, plus the engine's contract: accumulation,
// retain_graph, explicit seeds, detach and NoGradGuard.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

using namespace ipuml;
using Ts = std::vector<Tensor>;

namespace {
Tensor param(const Shape& s, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(randn(s, &g), scale).detach().requires_grad_();
}
void check(const std::function<Tensor(const Ts&)>& f, Ts in, const char* what) {
  auto r = autograd::gradcheck(f, std::move(in));
  INFO(what << ": " << r.message);
  CHECK(r.ok);
}
}  // namespace

TEST_CASE("gradients match finite differences", "[autograd][gradcheck]") {
  check([](const Ts& x) { return tanh(matmul(x[0], x[1])); }, {param({3, 4}, 1), param({4, 2}, 2)},
        "matmul+tanh");
  check([](const Ts& x) { return linear(x[0], x[1], x[2]); },
        {param({2, 3, 4}, 3), param({5, 4}, 4), param({5}, 5)}, "linear 3-d");
  check(
      [](const Ts& x) {
        return conv2d(x[0], x[1], x[2], {2, 1}, {1, 1}, {1, 2}, 2);
      },
      {param({2, 4, 6, 7}, 6), param({4, 2, 3, 2}, 7), param({4}, 8)},
      "conv2d grouped, strided, dilated");
  check([](const Ts& x) { return conv1d(x[0], x[1], Tensor(), 1, 0, 1, 1); },
        {param({2, 4, 12}, 9), param({3, 4, 4}, 10)}, "conv1d");
  check(
      [](const Ts& x) {
        return max_pool2d(x[0], {2, 2}, {}, {0, 0});
      },
      {param({2, 2, 5, 5}, 11)}, "max_pool2d");
  check(
      [](const Ts& x) {
        return avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, false);
      },
      {param({1, 2, 6, 5}, 12)}, "avg_pool2d");
  check(
      [](const Ts& x) {
        return adaptive_avg_pool2d(x[0], {3, 2});
      },
      {param({1, 2, 5, 7}, 13)}, "adaptive_avg_pool2d");
  check([](const Ts& x) { return log_softmax(x[0], 1); }, {param({3, 5}, 14)}, "log_softmax");
  check([](const Ts& x) { return softmax(x[0], 0); }, {param({3, 5}, 15)}, "softmax");
  check([](const Ts& x) { return gelu(x[0], "tanh") + gelu(x[0]); }, {param({10}, 16)}, "gelu");
  check([](const Ts& x) { return layer_norm(x[0], {4}, x[1], x[2]); },
        {param({3, 4}, 17), param({4}, 18), param({4}, 19)}, "layer_norm");
  check([](const Ts& x) { return group_norm(x[0], 2, x[1], x[2]); },
        {param({2, 4, 3}, 20), param({4}, 21), param({4}, 22)}, "group_norm");
  check([](const Ts& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); },
        {param({4, 3, 2}, 23), param({3}, 24), param({3}, 25)}, "batch_norm");
  Tensor target = from_vector<int64_t>({1, 0, 3}, {3});
  check([&](const Ts& x) { return cross_entropy(x[0], target, Reduction::Mean, 0.1); },
        {param({3, 4}, 26)}, "cross_entropy");
  check([](const Ts& x) { return mse_loss(x[0], x[1]); }, {param({3, 4}, 27), param({3, 4}, 28)},
        "mse");
  check([](const Ts& x) { return var(x[0], {1}, 1, true) + amax(x[0], {1}, true); },
        {param({3, 4}, 29)}, "var+amax");
  check(
      [](const Ts& x) { return div(x[0], add(mul(x[1], x[1]), 1.0)) - pow(abs(x[0]) + 1.0, 1.5); },
      {param({2, 3}, 30), param({3}, 31)}, "broadcast arithmetic");
  Tensor idx = from_vector<int64_t>({2, 0, 2}, {3});
  check(
      [&](const Ts& x) {
        return embedding(x[0], idx.reshape({3, 1}));
      },
      {param({4, 2}, 32)}, "embedding");
  check(
      [](const Ts& x) {
        return cat({x[0].slice(1, 0, 4, 2), x[1].t()}, 0).exp();
      },
      {param({3, 4}, 33), param({2, 5}, 34)}, "slice/t/cat");
}

TEST_CASE("gradients accumulate and seeds work", "[autograd]") {
  Tensor x = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  Tensor y = mul(x, x);
  y.backward(from_vector<float>({1, 1, 1}, {3}), true);
  y.backward(from_vector<float>({1, 0, 2}, {3}));
  auto g = x.grad().to_vector<float>();
  CHECK(g == std::vector<float>{4, 4, 18});  // 2x * (1+1), 2x * (1+0), 2x * (1+2)
  // The same gradient must not be shared between leaves that received the same tensor.
  Tensor a = ones({2}).requires_grad_();
  Tensor b = ones({2}).requires_grad_();
  add(a, b).sum().backward();
  NoGradGuard ng;
  a.grad().mul_(3.0);
  CHECK(b.grad().to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE(".grad takes a fresh gradient as it is but copies one held elsewhere", "[autograd]") {
  // clone's backward passes the seed straight through, so the leaf receives the caller's tensor:
  // .grad must be a copy of it.
  Tensor x = ones({3}).requires_grad_();
  Tensor seed = from_vector<float>({1, 2, 3}, {3});
  x.clone().backward(seed);
  {
    NoGradGuard ng;
    x.grad().mul_(10.0);
  }
  CHECK(seed.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(x.grad().to_vector<float>() == std::vector<float>{10, 20, 30});
  // A fresh gradient (the product's) that nothing else holds becomes .grad: same values.
  Tensor w = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  mul(w, w).sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{2, 4, 6});
}

TEST_CASE("backward errors are clear", "[autograd][errors]") {
  Tensor x = ones({3}).requires_grad_();
  Tensor y = mul(x, 2.0);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("only for scalar outputs"));
  Tensor s = y.sum();
  s.backward();
  CHECK_THROWS_WITH(s.backward(), Catch::Contains("second time"));
  CHECK_THROWS_WITH(ones({2}).sum().backward(), Catch::Contains("does not require grad"));
  CHECK_THROWS_WITH(x.add_(ones({3})), Catch::Contains("NoGradGuard"));
}

TEST_CASE("NoGradGuard and detach stop history", "[autograd]") {
  Tensor x = ones({2}).requires_grad_();
  {
    NoGradGuard ng;
    CHECK_FALSE(mul(x, 2.0).requires_grad());
  }
  CHECK(mul(x, 2.0).requires_grad());
  CHECK_FALSE(x.detach().requires_grad());
}
