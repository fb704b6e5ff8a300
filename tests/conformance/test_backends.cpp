// Conformance: every registered backend runs every op family's traced graph and a training
// step with the same numbers as eager CPU execution (1e-5 relative), and so does every
// registered eager device, op by op. A new backend that registers itself is picked up here
// automatically.
#include <functional>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

using namespace ipuml;
using Ts = std::vector<Tensor>;

namespace {

struct Program {
  const char* name;
  std::vector<Shape> input_shapes;
  std::function<Tensor(const Ts&)> fn;
};

const std::vector<Program>& programs() {
  static const Tensor labels = from_vector<int64_t>({1, 0, 2, 1}, {4});
  static const Tensor index = from_vector<int64_t>({2, 0, 1, 2}, {4});
  static const std::vector<Program> p = {
      {"elementwise",
       {{4, 5}, {5}},
       [](const Ts& x) { return tanh(x[0] * x[1] + 1.0) - sigmoid(x[0]) / (abs(x[1]) + 1.0); }},
      {"unary",
       {{3, 7}},
       [](const Ts& x) {
         return gelu(x[0]) + exp(neg(x[0])) + sqrt(abs(x[0]) + 0.5) + relu(x[0]);
       }},
      {"reductions",
       {{3, 4, 5}},
       [](const Ts& x) {
         return sum(x[0], {0, 2}) + amax(x[0], {2}).sum({0}) + var(x[0], {2}).mean({0});
       }},
      {"matmul", {{2, 3, 4}, {4, 6}}, [](const Ts& x) { return matmul(x[0], x[1]); }},
      {"linear-transposed", {{5, 8}, {3, 8}}, [](const Ts& x) { return linear(x[0], x[1]); }},
      {"conv",
       {{2, 4, 7, 7}, {6, 2, 3, 3}},
       [](const Ts& x) {
         return conv2d(x[0], x[1], Tensor(), {2, 2}, {1, 1}, {1, 1}, 2);
       }},
      {"conv-transpose",
       {{2, 4, 5, 4}, {4, 3, 2, 2}, {4, 3, 3, 3}, {6}},
       [](const Ts& x) {
         // UNet's up-convolution; strided with output_padding and groups; output_padding past
         // the stride (below the dilation), cropped and zero-filled.
         Tensor a = conv_transpose2d(x[0], x[1], x[3].slice(0, 0, 3), {2, 2});
         Tensor b = conv_transpose2d(x[0], x[2], x[3], {2, 2}, {1, 1}, {1, 1}, 2);
         Tensor c = conv_transpose2d(x[0], x[2], Tensor(), {1, 1}, {1, 0}, {1, 1}, 1, {2, 2});
         return cat({a.reshape({-1}), b.reshape({-1}), c.reshape({-1})}, 0);
       }},
      {"rotary",
       {{2, 5, 3, 8}},
       [](const Ts& x) {
         namespace F = nn::functional;
         return F::rotary_embedding(x[0], F::RotaryEmbeddingFuncOptions().rotary_dim(4).offset(3)) +
                F::rotary_embedding(
                    x[0], F::RotaryEmbeddingFuncOptions().seq_dim(2).style(nn::RotaryStyle::Half));
       }},
      {"pools",
       {{2, 3, 8, 8}},
       [](const Ts& x) {
         return max_pool2d(x[0], {2, 2}) + avg_pool2d(x[0], {2, 2});
       }},
      {"softmax-loss",
       {{4, 3}},
       [](const Ts& x) {
         return cross_entropy(softmax(x[0], 1), labels.to(x[0].device())) +
                log_softmax(x[0], 0).sum();
       }},
      {"movement",
       {{3, 4}},
       [](const Ts& x) {
         return cat({x[0].t().slice(0, 1, 4), x[0].permute({1, 0}).narrow(0, 0, 1)}, 0)
             .reshape({-1});
       }},
      {"indexing",
       {{3, 5}},
       [](const Ts& x) {
         const Tensor i = index.to(x[0].device());
         return index_select(x[0], 0, i).sum({1}) +
                gather(x[0], 1, i.reshape({4, 1}).slice(0, 0, 3)).sum();
       }},
      {"norms",
       {{4, 6, 2}},
       [](const Ts& x) {
         return layer_norm(x[0], {2}) + group_norm(x[0], 3) +
                batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true);
       }},
      {"batch-norm-fused",
       {{3, 4, 5, 2}, {4}, {3, 4, 5, 2}},
       [](const Ts& x) {
         Tensor a = batch_norm_act(x[0], Tensor(), Tensor(), x[1], mul(x[1], 0.5), true, 0.1, 1e-5,
                                   x[2], true);
         Tensor b = batch_norm_act(x[0], x[1], add(abs(x[1]), 0.5), x[1], x[1], false, 0.1, 1e-5,
                                   Tensor(), true);
         return a + b;
       }},
      {"adam-update",
       {{4, 37}, {4, 37}, {4, 37}},
       [](const Ts& x) {
         // The fused optimizer step, in place on copies (the inputs stay as they are).
         Tensor p = x[0].clone(), m = mul(x[1], 0.1), v = mul(x[1], x[1]), vmax = abs(x[2]);
         AdamUpdateOptions o;
         o.weight_decay = 0.1;
         o.decay = AdamDecay::Decoupled;
         adam_update_(p, m, v, vmax, x[2], full({}, 0.01), full({}, 3.0), o);
         return p + m + v + vmax;
       }},
      {"sgd-update",
       {{4, 37}, {4, 37}},
       [](const Ts& x) {
         // The fused SGD step, Nesterov momentum and weight decay, then one with dampening whose
         // step input makes it the first (the buffer becomes the gradient), on copies.
         Tensor p = x[0].clone(), buf = mul(x[1], 0.5), q = x[0].clone(), buf2 = x[1].clone();
         SgdUpdateOptions o;
         o.momentum = 0.9;
         o.weight_decay = 0.01;
         o.nesterov = true;
         sgd_update_(p, buf, x[1], full({}, 0.1), Tensor(), o);
         SgdUpdateOptions d;
         d.momentum = 0.8;
         d.dampening = 0.25;
         sgd_update_(q, buf2, x[0], full({}, 0.05), full({}, 1.0), d);
         return p + buf + q + buf2;
       }},
  };
  return p;
}

void require_close(const Tensor& a, const Tensor& b, const std::string& what) {
  INFO(what);
  REQUIRE(a.shape() == b.shape());
  auto va = a.to_vector<double>();
  auto vb = b.to_vector<double>();
  for (size_t i = 0; i < va.size(); ++i)
    REQUIRE(std::abs(va[i] - vb[i]) <= 1e-5 * std::max(1.0, std::abs(vb[i])));
}

// One SGD step (lr 0.2) of a two-layer MLP with parameters p; returns the loss.
Tensor mlp_sgd_step(Ts& p, const Tensor& xb, const Tensor& yb) {
  for (auto& t : p) t.set_grad(Tensor());
  Tensor loss = cross_entropy(linear(relu(linear(xb, p[0], p[1])), p[2]), yb);
  loss.backward();
  NoGradGuard ng;
  for (auto& t : p) t.sub_(mul(t.grad(), 0.2));
  return loss;
}

}  // namespace

TEST_CASE("every backend computes every op family like eager CPU", "[conformance]") {
  const std::string name = GENERATE(from_range(backend::backend_names()));
  auto be = backend::get_backend(name);
  CHECK_FALSE(be->devices().empty());
  for (const auto& prog : programs()) {
    DYNAMIC_SECTION(name << ": " << prog.name) {
      Generator g(11);
      Ts inputs;
      for (auto& s : prog.input_shapes) inputs.push_back(randn(s, &g));
      Tensor eager = prog.fn(inputs);
      ir::Tracer tracer;
      Ts symbolic;
      for (size_t i = 0; i < inputs.size(); ++i) symbolic.push_back(tracer.input(inputs[i]));
      auto trace = tracer.finish({prog.fn(symbolic)});
      for (auto& n : trace.graph.nodes) CHECK(be->supports(n.kind));
      auto exe = be->compile(trace.graph, {});
      const Tensor got = exe->run(inputs, trace.states, 0)[0];
      require_close(got, eager, prog.name);
      // The emulator with its exchange checked (operands copied from per-tile pieces, one
      // vertex call per tile) computes the same bits.
      if (name == "ipu") {
        auto checked = be->compile(trace.graph, {{"check_exchange", "1"}});
        CHECK(checked->run(inputs, trace.states, 0)[0].to_vector<double>() ==
              got.to_vector<double>());
      }
    }
  }
}

TEST_CASE("every backend runs a training step like eager CPU", "[conformance]") {
  const std::string name = GENERATE(from_range(backend::backend_names()));
  Generator g(5);
  Ts eager_params{mul(randn({8, 6}, &g), 0.3), zeros({8}), mul(randn({3, 8}, &g), 0.3)};
  Ts graph_params;
  for (auto& p : eager_params) {
    p.requires_grad_();
    graph_params.push_back(p.clone().detach().requires_grad_());
  }
  Tensor x = randn({5, 6}, &g);
  Tensor y = randint(0, 3, {5}, &g);
  const auto step = mlp_sgd_step;
  ir::Tracer tracer;
  Tensor xs = tracer.input(x), ys = tracer.input(y);
  auto trace = tracer.finish({step(graph_params, xs, ys)});
  // The IPU emulator runs the step with its exchange checked (ExecOptions::check_exchange).
  auto exe = backend::get_backend(name)->compile(
      trace.graph,
      name == "ipu" ? backend::CompileOptions{{"check_exchange", "1"}} : backend::CompileOptions{});
  for (int i = 0; i < 3; ++i) {
    Tensor le = step(eager_params, x, y);
    Tensor lg = exe->run({x, y}, trace.states, static_cast<uint64_t>(i))[0];
    require_close(lg, le, name + " loss");
    for (size_t k = 0; k < eager_params.size(); ++k)
      require_close(graph_params[k], eager_params[k], name + " param");
  }
}

TEST_CASE("every eager device computes every op family like eager CPU", "[conformance][devices]") {
  const Device device = GENERATE(from_range(backend::eager_devices()));
  for (const auto& prog : programs()) {
    DYNAMIC_SECTION(device << ": " << prog.name) {
      Generator g(11);
      Ts on_cpu, on_device;
      for (auto& s : prog.input_shapes) {
        on_cpu.push_back(randn(s, &g));
        on_device.push_back(on_cpu.back().to(device));
      }
      Tensor got = prog.fn(on_device);
      CHECK(got.device() == device);
      require_close(got.cpu(), prog.fn(on_cpu), prog.name);
    }
  }
}

TEST_CASE("every eager device runs a training step like eager CPU", "[conformance][devices]") {
  const Device device = GENERATE(from_range(backend::eager_devices()));
  Generator g(5);
  Ts cpu_params{mul(randn({8, 6}, &g), 0.3), zeros({8}), mul(randn({3, 8}, &g), 0.3)};
  Ts dev_params;
  for (auto& p : cpu_params) {
    p.requires_grad_();
    dev_params.push_back(p.detach().clone().to(device).requires_grad_());
  }
  const auto step = mlp_sgd_step;
  for (int i = 0; i < 2; ++i) {
    Tensor x = randn({5, 6}, &g);
    Tensor y = randint(0, 3, {5}, &g);
    Tensor lc = step(cpu_params, x, y);
    Tensor ld = step(dev_params, x.to(device), y.to(device));
    CHECK(ld.device() == device);
    require_close(ld.cpu(), lc, device.str() + " loss");
    for (size_t k = 0; k < cpu_params.size(); ++k) {
      CHECK(dev_params[k].device() == device);
      require_close(dev_params[k].cpu(), cpu_params[k], device.str() + " param");
    }
  }
}

TEST_CASE("unknown backends and options are reported", "[conformance][errors]") {
  CHECK_THROWS_WITH(backend::get_backend("tpu"), Catch::Contains("registered backends are"));
  ir::Tracer tracer;
  auto trace = tracer.finish({relu(tracer.input(ones({2})))});
  CHECK_THROWS_WITH(backend::get_backend("cpu")->compile(trace.graph, {{"colour", "blue"}}),
                    Catch::Contains("unknown compile option 'colour'"));
}
