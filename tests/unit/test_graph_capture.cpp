// Tracing a training step into an ir::Graph and running it on the CPU executor gives the same
// numbers as eager mode, step after step, for a small MLP and a small CNN.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

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
