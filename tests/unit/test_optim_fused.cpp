// The fused Adam / AdamW update (adam_update_, ir::OpKind::AdamUpdate): the same trajectory as
// the composite of elementwise ops it replaced (state included), the same bits eagerly, traced
// on the CPU executor, compiled for the IPU emulator and on the eager IPU device, and with 1 or 2
// threads; and the vectorised square root gives std::sqrt's bits. The fused SGD update
// (sgd_update_, ir::OpKind::SgdUpdate) likewise: the composite's bits, an independent scalar
// loop with torch's lazily created buffer, every backend, 1 or 2 threads.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/optim/optim.hpp>

using namespace ipuml;
using Ts = std::vector<Tensor>;

namespace {

struct RestoreThreads {
  ~RestoreThreads() { set_num_threads(0); }
};

struct Config {
  bool decoupled;  // AdamW, else Adam
  bool amsgrad;
  double weight_decay;
  std::string name() const {
    return std::string(decoupled ? "AdamW" : "Adam") + (amsgrad ? " amsgrad" : "") +
           " wd=" + std::to_string(weight_decay);
  }
};

std::unique_ptr<optim::Optimizer> make(const Config& c, Ts params, double lr = 0.01) {
  const optim::Betas betas(0.9, 0.99);
  if (c.decoupled)
    return std::make_unique<optim::AdamW>(std::move(params), optim::AdamWOptions(lr)
                                                                 .betas(betas)
                                                                 .eps(1e-6)
                                                                 .weight_decay(c.weight_decay)
                                                                 .amsgrad(c.amsgrad));
  return std::make_unique<optim::Adam>(std::move(params), optim::AdamOptions(lr)
                                                              .betas(betas)
                                                              .eps(1e-6)
                                                              .weight_decay(c.weight_decay)
                                                              .amsgrad(c.amsgrad));
}

// Odd sizes leave vector tails; 70 000 elements span several parallel blocks.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s{{37}, {5, 16}, {3, 333}, {70000}, {}};
  return s;
}

Ts make_params(uint64_t seed) {
  Generator g(seed);
  Ts p;
  for (const auto& s : shapes()) p.push_back(randn(s, &g).requires_grad_());
  return p;
}

// Gradients for `steps` steps, fixed by the seed.
std::vector<Ts> make_grads(int steps, uint64_t seed) {
  Generator g(seed);
  std::vector<Ts> out(static_cast<size_t>(steps));
  for (auto& step : out)
    for (const auto& s : shapes()) step.push_back(mul(randn(s, &g), 0.3));
  return out;
}

std::vector<uint32_t> bits(const Tensor& t) {
  const auto v = t.cpu().contiguous().to_vector<float>();
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

// The params and every state tensor, as bits.
std::vector<uint32_t> snapshot(const Ts& params, const optim::Optimizer& opt) {
  std::vector<uint32_t> out;
  for (auto& p : params)
    for (auto b : bits(p)) out.push_back(b);
  for (size_t i = 0; i < params.size(); ++i)
    for (auto& [k, t] : opt.state(i))
      for (auto b : bits(t)) out.push_back(b);
  return out;
}

// One step of `opt` over `params` traced once, with the gradients as state each run refills:
// the graph must hold one `fused` op per parameter and none of `unfused`; compiled for
// `backend`, its runs over `grads` must leave the parameters and optimizer state with the bits
// of `want` (the eager steps'), step after step.
void check_traced_steps(const std::string& backend, const backend::CompileOptions& options,
                        const Ts& params, optim::Optimizer& opt, ir::OpKind fused,
                        std::initializer_list<ir::OpKind> unfused, const std::vector<Ts>& grads,
                        const std::vector<std::vector<uint32_t>>& want) {
  Ts g;
  for (auto p : params) {
    g.push_back(zeros(p.shape()));
    p.set_grad(g.back());
  }
  ir::Tracer tracer;
  opt.step();
  ir::Trace trace = tracer.finish({});
  int fused_ops = 0;
  for (auto& n : trace.graph.nodes) {
    fused_ops += n.kind == fused;
    for (auto k : unfused) CHECK(n.kind != k);
  }
  CHECK(fused_ops == static_cast<int>(params.size()));
  auto exe = backend::get_backend(backend)->compile(trace.graph, options);
  for (size_t k = 0; k < want.size(); ++k) {
    NoGradGuard ng;
    for (size_t i = 0; i < g.size(); ++i) g[i].copy_(grads[k][i]);
    exe->run({}, trace.states, static_cast<uint64_t>(k));
    INFO(backend << " step " << k + 1);
    CHECK(snapshot(params, opt) == want[k]);
  }
}

void require_close(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  const auto a = got.to_vector<float>(), b = want.to_vector<float>();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("element " << i);
    REQUIRE(a[i] == Approx(b[i]).epsilon(1e-6).margin(1e-7));
  }
}

}  // namespace

TEST_CASE("the fused Adam and AdamW step follows the composite formula it replaced", "[optim]") {
  for (const Config& c :
       {Config{false, false, 0.0}, Config{false, true, 0.0}, Config{false, false, 0.1},
        Config{false, true, 0.1}, Config{true, false, 0.0}, Config{true, true, 0.0},
        Config{true, false, 0.1}, Config{true, true, 0.1}}) {
    DYNAMIC_SECTION(c.name()) {
      Ts fused = make_params(3);
      Ts ref;
      for (auto& p : fused) ref.push_back(p.detach().clone());
      auto opt = make(c, fused);
      // The reference: the elementwise ops optim::Adam and AdamW ran before the fused update.
      std::vector<optim::ParamState> state(ref.size());
      for (size_t i = 0; i < ref.size(); ++i)
        optim::detail::init_adam_state(state[i], ref[i], c.amsgrad);
      const Tensor lr = scalar_tensor(0.01);
      const auto grads = make_grads(6, 9);
      for (size_t k = 0; k < grads.size(); ++k) {
        for (size_t i = 0; i < fused.size(); ++i) fused[i].set_grad(grads[k][i]);
        opt->step();
        NoGradGuard ng;
        for (size_t i = 0; i < ref.size(); ++i) {
          Tensor g = grads[k][i];
          if (c.weight_decay != 0.0 && !c.decoupled) g = add(g, mul(ref[i], c.weight_decay));
          if (c.weight_decay != 0.0 && c.decoupled)
            optim::detail::scale_param(ref[i], add(mul(lr, -c.weight_decay), 1.0));
          optim::detail::adam_update_composite(ref[i], g, state[i], lr, {0.9, 0.99}, 1e-6,
                                               c.amsgrad);
        }
        for (size_t i = 0; i < ref.size(); ++i) {
          const std::string at = "step " + std::to_string(k + 1) + " param " + std::to_string(i);
          require_close(fused[i], ref[i], at);
          const auto& s = opt->state(i);
          REQUIRE(s.size() == state[i].size());
          for (size_t j = 0; j < s.size(); ++j) {
            REQUIRE(s[j].first == state[i][j].first);
            require_close(s[j].second, state[i][j].second, at + " " + s[j].first);
          }
        }
      }
    }
  }
}

TEST_CASE(
    "the fused Adam step gives the same bits eager, traced on cpu and ipu, and on the eager "
    "ipu device",
    "[optim][graph][ipu]") {
  const Config c = GENERATE(Config{true, true, 0.1}, Config{false, false, 0.1});
  INFO(c.name());
  const int steps = 3;
  const auto grads = make_grads(steps, 21);

  Ts eager = make_params(4);
  auto opt_e = make(c, eager);
  std::vector<std::vector<uint32_t>> want;
  for (int k = 0; k < steps; ++k) {
    for (size_t i = 0; i < eager.size(); ++i) eager[i].set_grad(grads[static_cast<size_t>(k)][i]);
    opt_e->step();
    want.push_back(snapshot(eager, *opt_e));
  }

  // The step traced once, with the gradients as state the runs refill.
  auto traced_run = [&](const std::string& backend, const backend::CompileOptions& options) {
    Ts params = make_params(4);
    auto opt = make(c, params);
    check_traced_steps(backend, options, params, *opt, ir::OpKind::AdamUpdate, {ir::OpKind::Sqrt},
                       grads, want);
  };
  SECTION("cpu executor") { traced_run("cpu", {}); }
  SECTION("ipu emulator") { traced_run("ipu", {}); }
  SECTION("ipu emulator, exchange checked") { traced_run("ipu", {{"check_exchange", "1"}}); }
  SECTION("eager ipu device") {
    const Device ipu(kIPU, 0);
    Ts params;
    for (auto& p : make_params(4)) params.push_back(p.detach().to(ipu).requires_grad_());
    auto opt = make(c, params);
    for (int k = 0; k < steps; ++k) {
      for (size_t i = 0; i < params.size(); ++i)
        params[i].set_grad(grads[static_cast<size_t>(k)][i].to(ipu));
      opt->step();
      for (auto& p : params) CHECK(p.device() == ipu);
      INFO("step " << k + 1);
      CHECK(snapshot(params, *opt) == want[static_cast<size_t>(k)]);
    }
  }
}

TEST_CASE("the fused Adam step gives the same bits with 1 and 2 threads", "[optim][determinism]") {
  RestoreThreads restore;
  auto run = [](int threads) {
    set_num_threads(threads);
    Generator g(8);
    Ts p{randn({300001}, &g).requires_grad_(), randn({64, 65}, &g).requires_grad_()};
    optim::AdamW opt(p, optim::AdamWOptions(3e-3).weight_decay(0.05).amsgrad(true));
    for (int k = 0; k < 3; ++k) {
      for (auto& t : p) t.set_grad(randn(t.shape(), &g));
      opt.step();
    }
    return snapshot(p, opt);
  };
  const auto one = run(1);
  const auto two = run(2);
  CHECK(one == two);
}

TEST_CASE("a half parameter without master weights still takes the composite Adam step",
          "[optim][half]") {
  Tensor p = randn({40}).to(kFloat16).requires_grad_();
  Tensor ref = p.detach().to(kFloat32);
  optim::AdamW opt({p}, optim::AdamWOptions(0.01).weight_decay(0.1));
  p.set_grad(full({40}, 0.5, kFloat16));
  opt.step();
  CHECK(p.dtype() == kFloat16);
  // One step moves each weight by about lr (the bias-corrected m / sqrt(v) is 1) after the decay.
  const auto a = p.to(kFloat32).to_vector<float>(), b = ref.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(a[i] == Approx(b[i] * (1 - 0.001) - 0.01).margin(5e-3));
}

TEST_CASE("adam_update_ checks its operands", "[optim][errors]") {
  NoGradGuard ng;
  Tensor p = zeros({4}), m = zeros({4}), v = zeros({4}), none;
  const Tensor lr = scalar_tensor(0.1), step = scalar_tensor(1.0);
  Tensor m3 = zeros({3});
  CHECK_THROWS_WITH(adam_update_(p, m3, v, none, ones({4}), lr, step, {}),
                    Catch::Contains("AdamUpdate") && Catch::Contains("exp_avg has shape [3]"));
  CHECK_THROWS_WITH(adam_update_(p, m, v, none, ones({4}, kInt32), lr, step, {}),
                    Catch::Contains("float32 grad"));
  CHECK_THROWS_WITH(adam_update_(p, m, v, none, ones({4}), ones({2}), step, {}),
                    Catch::Contains("lr as a one-element float32 tensor"));
  AdamUpdateOptions bad;
  bad.beta2 = 1.0;
  CHECK_THROWS_WITH(adam_update_(p, m, v, none, ones({4}), lr, step, bad),
                    Catch::Contains("must be in [0, 1)"));
  Tensor w = zeros({4}).requires_grad_();
  {
    autograd::GradModeGuard on(true);
    CHECK_THROWS_WITH(adam_update_(w, m, v, none, ones({4}), lr, step, {}),
                      Catch::Contains("NoGradGuard"));
  }
  // A correct call: one step from zero moments moves each weight by -lr (sign of the gradient).
  adam_update_(p, m, v, none, ones({4}), lr, step, {});
  for (float x : p.to_vector<float>()) CHECK(x == Approx(-0.1).epsilon(1e-6));
}

TEST_CASE("the vectorised sqrt and rsqrt kernels give std::sqrt's bits", "[cpu][determinism]") {
  RestoreThreads restore;
  std::vector<float> x;
  Generator g(2);
  for (float v : mul(abs(randn({20011}, &g)), 100.0).to_vector<float>()) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1.0f, 2.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::max()})
    x.push_back(v);
  const Tensor t = from_vector(x, {static_cast<int64_t>(x.size())});
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const auto s = sqrt(t).to_vector<float>();
    const auto r = rsqrt(t).to_vector<float>();
    const auto p = pow(t, 0.5).to_vector<float>();
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("x = " << x[i] << ", " << threads << " threads");
      const float want = std::sqrt(x[i]);
      CHECK(std::memcmp(&s[i], &want, 4) == 0);
      CHECK(std::memcmp(&p[i], &want, 4) == 0);
      const float rwant = 1.0f / want;
      CHECK(std::memcmp(&r[i], &rwant, 4) == 0);
    }
  }
  CHECK(std::isnan(sqrt(full({5}, -1.0)).to_vector<float>()[4]));
}

// ---- the fused SGD update (sgd_update_, ir::OpKind::SgdUpdate) ------------------------------

namespace {

struct SgdConfig {
  double momentum, dampening, weight_decay;
  bool nesterov;
  std::string name() const {
    return "momentum=" + std::to_string(momentum) + " dampening=" + std::to_string(dampening) +
           " wd=" + std::to_string(weight_decay) + (nesterov ? " nesterov" : "");
  }
  optim::SGDOptions options(double lr = 0.05) const {
    return optim::SGDOptions(lr)
        .momentum(momentum)
        .dampening(dampening)
        .weight_decay(weight_decay)
        .nesterov(nesterov);
  }
};

const std::vector<SgdConfig>& sgd_configs() {
  static const std::vector<SgdConfig> c{{0.0, 0.0, 0.0, false},  {0.0, 0.0, 0.01, false},
                                        {0.9, 0.0, 0.0, false},  {0.9, 0.0, 0.01, false},
                                        {0.9, 0.0, 0.01, true},  {0.8, 0.3, 0.0, false},
                                        {0.8, 0.3, 0.05, false}, {0.5, 1.0, 0.0, false}};
  return c;
}

std::vector<uint32_t> bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return {b};
}

}  // namespace

TEST_CASE("the fused SGD step gives the composite formula's bits", "[optim]") {
  for (const SgdConfig& c : sgd_configs()) {
    DYNAMIC_SECTION(c.name()) {
      Ts fused = make_params(5);
      Ts ref;
      for (auto& p : fused) ref.push_back(p.detach().clone());
      optim::SGD opt(fused, c.options());
      // The reference: the elementwise ops optim::SGD ran before the fused update, on state
      // created as init_state creates it (a zero buffer, a zero step count).
      std::vector<Tensor> buf(ref.size()), count(ref.size());
      for (size_t i = 0; i < ref.size(); ++i) {
        if (c.momentum != 0.0) buf[i] = zeros(ref[i].shape());
        if (c.momentum != 0.0 && c.dampening != 0.0) count[i] = zeros({});
      }
      const Tensor lr = scalar_tensor(0.05);
      const auto grads = make_grads(5, 13);
      for (size_t k = 0; k < grads.size(); ++k) {
        for (size_t i = 0; i < fused.size(); ++i) fused[i].set_grad(grads[k][i]);
        opt.step();
        NoGradGuard ng;
        for (size_t i = 0; i < ref.size(); ++i)
          optim::detail::sgd_update_composite(ref[i], grads[k][i], buf[i], count[i], lr,
                                              c.options());
        for (size_t i = 0; i < ref.size(); ++i) {
          INFO("step " << k + 1 << " param " << i);
          CHECK(bits(fused[i]) == bits(ref[i]));
          const auto& s = opt.state(i);
          REQUIRE(s.size() == (c.momentum == 0.0 ? 0u : c.dampening == 0.0 ? 1u : 2u));
          if (c.momentum != 0.0) {
            CHECK(s[0].first == "momentum_buffer");
            CHECK(bits(s[0].second) == bits(buf[i]));
          }
          if (s.size() == 2) {
            CHECK(s[1].first == "step");
            CHECK(bits(s[1].second) == bits(count[i]));
          }
        }
      }
    }
  }
}

TEST_CASE("the fused SGD step follows torch.optim.SGD computed element by element", "[optim]") {
  // An independent scalar loop with torch's single-tensor rule and its lazily created buffer
  // (None before the first step, then the gradient itself), each operation rounded to float32.
  for (const SgdConfig& c : sgd_configs()) {
    DYNAMIC_SECTION(c.name()) {
      Generator gen(17);
      Tensor p = randn({1000}, &gen).requires_grad_();
      std::vector<float> ref = p.to_vector<float>(), buf;
      optim::SGD opt({p}, c.options(0.03));
      const float lr = 0.03f, mom = static_cast<float>(c.momentum),
                  damp1 = static_cast<float>(1.0 - c.dampening),
                  wd = static_cast<float>(c.weight_decay);
      for (int k = 0; k < 4; ++k) {
        const Tensor g = mul(randn({1000}, &gen), 0.5);
        p.set_grad(g);
        opt.step();
        const auto gv = g.to_vector<float>();
        const bool first = buf.empty();
        if (first && c.momentum != 0.0) buf.resize(gv.size());
        for (size_t i = 0; i < gv.size(); ++i) {
          volatile float d = gv[i];  // volatile: no contraction into fused multiply-adds
          if (c.weight_decay != 0.0) d = d + static_cast<float>(ref[i] * wd);
          if (c.momentum != 0.0) {
            if (first) {
              buf[i] = d;
            } else {
              const float a = buf[i] * mom, b = d * damp1;
              buf[i] = a + b;
            }
            if (c.nesterov) {
              const float m = buf[i] * mom;
              d = d + m;
            } else {
              d = buf[i];
            }
          }
          const float step = d * -lr;
          ref[i] = ref[i] + step;
        }
        const auto got = p.to_vector<float>();
        for (size_t i = 0; i < got.size(); ++i) {
          INFO("step " << k + 1 << " element " << i << ": " << got[i] << " vs " << ref[i]);
          REQUIRE(bits_of(got[i]) == bits_of(ref[i]));
        }
      }
    }
  }
}

TEST_CASE("the fused SGD step matches hand-computed numbers", "[optim]") {
  // p = 1, g = 0.5, lr = 0.1, momentum 0.9: buf = 0.5, p = 0.95; then buf = 0.95, p = 0.855.
  Tensor p = full({3}, 1.0).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9));
  p.set_grad(full({3}, 0.5));
  opt.step();
  for (float x : p.to_vector<float>()) CHECK(x == Approx(0.95).epsilon(1e-6));
  opt.step();
  for (float x : p.to_vector<float>()) CHECK(x == Approx(0.855).epsilon(1e-6));
  // Dampening 0.5: the first buffer is the whole gradient (torch's lazy buffer), then
  // 0.9 * 0.5 + 0.5 * 0.5 = 0.7.
  Tensor q = full({3}, 1.0).requires_grad_();
  optim::SGD opt2({q}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.5));
  q.set_grad(full({3}, 0.5));
  opt2.step();
  for (float x : q.to_vector<float>()) CHECK(x == Approx(0.95).epsilon(1e-6));
  opt2.step();
  for (float x : q.to_vector<float>()) CHECK(x == Approx(0.88).epsilon(1e-6));
  for (float x : opt2.state(0)[0].second.to_vector<float>()) CHECK(x == Approx(0.7).epsilon(1e-6));
}

TEST_CASE(
    "the fused SGD step gives the same bits eager, traced on cpu and ipu, and on the eager ipu "
    "device",
    "[optim][graph][ipu]") {
  const SgdConfig c = GENERATE(SgdConfig{0.9, 0.0, 0.01, true}, SgdConfig{0.8, 0.3, 0.05, false},
                               SgdConfig{0.0, 0.0, 0.01, false});
  INFO(c.name());
  const int steps = 3;
  const auto grads = make_grads(steps, 23);

  Ts eager = make_params(6);
  optim::SGD opt_e(eager, c.options());
  std::vector<std::vector<uint32_t>> want;
  for (int k = 0; k < steps; ++k) {
    for (size_t i = 0; i < eager.size(); ++i) eager[i].set_grad(grads[static_cast<size_t>(k)][i]);
    opt_e.step();
    want.push_back(snapshot(eager, opt_e));
  }

  auto traced_run = [&](const std::string& backend, const backend::CompileOptions& options) {
    Ts params = make_params(6);
    optim::SGD opt(params, c.options());
    check_traced_steps(backend, options, params, opt, ir::OpKind::SgdUpdate,
                       {ir::OpKind::Mul, ir::OpKind::Where}, grads, want);
  };
  SECTION("cpu executor") { traced_run("cpu", {}); }
  SECTION("ipu emulator") { traced_run("ipu", {}); }
  SECTION("ipu emulator, exchange checked") { traced_run("ipu", {{"check_exchange", "1"}}); }
  SECTION("eager ipu device") {
    const Device ipu(kIPU, 0);
    Ts params;
    for (auto& p : make_params(6)) params.push_back(p.detach().to(ipu).requires_grad_());
    optim::SGD opt(params, c.options());
    for (int k = 0; k < steps; ++k) {
      for (size_t i = 0; i < params.size(); ++i)
        params[i].set_grad(grads[static_cast<size_t>(k)][i].to(ipu));
      opt.step();
      for (auto& p : params) CHECK(p.device() == ipu);
      INFO("step " << k + 1);
      CHECK(snapshot(params, opt) == want[static_cast<size_t>(k)]);
    }
  }
}

TEST_CASE("the fused SGD step gives the same bits with 1 and 2 threads", "[optim][determinism]") {
  RestoreThreads restore;
  auto run = [](int threads, const SgdConfig& c) {
    set_num_threads(threads);
    Generator g(8);
    Ts p{randn({300001}, &g).requires_grad_(), randn({64, 65}, &g).requires_grad_()};
    optim::SGD opt(p, c.options(0.01));
    for (int k = 0; k < 3; ++k) {
      for (auto& t : p) t.set_grad(randn(t.shape(), &g));
      opt.step();
    }
    return snapshot(p, opt);
  };
  for (const SgdConfig& c : {SgdConfig{0.9, 0.0, 1e-4, true}, SgdConfig{0.9, 0.1, 1e-4, false}}) {
    INFO(c.name());
    CHECK(run(1, c) == run(2, c));
  }
}

TEST_CASE("a half parameter without master weights still takes the composite SGD step",
          "[optim][half]") {
  Tensor p = full({40}, 1.0, kFloat16).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.1));
  p.set_grad(full({40}, 0.5, kFloat16));
  opt.step();
  CHECK(p.dtype() == kFloat16);
  // g = 0.5 + 0.1 * 1 = 0.6; p = 1 - 0.06.
  for (float x : p.to_vector<float>()) CHECK(x == Approx(0.94).margin(1e-3));
}

TEST_CASE("sgd_update_ checks its operands", "[optim][errors]") {
  NoGradGuard ng;
  Tensor p = zeros({4}), buf = zeros({4}), none;
  const Tensor lr = scalar_tensor(0.1), step = scalar_tensor(1.0);
  SgdUpdateOptions mom;
  mom.momentum = 0.9;
  Tensor b3 = zeros({3});
  CHECK_THROWS_WITH(
      sgd_update_(p, b3, ones({4}), lr, none, mom),
      Catch::Contains("SgdUpdate") && Catch::Contains("momentum_buffer has shape [3]"));
  CHECK_THROWS_WITH(sgd_update_(p, buf, ones({4}, kInt32), lr, none, mom),
                    Catch::Contains("float32 grad"));
  CHECK_THROWS_WITH(sgd_update_(p, buf, ones({4}), ones({2}), none, mom),
                    Catch::Contains("lr as a one-element float32 tensor"));
  CHECK_THROWS_WITH(sgd_update_(p, none, ones({4}), lr, none, mom),
                    Catch::Contains("exactly when momentum != 0"));
  CHECK_THROWS_WITH(sgd_update_(p, none, ones({4}), lr, step, {}), Catch::Contains("buffer mode"));
  SgdUpdateOptions bad = mom;
  bad.nesterov = true;
  bad.dampening = 0.5;
  CHECK_THROWS_WITH(sgd_update_(p, buf, ones({4}), lr, none, bad),
                    Catch::Contains("nesterov momentum requires"));
  Tensor w = zeros({4}).requires_grad_();
  {
    autograd::GradModeGuard on(true);
    CHECK_THROWS_WITH(sgd_update_(w, none, ones({4}), lr, none, {}),
                      Catch::Contains("NoGradGuard"));
  }
  // Correct calls: plain SGD moves each weight by -lr * g; with a step of 1 the buffer becomes
  // the gradient whatever it held.
  sgd_update_(p, none, full({4}, 2.0), lr, none, {});
  for (float x : p.to_vector<float>()) CHECK(x == Approx(-0.2).epsilon(1e-6));
  Tensor junk = full({4}, 7.0);
  SgdUpdateOptions damp = mom;
  damp.dampening = 0.5;
  sgd_update_(p, junk, ones({4}), lr, step, damp);
  for (float x : junk.to_vector<float>()) CHECK(x == 1.0f);
}
