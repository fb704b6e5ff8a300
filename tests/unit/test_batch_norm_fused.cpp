// The fused batch norm (BatchNorm, BatchNormInference, BatchNormBackward with the residual add
// and ReLU folded in): values and gradients against the composite written out op by op and
// against finite differences, running statistics as PyTorch keeps them, the inference path,
// same bits with 1 or 2 threads, traced like eager, and the errors bad calls get.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

#include "../support/error_of.hpp"

using namespace ipuml;
using Catch::Matchers::Contains;
using Ts = std::vector<Tensor>;

namespace {

struct RestoreThreads {
  ~RestoreThreads() { set_num_threads(0); }
};

Tensor leaf(const Shape& s, Generator& g, double scale = 1.0, double shift = 0.0) {
  return add(mul(randn(s, &g), scale), shift).detach().requires_grad_();
}

// act(batch_norm(x) + r) from mean, var, rsqrt, mul and add: the path every other norm takes.
Tensor composite(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r, bool relu,
                 double eps) {
  Shape cs(static_cast<size_t>(x.dim()), 1);
  cs[1] = x.shape()[1];
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor y = mul(sub(x, mean(x, dims, true)), rsqrt(add(var(x, dims, 0, true), eps)));
  if (w.defined()) y = add(mul(y, reshape(w, cs)), reshape(b, cs));
  if (r.defined()) y = add(y, r);
  return relu ? ipuml::relu(y) : y;
}

void require_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(a.defined());
  REQUIRE(b.defined());
  REQUIRE(a.shape() == b.shape());
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i) {
    INFO("element " << i);
    REQUIRE(va[i] == Approx(vb[i]).margin(tol).epsilon(tol));
  }
}

void require_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  INFO(what);
  REQUIRE(a.shape() == b.shape());
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  REQUIRE(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0);
}

bool has_op(const ir::Graph& g, ir::OpKind k) {
  for (const auto& n : g.nodes)
    if (n.kind == k) return true;
  return false;
}

}  // namespace

TEST_CASE("fused batch norm gives the composite's values and gradients", "[ops][batchnorm]") {
  for (bool affine : {false, true})
    for (bool residual : {false, true})
      for (bool relu : {false, true}) {
        DYNAMIC_SECTION("affine=" << affine << " residual=" << residual << " relu=" << relu) {
          Generator g(3);
          Tensor x = leaf({3, 5, 4, 6}, g, 2.0, 1.5);
          Tensor w = affine ? leaf({5}, g) : Tensor(), b = affine ? leaf({5}, g) : Tensor();
          Tensor r = residual ? leaf({3, 5, 4, 6}, g) : Tensor();
          Tensor dy = randn({3, 5, 4, 6}, &g);
          auto run = [&](bool fused) {
            for (Tensor* t : {&x, &w, &b, &r})
              if (t->defined()) t->set_grad(Tensor());
            Tensor y = fused ? batch_norm_act(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5, r, relu)
                             : composite(x, w, b, r, relu, 1e-5);
            y.backward(dy);
            Ts out{y, x.grad()};
            for (const Tensor* t : {&w, &b, &r})
              if (t->defined()) out.push_back(t->grad());
            return out;
          };
          Ts fused = run(true), ref = run(false);
          REQUIRE(fused.size() == ref.size());
          for (size_t i = 0; i < fused.size(); ++i)
            require_close(fused[i], ref[i], 2e-5, "output " + std::to_string(i));
        }
      }
}

TEST_CASE("fused batch norm passes gradcheck", "[ops][batchnorm][gradcheck]") {
  Generator g(7);
  // Without the ReLU (finite differences across its kink are meaningless); the ReLU's mask is
  // checked against the composite above.
  auto f = [](const Ts& t) {
    return batch_norm_act(t[0], Tensor(), Tensor(), t[1], t[2], true, 0.1, 1e-3, t[3], false);
  };
  auto r = autograd::gradcheck(
      f, {leaf({2, 3, 3, 2}, g), leaf({3}, g), leaf({3}, g), leaf({2, 3, 3, 2}, g)});
  INFO(r.message);
  CHECK(r.ok);
  auto plain = [](const Ts& t) {
    return batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-3);
  };
  auto r2 = autograd::gradcheck(plain, {leaf({4, 2, 5}, g)});
  INFO(r2.message);
  CHECK(r2.ok);
}

TEST_CASE("BatchNorm2d keeps PyTorch's running statistics and fuses BN + ReLU in eval mode",
          "[nn][batchnorm]") {
  Generator g(5);
  nn::BatchNorm2d bn(nn::BatchNorm2dOptions(4).momentum(0.25));
  {
    NoGradGuard no_grad;
    bn->weight.copy_(randn({4}, &g));
    bn->bias.copy_(randn({4}, &g));
  }
  Tensor x = add(mul(randn({2, 4, 3, 5}, &g), 3.0), 2.0);
  bn->forward_act(x, Tensor(), true);
  // Independent: running = 0.75 * (0, 1) + 0.25 * (batch mean, unbiased batch variance).
  auto xv = x.to_vector<double>();
  auto rm = bn->running_mean.to_vector<double>(), rv = bn->running_var.to_vector<double>();
  std::vector<double> mu(4, 0.0), var(4, 0.0);
  for (int c = 0; c < 4; ++c) {
    double s = 0, ss = 0;
    for (int n = 0; n < 2; ++n)
      for (int j = 0; j < 15; ++j) s += xv[static_cast<size_t>((n * 4 + c) * 15 + j)];
    mu[c] = s / 30;
    for (int n = 0; n < 2; ++n)
      for (int j = 0; j < 15; ++j) {
        const double d = xv[static_cast<size_t>((n * 4 + c) * 15 + j)] - mu[c];
        ss += d * d;
      }
    var[c] = ss / 29;
    CHECK(rm[c] == Approx(0.25 * mu[c]).epsilon(1e-5));
    CHECK(rv[c] == Approx(0.75 + 0.25 * var[c]).epsilon(1e-5));
  }
  CHECK(bn->num_batches_tracked.item<int64_t>() == 1);

  bn->eval();
  Tensor r = randn({2, 4, 3, 5}, &g);
  Tensor y;
  {
    NoGradGuard no_grad;
    y = bn->forward_act(x, r, true);
  }
  auto w = bn->weight.to_vector<double>(), b = bn->bias.to_vector<double>();
  auto rvv = r.to_vector<double>(), yv = y.to_vector<double>();
  for (size_t i = 0; i < yv.size(); ++i) {
    const size_t c = (i / 15) % 4;
    const double want =
        std::max(0.0, (xv[i] - rm[c]) / std::sqrt(rv[c] + 1e-5) * w[c] + b[c] + rvv[i]);
    INFO("element " << i);
    REQUIRE(yv[i] == Approx(want).margin(1e-5).epsilon(1e-5));
  }
  // Traced inference records the one fused op (with gradients wanted, the composite).
  ir::Tracer tracer;
  Tensor xs = tracer.input(x), rs = tracer.input(r);
  Tensor ys;
  {
    NoGradGuard no_grad;
    ys = bn->forward_act(xs, rs, true);
  }
  auto trace = tracer.finish({ys});
  CHECK(has_op(trace.graph, ir::OpKind::BatchNormInference));
  CHECK_FALSE(has_op(trace.graph, ir::OpKind::Relu));
  cpu::GraphExecutor exe(trace.graph);
  require_same_bits(exe.run({x, r}, trace.states)[0], y, "traced inference");
}

TEST_CASE("fused batch norm: same bits with 1 or 2 threads, traced like eager",
          "[ops][batchnorm][determinism]") {
  RestoreThreads restore;
  Generator g(9);
  Tensor x = leaf({4, 24, 9, 7}, g, 1.0, 0.5);
  Tensor w = leaf({24}, g), b = leaf({24}, g), r = leaf({4, 24, 9, 7}, g);
  Tensor dy = randn({4, 24, 9, 7}, &g);
  auto run = [&](const Tensor& xi, const Tensor& ri) {
    for (Tensor* t : {&x, &w, &b, &r}) t->set_grad(Tensor());
    Tensor y1 = batch_norm_act(xi, Tensor(), Tensor(), w, b, true, 0.1, 1e-5, Tensor(), true);
    Tensor y2 = batch_norm_act(y1, Tensor(), Tensor(), w, b, true, 0.1, 1e-5, ri, true);
    return y2;
  };
  auto eager = [&] {
    Tensor y = run(x, r);
    y.backward(dy);
    return Ts{y, x.grad(), w.grad(), b.grad(), r.grad()};
  };
  set_num_threads(1);
  Ts one = eager();
  set_num_threads(2);
  Ts two = eager();
  for (size_t i = 0; i < one.size(); ++i)
    require_same_bits(one[i], two[i], "1 vs 2 threads, output " + std::to_string(i));

  // The traced step runs the same kernels: the same bits as eager.
  for (Tensor* t : {&w, &b}) t->set_grad(Tensor());
  ir::Tracer tracer;
  Tensor xs = tracer.input(x.detach(), "x"), rs = tracer.input(r.detach(), "r");
  Tensor ys = run(xs.requires_grad_(), rs.requires_grad_());
  ys.backward(tracer.input(dy, "dy"));
  auto trace = tracer.finish({ys, w.grad(), b.grad()});
  CHECK(has_op(trace.graph, ir::OpKind::BatchNorm));
  CHECK(has_op(trace.graph, ir::OpKind::BatchNormBackward));
  cpu::GraphExecutor exe(trace.graph);
  Ts got = exe.run({x.detach(), r.detach(), dy}, trace.states);
  require_same_bits(got[0], two[0], "traced output");
  require_same_bits(got[1], two[2], "traced dweight");
  require_same_bits(got[2], two[3], "traced dbias");
}

TEST_CASE("fused batch norm: bad calls say what is wrong", "[ops][batchnorm][errors]") {
  using testing::error_of;
  Tensor x = randn({2, 3, 4, 4});
  CHECK_THAT(error_of([&] {
               batch_norm_act(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5,
                              randn({2, 3, 4, 5}), true);
             }),
             Contains("batch_norm: residual of shape [2, 3, 4, 5] does not match the input of "
                      "shape [2, 3, 4, 4]"));
  CHECK_THAT(error_of([&] { batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), false); }),
             Contains("running_mean and running_var must be given together"));
  using ir::OpKind;
  using ir::TensorMeta;
  ir::Attrs a;
  a.scalar = 1e-5;
  const TensorMeta xm{{2, 3, 4, 4}, DType::Float32};
  CHECK_THAT(error_of([&] {
               ir::infer(OpKind::BatchNorm, a, {{{2, 3, 4, 4}, DType::Float16}});
             }),
             Contains("BatchNorm: expected a float32 input, got float16"));
  CHECK_THAT(error_of([&] {
               ir::infer(OpKind::BatchNormInference, a,
                         {xm, {{3}, DType::Float32}, {{4}, DType::Float32}});
             }),
             Contains("BatchNormInference: mean/var of shape [4] and float32, expected float32 "
                      "[3]"));
  CHECK_THAT(error_of([&] {
               ir::infer(OpKind::BatchNormBackward, a,
                         {{{2, 3, 4, 5}, DType::Float32},
                          xm,
                          {{1, 3, 1, 1}, DType::Float32},
                          {{1, 3, 1, 1}, DType::Float32}});
             }),
             Contains("BatchNormBackward: gradient of shape [2, 3, 4, 5]"));
  a.mode = 2;
  CHECK_THAT(error_of([&] { ir::infer(OpKind::BatchNorm, a, {xm}); }),
             Contains("BatchNorm: activation mode 2 is not 0 (none) or 1 (ReLU)"));
  a.mode = 0;
  a.flag2 = true;
  CHECK_THAT(error_of([&] { ir::infer(OpKind::BatchNorm, a, {xm}); }),
             Contains("BatchNorm: expected 3 inputs, got 1"));
}
