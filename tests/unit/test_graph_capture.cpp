// Tracing a training step into an ir::Graph and running it on the CPU executor gives the same
// numbers as eager mode, step after step, for a small MLP and a small CNN.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

#include "../support/fusion_switch.hpp"

using namespace ipuml;
using Ts = std::vector<Tensor>;

namespace {

Ts make_params(const std::vector<Shape>& shapes, uint64_t seed) {
  Generator g(seed);
  Ts p;
  for (auto& s : shapes) p.push_back(mul(randn(s, &g), 0.3).detach().requires_grad_());
  return p;
}
Ts clone_params(const Ts& p) {
  Ts c;
  for (auto& t : p) c.push_back(t.clone().detach().requires_grad_());
  return c;
}

// One SGD step written with ordinary ops; returns the loss.
using Forward = std::function<Tensor(const Ts& params, const Tensor& x)>;
Tensor sgd_step(const Forward& f, Ts& params, const Tensor& x, const Tensor& y, double lr) {
  for (auto& p : params) p.set_grad(Tensor());
  Tensor loss = cross_entropy(f(params, x), y);
  loss.backward();
  NoGradGuard ng;
  for (auto& p : params) p.sub_(mul(p.grad(), lr));
  return loss;
}

void compare_eager_and_graph(const Forward& f, const std::vector<Shape>& shapes,
                             const Shape& xshape, int classes) {
  Ts eager = make_params(shapes, 7);
  Ts traced = clone_params(eager);
  Generator dg(3);
  Tensor x = randn(xshape, &dg);
  Tensor y = randint(0, classes, {xshape[0]}, &dg);

  ir::Tracer tracer;
  Tensor xi = tracer.input(x, "x");
  Tensor yi = tracer.input(y, "y");
  Tensor loss_sym = sgd_step(f, traced, xi, yi, 0.1);
  ir::Trace trace = tracer.finish({loss_sym});
  CHECK(trace.graph.updates.size() == shapes.size());
  // Tracing ran nothing: the traced copies still hold their initial values.
  for (size_t i = 0; i < eager.size(); ++i)
    CHECK(eager[i].to_vector<float>() == traced[i].to_vector<float>());
  CHECK_FALSE(traced[0].grad().defined());

  cpu::GraphExecutor exec(trace.graph);
  CHECK(exec.plan().arena_bytes <= exec.plan().naive_bytes);
  for (int step = 0; step < 3; ++step) {
    Tensor le = sgd_step(f, eager, x, y, 0.1);
    Tensor lg = exec.run({x, y}, trace.states)[0];
    CHECK(le.item<float>() == Approx(lg.item<float>()).epsilon(1e-5));
    for (size_t i = 0; i < eager.size(); ++i) {
      auto a = eager[i].to_vector<float>();
      auto b = traced[i].to_vector<float>();
      for (size_t k = 0; k < a.size(); ++k)
        REQUIRE(a[k] == Approx(b[k]).margin(1e-5).epsilon(1e-5));
    }
  }
}

}  // namespace

TEST_CASE("eager and captured-graph training steps agree: MLP", "[graph]") {
  Forward mlp = [](const Ts& p, const Tensor& x) {
    return linear(relu(linear(x, p[0], p[1])), p[2], p[3]);
  };
  compare_eager_and_graph(mlp, {{16, 8}, {16}, {4, 16}, {4}}, {6, 8}, 4);
}

TEST_CASE("eager and captured-graph training steps agree: CNN", "[graph]") {
  Forward cnn = [](const Ts& p, const Tensor& x) {
    Tensor h = relu(max_pool2d(conv2d(x, p[0], p[1]), {2, 2}));
    return linear(h.flatten(1), p[2], p[3]);
  };
  compare_eager_and_graph(cnn, {{4, 1, 3, 3}, {4}, {3, 4 * 3 * 3}, {3}}, {5, 1, 8, 8}, 3);
}

TEST_CASE("graph runs check their inputs", "[graph][errors]") {
  ir::Tracer tracer;
  Tensor xi = tracer.input(ir::TensorMeta{{2, 3}, kFloat32}, "x");
  auto trace = tracer.finish({relu(xi)});
  cpu::GraphExecutor exec(trace.graph);
  CHECK_THROWS_WITH(exec.run({ones({3, 2})}, {}), Catch::Contains("must have shape [2, 3]"));
  CHECK_THROWS_WITH(exec.run({}, {}), Catch::Contains("takes 1 inputs"));
  auto out = exec.run({full({2, 3}, -1.0)}, {});
  CHECK(out[0].to_vector<float>() == std::vector<float>(6, 0.0f));
}

TEST_CASE("the CPU executor runs reshapes as views that keep their bytes alive", "[graph]") {
  ir::Tracer tracer;
  Tensor xi = tracer.input(ir::TensorMeta{{4, 6}, kFloat32}, "x");
  // a's only direct reader is the reshape; exp(x) is planned after it and must not take a's
  // block while b (a view of a) is still to be read.
  Tensor a = mul(xi, 2.0);
  Tensor b = a.reshape({6, 4});
  Tensor c = exp(xi).reshape({6, 4});
  Tensor d = add(b, c);
  Tensor e = xi.reshape({24});  // a view of a graph input
  auto trace = tracer.finish({d.reshape({2, 12}), mul(e, 3.0)});
  cpu::GraphExecutor exec(trace.graph);
  const auto& g = exec.graph();
  int views = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (g.nodes[n].kind != ir::OpKind::Reshape) continue;
    REQUIRE(exec.plan().view.size() == g.nodes.size());
    CHECK(exec.plan().view[n]);
    const int64_t in = g.nodes[n].inputs[0], out = g.nodes[n].outputs[0];
    CHECK(exec.plan().offset[out] == exec.plan().offset[in]);
    ++views;
  }
  CHECK(views == 4);
  Generator gen(5);
  Tensor x = randn({4, 6}, &gen);
  for (int run = 0; run < 2; ++run) {
    auto out = exec.run({x}, {});
    const auto xv = x.to_vector<float>();
    const auto dv = out[0].to_vector<float>(), ev = out[1].to_vector<float>();
    REQUIRE(out[0].shape() == Shape{2, 12});
    for (size_t i = 0; i < xv.size(); ++i) {
      CHECK(dv[i] == Approx(2.0f * xv[i] + std::exp(xv[i])).epsilon(1e-6));
      CHECK(ev[i] == 3.0f * xv[i]);
    }
  }
}

TEST_CASE("a reshape that is a state's new value is copied into the state", "[graph]") {
  Tensor w = full({2, 3}, 1.5);
  ir::Tracer tracer;
  Tensor xi = tracer.input(ir::TensorMeta{{3, 2}, kFloat32}, "x");
  w.copy_(add(w.reshape({6}), xi.reshape({6})).reshape({2, 3}));
  auto trace = tracer.finish({});
  REQUIRE(trace.graph.updates.size() == 1);
  cpu::GraphExecutor exec(trace.graph);
  const auto& g = exec.graph();
  int checked = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].kind == ir::OpKind::Reshape) {
      // Neither a view of the state (its update may overwrite it first) nor the update itself.
      const bool shared =
          g.nodes[n].outputs[0] == g.updates[0].value || g.nodes[n].inputs[0] == g.updates[0].state;
      CHECK_FALSE((exec.plan().view[n] && shared));
      ++checked;
    }
  CHECK(checked >= 2);
  for (int run = 0; run < 2; ++run) exec.run({arange(0, 6).reshape({3, 2})}, trace.states);
  CHECK(w.to_vector<float>() == std::vector<float>{1.5f, 3.5f, 5.5f, 7.5f, 9.5f, 11.5f});
}

namespace {

// A traced linear layer + cross entropy step's input gradient and weight gradient, run by an
// executor made with fusions on or off.
struct CrossEntropyStep {
  ir::Trace trace;
  CrossEntropyStep(int64_t rows, int64_t classes, bool export_exp) {
    Generator gen(11);
    w = mul(randn({classes, 8}, &gen), 0.5).requires_grad_();
    ir::Tracer tracer;
    Tensor x = tracer.input(ir::TensorMeta{{rows, 8}, kFloat32}, "x");
    Tensor t = tracer.input(ir::TensorMeta{{rows}, kInt64}, "t");
    Tensor logits = matmul(x, w.t());
    Tensor loss = cross_entropy(logits, t);
    loss.backward();
    std::vector<Tensor> outs{loss, w.grad()};
    if (export_exp) outs.push_back(exp(log_softmax(logits, 1)));  // a second, unrelated Exp
    trace = tracer.finish(outs);
  }
  Tensor w;
};

using ipuml::testing::run_with_fusion;

}  // namespace

TEST_CASE("the CPU executor runs log_softmax's gradient as one op with the same bits", "[graph]") {
  // 50257 classes: rows longer than the sums' block of 32768 (a language model's head).
  for (int64_t classes : {int64_t(37), int64_t(50257)}) {
    CAPTURE(classes);
    CrossEntropyStep step(6, classes, false);
    const auto& g = step.trace.graph;
    const auto f = cpu::fuse_log_softmax_backward(g);
    int fused = 0, inside = 0;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      fused += f.exp_node[n] >= 0;
      inside += f.runs_at[n] != int64_t(n);
    }
    CHECK(fused == 1);
    CHECK(inside == 3);  // the Exp, the Sum and the Mul
    const auto plan = cpu::plan_memory(g, 64, {}, false, f.runs_at);
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (f.runs_at[n] != int64_t(n)) CHECK(plan.offset[g.nodes[n].outputs[0]] == -1);

    Generator gen(4);
    Tensor x = randn({6, 8}, &gen);
    Tensor t = randint(0, classes, {6}, &gen);
    const auto a = run_with_fusion(step.trace, true, {x, t});
    const auto b = run_with_fusion(step.trace, false, {x, t});
    CHECK(a[0].item<float>() == b[0].item<float>());
    CHECK(a[1].to_vector<float>() == b[1].to_vector<float>());
    // Against eager autograd (its own op order; not necessarily the same bits).
    Tensor w = step.w.detach().clone().requires_grad_();
    cross_entropy(matmul(x, w.t()), t).backward();
    const auto want = w.grad().to_vector<float>(), got = a[1].to_vector<float>();
    for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-6));
  }
}

TEST_CASE("log_softmax's gradient stays four ops when its parts are read elsewhere", "[graph]") {
  Generator gen(9);
  const Tensor y = log_softmax(randn({3, 5}, &gen), 1), g = randn({3, 5}, &gen);
  for (int exported = 0; exported < 3; ++exported) {
    CAPTURE(exported);
    ir::Tracer tracer;
    Tensor yi = tracer.input(y, "y"), gi = tracer.input(g, "g");
    Tensor e = exp(yi), s = sum(gi, {1}, true);
    Tensor dx = sub(gi, mul(e, s));
    std::vector<Tensor> outs{dx};
    if (exported == 1) outs.push_back(e);  // the exponentials are a result too
    if (exported == 2) outs.push_back(s);  // so are the sums
    auto trace = tracer.finish(outs);
    const auto f = cpu::fuse_log_softmax_backward(trace.graph);
    int fused = 0;
    for (auto v : f.exp_node) fused += v >= 0;
    CHECK(fused == (exported == 0 ? 1 : 0));
    const auto a = run_with_fusion(trace, true, {y, g});
    const auto b = run_with_fusion(trace, false, {y, g});
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].to_vector<float>() == b[i].to_vector<float>());
  }
}
