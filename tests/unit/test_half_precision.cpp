// float16/bfloat16 compute: every op family on half operands gives the float32 result rounded
// once to nearest even (the arithmetic of an IPU vertex with float accumulators), documented
// end-to-end tolerances against float32, Module::to, master weights, static and dynamic loss
// scaling, the IPU's stochastic rounding (unbiased, deterministic) and the fp16 cycle model.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>
#include <functional>

#include <catch2/catch.hpp>

#include <ipuml/backends/cpu/kernels_half.hpp>
#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/nn/nn.hpp>
#include <ipuml/optim/optim.hpp>
#include <ipuml/runtime/training_model.hpp>

#include "../support/ipu_options.hpp"

using namespace ipuml;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs `f` on half copies of `inputs` and on their float32 values, and requires the half result
// to be exactly the float32 result rounded to `dt`.
void require_rounded_once(DType dt, const std::vector<Tensor>& inputs, const Fn& f,
                          const char* what) {
  std::vector<Tensor> h, w;
  for (auto& t : inputs) {
    h.push_back(is_floating(t.dtype()) ? t.to(dt) : t);
    w.push_back(is_floating(t.dtype()) ? h.back().to(kFloat32) : t);
  }
  const Tensor rh = f(h);
  const Tensor rw = f(w);
  INFO(what << " in " << dtype_name(dt));
  REQUIRE(rh.dtype() == dt);
  const auto a = rh.to(kFloat32).to_vector<float>();
  const auto b = rw.to(dt).to(kFloat32).to_vector<float>();
  REQUIRE(a.size() == b.size());
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i)
    bad += !(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])));
  REQUIRE(bad == 0);
}

struct TinyNetImpl : nn::Module {
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  nn::Linear fc{nullptr};
  TinyNetImpl() : nn::Module("TinyNet") {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(2, 4, 3).padding(1)));
    bn = register_module("bn", nn::BatchNorm2d(nn::BatchNormOptions(4)));
    fc = register_module("fc", nn::Linear(nn::LinearOptions(4 * 4 * 4, 3)));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = max_pool2d(relu(bn(conv(x))), {2, 2});
    return fc(y.reshape({x.size(0), -1}));
  }
};
IPUML_MODULE(TinyNet);

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

}  // namespace

TEST_CASE("every op family on half operands is the float32 result rounded once", "[half]") {
  Generator g(5);
  const Tensor a = randn({3, 5, 7}, &g);
  const Tensor b = randn({3, 5, 7}, &g);
  const Tensor pos = add(abs(a), 0.1);
  const Tensor m1 = randn({4, 33}, &g), m2 = randn({33, 6}, &g);
  const Tensor img = randn({2, 3, 9, 9}, &g), w = randn({5, 3, 3, 3}, &g);
  const Tensor idx = randint(0, 5, {4}, &g);
  for (DType dt : {kFloat16, kBFloat16}) {
    auto one = [&](const char* what, const std::vector<Tensor>& in, const Fn& f) {
      require_rounded_once(dt, in, f, what);
    };
    // One op each: a chain of ops rounds every intermediate result.
    one("tanh", {a}, [](auto& x) { return tanh(x[0]); });
    one("sigmoid", {a}, [](auto& x) { return sigmoid(x[0]); });
    one("gelu", {a}, [](auto& x) { return gelu(x[0]); });
    one("exp", {a}, [](auto& x) { return exp(x[0]); });
    one("log", {pos}, [](auto& x) { return log(x[0]); });
    one("rsqrt", {pos}, [](auto& x) { return rsqrt(x[0]); });
    one("div", {a, pos}, [](auto& x) { return div(x[0], x[1]); });
    one("broadcast mul", {a, b}, [](auto& x) { return mul(x[0], slice(x[1], 2, 0, 1)); });
    one("sum", {a}, [](auto& x) { return sum(x[0], {1}); });
    one("mean", {a}, [](auto& x) { return mean(x[0], {0, 2}); });
    one("softmax", {a}, [](auto& x) { return softmax(x[0], 2); });
    one("log_softmax", {a}, [](auto& x) { return log_softmax(x[0], 1); });
    one("amax", {a}, [](auto& x) { return amax(x[0], {2}); });
    one("matmul", {m1, m2}, [](auto& x) { return matmul(x[0], x[1]); });
    one("conv", {img, w}, [](auto& x) { return conv2d(x[0], x[1], Tensor(), {2, 1}, {1, 1}); });
    one("max_pool", {img}, [](auto& x) { return max_pool2d(x[0], {2, 2}); });
    one("avg_pool", {img}, [](auto& x) { return avg_pool2d(x[0], {3, 3}); });
    one("index_select", {m1, idx}, [](auto& x) { return index_select(x[0], 1, x[1]); });
  }
}

TEST_CASE("the CPU's F16C conversions give the portable conversions' bits", "[half]") {
  if (!cpu::kdetail::f16c_enabled()) return;  // nothing to compare on this CPU
  // Every half value widened, NaNs compared as NaNs.
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(all.size());
  cpu::kdetail::widen_f16c(all.data(), wide.data(), static_cast<int64_t>(all.size()));
  size_t bad = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const float want = half_bits_to_float(all[i]);
    bad += std::isnan(want) ? !std::isnan(wide[i])
                            : std::bit_cast<uint32_t>(wide[i]) != std::bit_cast<uint32_t>(want);
  }
  CHECK(bad == 0);
  // Floats narrowed: every half value, the midpoints between neighbours (ties to even), the
  // subnormal and overflow edges, and random values over the whole range.
  std::vector<float> f;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float v = half_bits_to_float(static_cast<uint16_t>(h));
    const float next = half_bits_to_float(static_cast<uint16_t>(h + 1));
    f.insert(f.end(), {v, -v, (v + next) / 2, -(v + next) / 2, std::nextafter(v, next)});
  }
  f.insert(f.end(),
           {65504.f, 65520.f, 65519.99f, 1e9f, -1e9f, 1e-9f, 6.1e-5f, 5.9e-8f, 2.9e-8f, 3.0e-8f,
            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
  Generator g(11);
  for (float v : mul(randn({4096}, &g), 1000.0).to_vector<float>()) f.push_back(v);
  std::vector<uint16_t> narrow(f.size());
  cpu::kdetail::narrow_f16c(f.data(), narrow.data(), static_cast<int64_t>(f.size()));
  bad = 0;
  for (size_t i = 0; i < f.size(); ++i) bad += narrow[i] != float_to_half_bits(f[i]);
  CHECK(bad == 0);
}

TEST_CASE("16-bit mean var and batch norm hold where the sum is past the type's range", "[half]") {
  // ResNet-50's stem at micro-batch 18: 18 x 112 x 112 = 225 792 values a channel. Their sum
  // (about 335 000 here) and sum of squares are past fp16's 65504; mean and variance are not.
  // Both sum in float32, as PyTorch's do: the mean is float32's rounded once; the variance
  // squares 16-bit deviations, so it is within a few of the type's steps of float32's.
  Generator g(9);
  const Tensor x = add(mul(randn({18, 2, 112, 112}, &g), 0.5), 1.5);
  const std::vector<int64_t> dims{0, 2, 3};
  for (DType dt : {kFloat16, kBFloat16}) {
    INFO(dtype_name(dt));
    const Tensor h = x.to(dt);
    const Tensor wt = h.to(kFloat32);
    const auto m16 = mean(h, dims).to(kFloat32).to_vector<float>();
    const auto m32 = mean(wt, dims).to(dt).to(kFloat32).to_vector<float>();
    const auto v16 = var(h, dims, 0).to(kFloat32).to_vector<float>();
    const auto v32 = var(wt, dims, 0).to_vector<float>();
    const double step = dt == kFloat16 ? 1.0 / 1024 : 1.0 / 128;  // relative spacing near 1
    for (size_t c = 0; c < 2; ++c) {
      CHECK(m16[c] == Approx(m32[c]).epsilon(step));
      CHECK(v16[c] == Approx(v32[c]).epsilon(4 * step));
    }
    for (float m : mean(h, dims).to(kFloat32).to_vector<float>())
      CHECK(m == Approx(1.5).margin(0.01));
    for (float v : var(h, dims, 0).to(kFloat32).to_vector<float>())
      CHECK(v == Approx(0.25).margin(0.01));
  }
  // A batch norm in training mode normalises them: finite, mean about 0, variance about 1.
  nn::BatchNorm2d bn(nn::BatchNormOptions(2));
  bn->to(kFloat16);
  bn->train();
  const Tensor y = bn(x.to(kFloat16)).to(kFloat32);
  const auto ys = y.to_vector<float>();
  size_t finite = 0;
  for (float v : ys) finite += std::isfinite(v);
  CHECK(finite == ys.size());
  for (float m : mean(y, dims).to_vector<float>()) CHECK(m == Approx(0).margin(0.01));
  for (float v : var(y, dims, 0).to_vector<float>()) CHECK(v == Approx(1).margin(0.01));
}

TEST_CASE("gradients of half ops are the float32 gradients rounded once", "[half]") {
  Generator g(6);
  const Tensor x = randn({4, 8}, &g), wt = randn({8, 3}, &g);
  for (DType dt : {kFloat16, kBFloat16}) {
    Tensor xh = x.to(dt).requires_grad_(true), wh = wt.to(dt).requires_grad_(true);
    Tensor xf = xh.detach().to(kFloat32).requires_grad_(true);
    Tensor wf = wh.detach().to(kFloat32).requires_grad_(true);
    sum(relu(matmul(xh, wh))).backward();
    sum(relu(matmul(xf, wf))).backward();
    REQUIRE(xh.grad().dtype() == dt);
    // The forward rounds relu(xw) before the sum, but its gradient mask is exact, and dL/dx
    // = mask @ w^T is one more product rounded once.
    const auto gh = xh.grad().to(kFloat32).to_vector<float>();
    const auto gf = xf.grad().to(dt).to(kFloat32).to_vector<float>();
    REQUIRE(gh == gf);
  }
}

TEST_CASE("half results against float32 stay within the documented tolerances", "[half]") {
  // docs/precision.md: inputs rounded to half, then each op rounded once. A 64-term matmul
  // and a small network's forward are compared with the float32 computation on the original
  // float32 inputs.
  Generator g(7);
  const Tensor x = randn({16, 64}, &g), w = randn({64, 32}, &g);
  const Tensor ref = matmul(x, w);
  const double scale = amax(abs(ref)).item<float>();
  for (auto [dt, tol] : {std::pair{kFloat16, 4e-3}, std::pair{kBFloat16, 3e-2}}) {
    const Tensor r = matmul(x.to(dt), w.to(dt)).to(kFloat32);
    const double err = amax(abs(sub(r, ref))).item<float>() / scale;
    INFO(dtype_name(dt) << " matmul: max error " << err << " of the largest output");
    REQUIRE(err < tol);
  }
  manual_seed(11);
  TinyNet net;
  net->eval();
  const Tensor img = randn({4, 2, 8, 8}, &g);
  const Tensor r32 = net->forward(img);
  net->to(kFloat16);
  const Tensor r16 = net->forward(img.to(kFloat16)).to(kFloat32);
  const double err = amax(abs(sub(r16, r32))).item<float>() / amax(abs(r32)).item<float>();
  INFO("network forward, float16: " << err);
  REQUIRE(err < 1e-2);
}

TEST_CASE("Module::to converts floating parameters and buffers in place", "[half]") {
  manual_seed(2);
  TinyNet net;
  const Tensor w_before = net->conv->weight;
  const auto w32 = w_before.to_vector<float>();
  net->half();
  const auto params = net->parameters();
  REQUIRE(params[0].same(w_before));  // the same handle: modules keep their members
  for (auto& p : params) {
    REQUIRE(p.dtype() == kFloat16);
    REQUIRE(p.requires_grad());
  }
  for (auto& [name, b] : net->named_buffers())
    REQUIRE(b.dtype() ==
            (name.find("num_batches_tracked") != std::string::npos ? kInt64 : kFloat16));
  const auto w16 = net->conv->weight.to(kFloat32).to_vector<float>();
  for (size_t i = 0; i < w32.size(); ++i)
    REQUIRE(w16[i] == half_bits_to_float(float_to_half_bits(w32[i])));
  net->to(kBFloat16);
  REQUIRE(net->fc->weight.dtype() == kBFloat16);
  net->float32();
  REQUIRE(net->fc->weight.dtype() == kFloat32);
  REQUIRE_THROWS_WITH(net->to(kInt32), Catch::Contains("expected a floating-point dtype"));
  // Mixed dtypes in one op are an error that says what to do.
  REQUIRE_THROWS_WITH(matmul(ones({2, 2}), ones({2, 2}, kFloat16)),
                      Catch::Contains("convert one with .to()"));
}

TEST_CASE("stochastic rounding is unbiased, deterministic and picks a neighbour", "[half]") {
  // 1 + 1/3 ulp in float16 (ulp 2^-10 at 1) and bfloat16 (ulp 2^-7).
  const float xh = 1.0f + (1.0f / 3.0f) * 0.0009765625f;
  const float xb = 1.0f + (1.0f / 3.0f) * 0.0078125f;
  const RandomStream rs{42, 7};
  double sum_h = 0, sum_b = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const uint32_t r = rs.words(static_cast<uint64_t>(i))[0];
    const uint16_t h = float_to_half_bits_stochastic(xh, r);
    const uint16_t b = float_to_bf16_bits_stochastic(xb, r);
    REQUIRE((h == 0x3c00 || h == 0x3c01));
    REQUIRE((b == 0x3f80 || b == 0x3f81));
    sum_h += half_bits_to_float(h);
    sum_b += bf16_bits_to_float(b);
  }
  // Standard error of the mean: ulp * sqrt(p(1-p)/n) ~ 1e-6 (fp16), 8e-6 (bf16).
  REQUIRE(sum_h / n == Approx(xh).margin(6e-6));
  REQUIRE(sum_b / n == Approx(xb).margin(5e-5));
  // Exact values, infinities, NaN and subnormals.
  REQUIRE(float_to_half_bits_stochastic(0.5f, 0xffffffffu) == float_to_half_bits(0.5f));
  REQUIRE(float_to_half_bits_stochastic(INFINITY, 0) == 0x7c00);
  // -1e-7 is 1.68 subnormal ulps: away from zero when r < 0.68 x 2^32, else toward zero.
  REQUIRE(float_to_half_bits_stochastic(-1e-7f, 0) == 0x8002);
  REQUIRE(float_to_half_bits_stochastic(-1e-7f, 0xffffffffu) == 0x8001);
  // Above the largest finite half (65504) the next value up is infinity, as for RNE.
  REQUIRE(float_to_half_bits_stochastic(65519.0f, 0xffffffffu) == 0x7bff);
  REQUIRE(float_to_half_bits_stochastic(65519.0f, 0) == 0x7c00);
  REQUIRE(std::isnan(bf16_bits_to_float(float_to_bf16_bits_stochastic(NAN, 0))));
}

TEST_CASE("the emulated IPU rounds half results stochastically, same bits for any thread count",
          "[half][ipu]") {
  // A weight update too small for round-to-nearest: 1 - 1e-4 rounds back to 1 in float16.
  auto run = [](bool sr, int threads, uint64_t seed) {
    set_num_threads(threads);
    ir::Tracer tr;
    Tensor w = tr.input({{4096}, kFloat16}, "w");
    Tensor out = sub(w, full({4096}, 1e-4, kFloat16));
    auto trace = tr.finish({out});
    auto o = testing::quiet();
    o.stochastic_rounding = sr;
    o.rounding_seed = seed;
    auto exe = ipu::compile(trace.graph, ipu::target_preset("ipu2"), o);
    Tensor cur = ones({4096}, kFloat16);
    for (int i = 0; i < 20; ++i) cur = exe->run({cur}, {})[0];
    set_num_threads(0);
    return cur;
  };
  const Tensor rne = run(false, 2, 1);
  REQUIRE(amin(rne.to(kFloat32)).item<float>() == 1.0f);  // every update lost
  const Tensor a = run(true, 1, 1), b = run(true, 2, 1), c = run(true, 2, 2);
  REQUIRE(a.to_vector<float>() == b.to_vector<float>());
  REQUIRE(a.to_vector<float>() != c.to_vector<float>());
  // 20 steps of 1e-4: the mean moves by 2e-3 (standard error about 1e-5 over 4096 elements).
  REQUIRE(mean(a.to(kFloat32)).item<float>() == Approx(1.0 - 20 * 1e-4).margin(1e-4));
}

TEST_CASE("master weights keep updates that half weights lose", "[half]") {
  auto train = [](bool master) {
    Tensor p = ones({64}, kFloat16).requires_grad_(true);
    optim::SGD opt({p}, optim::SGDOptions(1e-4));
    if (master) opt.keep_master_weights();
    for (int i = 0; i < 50; ++i) {
      opt.zero_grad();
      sum(p).backward();  // gradient 1 everywhere
      opt.step();
    }
    return std::pair{p, master ? opt.state(0).back().second : Tensor()};
  };
  auto [plain, none] = train(false);
  REQUIRE(amax(plain.to(kFloat32)).item<float>() == 1.0f);
  auto [p, m] = train(true);
  REQUIRE(m.dtype() == kFloat32);
  REQUIRE(m.to_vector<float>()[0] == Approx(1.0 - 50 * 1e-4).epsilon(1e-6));
  // The half weight is the master rounded to nearest.
  const float expect = half_bits_to_float(float_to_half_bits(m.to_vector<float>()[0]));
  REQUIRE(p.to(kFloat32).to_vector<float>()[0] == expect);
  REQUIRE(expect < 1.0f);
}

TEST_CASE("optimizer loss scaling by a power of two leaves a float32 run bit-identical",
          "[half][runtime]") {
  Generator g(4);
  const Tensor x = randn({8, 2, 8, 8}, &g);
  const Tensor y = randint(0, 3, {8}, &g);
  auto train = [&](double scaling) {
    manual_seed(1);
    TinyNet net;
    optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    opt.set_loss_scaling(scaling);
    auto t = trainingModel(net.ptr(), runtime::Options().useIpuModel(false), opt, ce());
    for (int i = 0; i < 3; ++i) t(x, y);
    return net->parameters();
  };
  const auto a = train(1.0), b = train(1024.0);
  for (size_t i = 0; i < a.size(); ++i) REQUIRE(a[i].to_vector<float>() == b[i].to_vector<float>());
  optim::SGD o({ones({1}).requires_grad_(true)}, optim::SGDOptions(0.1));
  REQUIRE_THROWS_WITH(o.set_loss_scaling(0.0), Catch::Contains("loss_scaling"));
}

TEST_CASE("a float16 network trains on the emulated IPU with loss scaling and master weights",
          "[half][ipu]") {
  Generator g(8);
  const Tensor x = randn({16, 2, 8, 8}, &g);
  const Tensor y = randint(0, 3, {16}, &g);
  manual_seed(3);
  TinyNet net;
  net->half();
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  opt.keep_master_weights();
  opt.set_loss_scaling(128);
  runtime::Options o;
  o.showCompilationProgressBar(false).randomSeed(5);
  o.Precision.setPartialsType(kFloat16).enableStochasticRounding(true);
  auto t = trainingModel(net.ptr(), o, opt, ce());
  const Tensor xh = x.to(kFloat16);
  const float first = t(xh, y).to(kFloat32).item<float>();
  float last = first;
  for (int i = 0; i < 30; ++i) last = t(xh, y).to(kFloat32).item<float>();
  INFO("loss " << first << " -> " << last);
  REQUIRE(std::isfinite(last));
  REQUIRE(last < 0.5f * first);
  REQUIRE(net->fc->weight.dtype() == kFloat16);
}

TEST_CASE("dynamic loss scaling backs off on overflow and grows after clean steps", "[half]") {
  Tensor p = ones({4}, kFloat16).requires_grad_(true);
  optim::SGD opt({p}, optim::SGDOptions(0.01));
  auto scaler = optim::LossScaler::dynamic(65536.0, 2.0, 0.5, 3);
  auto step = [&](double value) {
    opt.zero_grad();
    scaler.scale(mul(sum(p), value)).backward();
    return scaler.step(opt);
  };
  // 65536 * 4 overflows float16 in the gradient: skipped, the scale halves, p untouched.
  REQUIRE_FALSE(step(4.0));
  REQUIRE(scaler.scale_value() == 32768.0);
  REQUIRE(p.to(kFloat32).to_vector<float>()[0] == 1.0f);
  REQUIRE_FALSE(step(4.0));
  REQUIRE(step(1.0));  // 16384 fits
  REQUIRE(step(1.0));
  REQUIRE(scaler.scale_value() == 16384.0);
  REQUIRE(step(1.0));  // the third clean step in a row doubles the scale
  REQUIRE(scaler.scale_value() == 32768.0);
  REQUIRE(scaler.skipped_steps() == 2);
  // The update used the unscaled gradient: 3 steps of lr 0.01 x 1.
  REQUIRE(p.to(kFloat32).to_vector<float>()[0] == Approx(0.97).margin(1e-3));
}

TEST_CASE("half matrix ops run at the fp16 rate and hold half the bytes", "[half][ipu]") {
  const auto t = ipu::target_preset("ipu2");
  auto plan = [&](DType dt) {
    ir::Tracer tr;
    Tensor a = tr.input({{2048, 2048}, dt}, "a");
    Tensor b = tr.input({{2048, 2048}, dt}, "b");
    auto trace = tr.finish({matmul(a, b)});
    return ipu::plan_graph(trace.graph, t, testing::quiet());
  };
  const auto p32 = plan(kFloat32), p16 = plan(kFloat16);
  auto seconds = [&](const ipu::Plan& p) {
    const auto& np = p.nodes[0];
    return (np.compute_cycles + np.exchange_cycles + np.sync_cycles) / t.clock_hz;
  };
  const double flops = 2.0 * 2048.0 * 2048.0 * 2048.0;
  INFO("fp16 2048^3: " << flops / seconds(p16) / 1e12 << " TFLOP/s, fp32 "
                       << flops / seconds(p32) / 1e12);
  CHECK(flops / seconds(p16) >= 0.4 * 250e12);  // GC200: 250 TFLOP/s fp16.16
  CHECK(flops / seconds(p16) <= 250e12);
  CHECK(p32.nodes[0].compute_cycles > 3.0 * p16.nodes[0].compute_cycles);
  auto state = [](const ipu::Plan& p) {
    int64_t s = 0;
    for (auto& tile : p.memory.units) s += tile.bytes[ipu::kState];
    return s;
  };
  CHECK(state(p16) * 2 == state(p32));  // the operands' bytes on the tiles
}
