// A whole training step (forward, loss, backward, clipping, optimizer update) traced once into an
// ir::Graph and run repeatedly equals the same number of eager steps: bias correction and the
// learning rate are graph state, not constants baked in at trace time.
#include <functional>
#include <memory>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/optim/optim.hpp>

using namespace ipuml;
using Ts = std::vector<Tensor>;

namespace {

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(Ts)>;

Ts make_params(uint64_t seed) {
  Generator g(seed);
  Ts p;
  for (const Shape& s : std::vector<Shape>{{8, 4}, {8}, {3, 8}, {3}})
    p.push_back(mul(randn(s, &g), 0.5).detach().requires_grad_());
  return p;
}

Tensor train_step(optim::Optimizer& opt, const Ts& p, const Tensor& x, const Tensor& y,
                  double clip) {
  opt.zero_grad();
  Tensor loss = cross_entropy(linear(relu(linear(x, p[0], p[1])), p[2], p[3]), y);
  loss.backward();
  if (clip > 0) optim::clip_grad_norm_(p, clip);
  opt.step();
  return loss;
}

void require_near(const Tensor& a, const Tensor& b, const std::string& what) {
  INFO(what);
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  REQUIRE(va.size() == vb.size());
  for (size_t k = 0; k < va.size(); ++k) REQUIRE(va[k] == Approx(vb[k]).margin(1e-6).epsilon(1e-5));
}

void check_traced_equals_eager(const MakeOpt& make, double clip) {
  Ts eager = make_params(11);
  Ts traced;
  for (auto& t : eager) traced.push_back(t.clone().detach().requires_grad_());
  auto opt_e = make(eager);
  auto opt_t = make(traced);
  Generator dg(5);
  const Tensor x = randn({6, 4}, &dg);
  const Tensor y = randint(0, 3, {6}, &dg);

  ir::Tracer tracer;
  Tensor xi = tracer.input(x, "x");
  Tensor yi = tracer.input(y, "y");
  Tensor loss_sym = train_step(*opt_t, traced, xi, yi, clip);
  ir::Trace trace = tracer.finish({loss_sym});
  // Tracing computed nothing: parameters and optimizer state are untouched, grads restored.
  for (size_t i = 0; i < eager.size(); ++i)
    CHECK(eager[i].to_vector<float>() == traced[i].to_vector<float>());
  const nn::StateDict fresh = opt_e->state_dict();
  const nn::StateDict after_trace = opt_t->state_dict();
  for (size_t i = 0; i < fresh.size(); ++i)
    CHECK(fresh[i].second.to_vector<float>() == after_trace[i].second.to_vector<float>());
  CHECK_FALSE(traced[0].grad().defined());
  CHECK(trace.graph.updates.size() >= eager.size());

  cpu::GraphExecutor exec(trace.graph);
  auto compare = [&](int step) {
    const std::string s = "step " + std::to_string(step);
    for (size_t i = 0; i < eager.size(); ++i)
      require_near(traced[i], eager[i], s + " param " + std::to_string(i));
    const nn::StateDict se = opt_e->state_dict(), st = opt_t->state_dict();
    REQUIRE(se.size() == st.size());
    for (size_t i = 0; i < se.size(); ++i)
      require_near(st[i].second, se[i].second, s + " " + se[i].first);
  };
  for (int step = 1; step <= 3; ++step) {
    Tensor le = train_step(*opt_e, eager, x, y, clip);
    Tensor lg = exec.run({x, y}, trace.states)[0];
    CHECK(le.item<float>() == Approx(lg.item<float>()).epsilon(1e-5));
    compare(step);
  }

  // A scheduler changes the lr tensor in place; the graph traced earlier reads the new value.
  optim::StepLR sched_e(*opt_e, 1, 0.1), sched_t(*opt_t, 1, 0.1);
  sched_e.step();
  sched_t.step();
  REQUIRE(opt_t->get_lr(0) == Approx(opt_e->get_lr(0)));
  const Ts before = {traced[0].clone()};
  for (int step = 4; step <= 5; ++step) {
    train_step(*opt_e, eager, x, y, clip);
    exec.run({x, y}, trace.states);
    compare(step);
  }
  CHECK(traced[0].to_vector<float>() != before[0].to_vector<float>());
}

}  // namespace

TEST_CASE("traced Adam step equals eager steps, and follows lr changes", "[optim][graph]") {
  check_traced_equals_eager(
      [](Ts p) {
        return std::make_unique<optim::Adam>(std::move(p),
                                             optim::AdamOptions(0.05).weight_decay(0.01));
      },
      0.0);
}

TEST_CASE("traced SGD-with-momentum step equals eager steps, and follows lr changes",
          "[optim][graph]") {
  check_traced_equals_eager(
      [](Ts p) {
        return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.2).momentum(0.9));
      },
      0.0);
}

TEST_CASE("traced steps of the other optimizers, with clipping, equal eager steps",
          "[optim][graph]") {
  SECTION("SGD, dampening and nesterov-free momentum, clipped") {
    check_traced_equals_eager(
        [](Ts p) {
          return std::make_unique<optim::SGD>(
              std::move(p), optim::SGDOptions(0.2).momentum(0.9).dampening(0.3).weight_decay(0.01));
        },
        0.5);
  }
  SECTION("SGD nesterov") {
    check_traced_equals_eager(
        [](Ts p) {
          return std::make_unique<optim::SGD>(std::move(p),
                                              optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
        },
        0.0);
  }
  SECTION("AdamW amsgrad, clipped") {
    check_traced_equals_eager(
        [](Ts p) {
          return std::make_unique<optim::AdamW>(
              std::move(p), optim::AdamWOptions(0.05).weight_decay(0.1).amsgrad(true));
        },
        0.5);
  }
  SECTION("LAMB") {
    check_traced_equals_eager(
        [](Ts p) {
          return std::make_unique<optim::LAMB>(std::move(p),
                                               optim::LAMBOptions(0.05).weight_decay(0.01));
        },
        0.0);
  }
}

TEST_CASE("optimizer misuse while tracing is refused", "[optim][graph][errors]") {
  Ts p = make_params(3);
  optim::SGD opt(p, optim::SGDOptions(0.1));
  optim::LossScaler scaler(8.0);
  ir::Tracer tracer;
  Tensor xi = tracer.input(ones({2, 4}), "x");
  CHECK_THROWS_WITH(opt.set_lr(0, 0.5), Catch::Contains("while a step is being traced"));
  CHECK_THROWS_WITH(opt.state_dict(), Catch::Contains("tracing"));
  CHECK_THROWS_WITH(scaler.step(opt), Catch::Contains("traced graph"));
  tracer.finish({relu(xi)});
}
