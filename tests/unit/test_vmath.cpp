// vmath (backends/cpu/vmath.hpp): exp, tanh and erf of float arrays on AVX-512, AVX2 and the
// generic path give the bits of xsimd::exp / tanh / erf on the baseline xsimd::batch<float>, for
// a strided sweep of all 2^32 inputs, the special values and the ranges around the algorithms'
// switch points, at every length and alignment; and the ops rewired onto it (exp, tanh,
// sigmoid, gelu and its gradient in both modes, softmax, log_softmax and its fused gradient) give
// the bits of their former one-expression xsimd form on every ISA. (Attention's softmax rows use
// vmath::exp too, but its products run on the GEMM, whose last bits differ between ISAs.)
#include <catch2/catch.hpp>

#include <ipuml/backends/cpu/kernels_common.hpp>
#include <ipuml/backends/cpu/vmath.hpp>
#include <ipuml/ipuml.hpp>

#include "../support/cpu_isa.hpp"

#include <xsimd/xsimd.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace ipuml;
using ipuml::cpu::Isa;
using ipuml::testing::IsaGuard;
using ipuml::testing::supported_isas;

namespace {

using B = xsimd::batch<float>;
constexpr size_t kW = B::size;

enum class Fn { exp, tanh, erf };
const char* fn_name(Fn f) { return f == Fn::exp ? "exp" : f == Fn::tanh ? "tanh" : "erf"; }

B ref_batch(Fn f, B v) {
  return f == Fn::exp ? xsimd::exp(v) : f == Fn::tanh ? xsimd::tanh(v) : xsimd::erf(v);
}

// y = F(x) on xsimd's batch (a tail padded into one batch): the reference.
template <typename F>
void batch_map(const float* x, float* y, size_t n, F&& f) {
  for (size_t i = 0; i < n; i += kW) {
    alignas(64) float buf[kW] = {};
    const size_t m = std::min(kW, n - i);
    std::memcpy(buf, x + i, m * sizeof(float));
    f(B::load_aligned(buf)).store_aligned(buf);
    std::memcpy(y + i, buf, m * sizeof(float));
  }
}
template <typename F>
void batch_map2(const float* a, const float* b, float* y, size_t n, F&& f) {
  for (size_t i = 0; i < n; i += kW) {
    alignas(64) float ba[kW] = {}, bb[kW] = {};
    const size_t m = std::min(kW, n - i);
    std::memcpy(ba, a + i, m * sizeof(float));
    std::memcpy(bb, b + i, m * sizeof(float));
    f(B::load_aligned(ba), B::load_aligned(bb)).store_aligned(ba);
    std::memcpy(y + i, ba, m * sizeof(float));
  }
}

void vm(Fn f, const float* x, float* y, int64_t n) {
  if (f == Fn::exp)
    cpu::vmath::exp(x, y, n);
  else if (f == Fn::tanh)
    cpu::vmath::tanh(x, y, n);
  else
    cpu::vmath::erf(x, y, n);
}

uint32_t bits(float v) { return std::bit_cast<uint32_t>(v); }
float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

// The same bits. Which NaN an operation returns when it meets two (a NaN and its negation, in
// xsimd's algorithms) follows the compiler's operand order: vmath reproduces GCC's, so under
// another compiler a NaN's sign is not compared.
bool same(float a, float b) {
#if defined(__GNUC__) && !defined(__clang__)
  return bits(a) == bits(b);
#else
  if (std::isnan(a) && std::isnan(b)) return (bits(a) & 0x7fffffffu) == (bits(b) & 0x7fffffffu);
  return bits(a) == bits(b);
#endif
}

// Index of the first element that differs, or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same(a[i], b[i])) return int64_t(i);
  return -1;
}
// The same, a NaN's sign aside: for an op's output against its former expression compiled here,
// where the arithmetic around exp, tanh or erf also meets two NaNs (a NaN x and a NaN gradient,
// say), and GCC may order that operation's operands differently in this file and in the
// library.
int64_t first_difference_but_nan_sign(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool nans = std::isnan(a[i]) && std::isnan(b[i]);
    if (nans ? (bits(a[i]) & 0x7fffffffu) != (bits(b[i]) & 0x7fffffffu) : bits(a[i]) != bits(b[i]))
      return int64_t(i);
  }
  return -1;
}

std::string hex(float v) {
  char s[16];
  std::snprintf(s, sizeof s, "%08x", unsigned(bits(v)));
  return s;
}

// Compares vmath's f with xsimd's on every input of xs, on the active ISA.
void check_inputs(Fn f, const std::vector<float>& xs) {
  std::vector<float> want(xs.size()), got(xs.size());
  batch_map(xs.data(), want.data(), xs.size(), [f](B v) { return ref_batch(f, v); });
  vm(f, xs.data(), got.data(), int64_t(xs.size()));
  const int64_t i = first_difference(want, got);
  INFO(fn_name(f) << " on " << cpu::gemm_isa_name() << ": x = " << (i < 0 ? 0.0f : xs[size_t(i)])
                  << " (" << (i < 0 ? "" : hex(xs[size_t(i)])) << ") gives "
                  << (i < 0 ? "" : hex(got[size_t(i)])) << ", xsimd "
                  << (i < 0 ? "" : hex(want[size_t(i)])));
  CHECK(i == -1);
}

// The floats from `center` - k ulps to `center` + k ulps (finite, same sign as center).
void add_around(std::vector<float>& out, float center, int k) {
  const uint32_t c = bits(center);
  for (int d = -k; d <= k; ++d) out.push_back(from_bits(c + uint32_t(d)));
}

std::vector<float> special_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  const float den = std::numeric_limits<float>::denorm_min();
  const float fmin = std::numeric_limits<float>::min(), fmax = std::numeric_limits<float>::max();
  std::vector<float> v{0.0f,  -0.0f, den,   -den,   2 * den, fmin - den, -(fmin - den),
                       fmin,  -fmin, fmax,  -fmax,  inf,     -inf,       1.0f,
                       -1.0f, 0.5f,  -0.5f, 1e-20f, -1e-20f, 1e20f,      -1e20f,
                       3.0f,  -3.0f, 10.0f, -10.0f, 100.0f,  -100.0f};
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0xffffffffu,
                       0x7fc12345u, 0xff812345u})
    v.push_back(from_bits(nan));
  // exp: its limits (+-88.376 = +-127.5 log 2: inf from maxlog, 0 up to minlog), where the
  // exponent k reaches +-127 and +-126 (2^-127 is built as 0, 2^128 as inf), and where tanh's
  // exp(2x) and erf's exp(-x^2) do.
  const double ln2 = std::log(2.0);
  for (double k : {127.5, 126.5, 125.5, 128.5, 0.5, 1.5})
    for (double sgn : {1.0, -1.0}) add_around(v, float(sgn * k * ln2), 600);
  for (float c : {88.3762626647949f, -88.3762626647949f, 44.1881313f, -44.1881313f, 9.40080f,
                  -9.40080f, 87.33654f, -87.33654f, -103.97208f})
    add_around(v, c, 600);
  // tanh's switch at 0.625 and erf's at 2/3, both signs; around 0.4 (erf's shifted argument).
  for (float c : {0.625f, -0.625f, 2.0f / 3.0f, -2.0f / 3.0f, 0.4f, -0.4f}) add_around(v, c, 4000);
  return v;
}

}  // namespace

TEST_CASE("vmath exp tanh and erf have xsimd's bits on every ISA", "[vmath]") {
  IsaGuard guard;
  const auto special = special_inputs();
  // Every 251st bit pattern (251 is prime: every exponent, sign and NaN class is visited, with
  // varied low bits), in slices of 2^20.
  constexpr uint64_t kStride = 251, kSlice = uint64_t(1) << 20;
  std::vector<float> xs, want, got;
  for (Isa isa : supported_isas()) {
    cpu::set_gemm_isa(isa);
    for (Fn f : {Fn::exp, Fn::tanh, Fn::erf}) check_inputs(f, special);
  }
  for (uint64_t start = 0; start < (uint64_t(1) << 32); start += kStride * kSlice) {
    xs.clear();
    for (uint64_t u = start; u < (uint64_t(1) << 32) && xs.size() < kSlice; u += kStride)
      xs.push_back(from_bits(uint32_t(u)));
    want.resize(xs.size());
    got.resize(xs.size());
    for (Fn f : {Fn::exp, Fn::tanh, Fn::erf}) {
      batch_map(xs.data(), want.data(), xs.size(), [f](B v) { return ref_batch(f, v); });
      for (Isa isa : supported_isas()) {
        cpu::set_gemm_isa(isa);
        vm(f, xs.data(), got.data(), int64_t(xs.size()));
        const int64_t i = first_difference(want, got);
        INFO(fn_name(f) << " on " << cpu::gemm_isa_name()
                        << ": x = " << (i < 0 ? "" : hex(xs[size_t(i)])) << " gives "
                        << (i < 0 ? "" : hex(got[size_t(i)])) << ", xsimd "
                        << (i < 0 ? "" : hex(want[size_t(i)])));
        REQUIRE(i == -1);
      }
    }
  }
}

TEST_CASE("vmath handles every length and alignment and works in place", "[vmath]") {
  IsaGuard guard;
  std::mt19937 rng(17);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> base(80);
  for (auto& v : base) v = dist(rng);
  base[3] = std::numeric_limits<float>::quiet_NaN();
  base[20] = std::numeric_limits<float>::infinity();
  base[41] = -100.0f;
  const float sentinel = from_bits(0x7fa5a5a5u);
  for (Isa isa : supported_isas()) {
    cpu::set_gemm_isa(isa);
    for (Fn f : {Fn::exp, Fn::tanh, Fn::erf})
      for (int64_t off = 0; off < 3; ++off)
        for (int64_t n = 0; n <= 33; ++n) {
          INFO(fn_name(f) << " on " << cpu::gemm_isa_name() << ", offset " << off << ", length "
                          << n);
          const float* x = base.data() + off;
          std::vector<float> want(size_t(n) + 1), got(size_t(n) + 40, sentinel);
          batch_map(x, want.data(), size_t(n), [f](B v) { return ref_batch(f, v); });
          vm(f, x, got.data() + off, n);
          bool ok = true;
          for (int64_t i = 0; i < n; ++i) ok = ok && same(got[size_t(off + i)], want[size_t(i)]);
          CHECK(ok);
          // Nothing outside [0, n) is written.
          bool untouched = true;
          for (size_t i = 0; i < got.size(); ++i)
            if (int64_t(i) < off || int64_t(i) >= off + n)
              untouched = untouched && bits(got[i]) == bits(sentinel);
          CHECK(untouched);
          // In place.
          std::vector<float> inplace(x, x + n);
          vm(f, inplace.data(), inplace.data(), n);
          ok = true;
          for (int64_t i = 0; i < n; ++i) ok = ok && same(inplace[size_t(i)], want[size_t(i)]);
          CHECK(ok);
        }
  }
}

namespace {

constexpr float kSqrt1_2 = 0.70710678118654752f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kGeluC = 0.044715f;

// The ops' former one-expression forms on xsimd's batch: what the rewired kernels must equal.
B gelu_ref(B x, int mode) {
  const B half(0.5f), one(1.0f);
  if (mode == 1) {
    const B inner = B(kSqrt2OverPi) * (x + B(kGeluC) * x * x * x);
    return half * x * (one + xsimd::tanh(inner));
  }
  return half * x * (one + xsimd::erf(x * B(kSqrt1_2)));
}
B gelu_grad_ref(B g, B x, int mode) {
  const B half(0.5f), one(1.0f);
  if (mode == 1) {
    const B x2 = x * x;
    const B inner = B(kSqrt2OverPi) * (x + B(kGeluC) * x2 * x);
    const B t = xsimd::tanh(inner);
    const B dinner = B(kSqrt2OverPi) * (one + B(3.0f * kGeluC) * x2);
    return g * (half * (one + t) + half * x * (one - t * t) * dinner);
  }
  const B cdf = half * (one + xsimd::erf(x * B(kSqrt1_2)));
  const B pdf = B(kInvSqrt2Pi) * xsimd::exp(B(-0.5f) * x * x);
  return g * (cdf + x * pdf);
}

// Softmax / log_softmax of one row as the kernel always computed it: the max (the row's values
// are not NaN), exp(x - max) on xsimd's batch, the pairwise sum, then a scale or a shift.
std::vector<float> softmax_row_ref(const float* x, int64_t n, bool log) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
  const float shift = std::isinf(m) ? 0.0f : m;
  std::vector<float> e(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  batch_map(x, e.data(), size_t(n), [&](B v) { return xsimd::exp(v - B(shift)); });
  const float sum = cpu::kdetail::pairwise_sum(e.data(), n);
  if (log) {
    const float ls = std::log(sum) + shift;
    for (int64_t j = 0; j < n; ++j) y[size_t(j)] = x[j] - ls;
  } else {
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; ++j) y[size_t(j)] = e[size_t(j)] * inv;
  }
  return y;
}

// Floats of a normal distribution with the special values sprinkled in.
std::vector<float> test_values(size_t n, float scale, unsigned seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  if (specials) {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> s{0.0f,   -0.0f,   inf,   -inf,   std::nanf(""), -std::nanf(""),
                               1e-40f, -1e-40f, 50.0f, -50.0f, 100.0f,        -100.0f,
                               0.625f, -0.625f, 0.94f, -0.94f, 9.4f,          -9.4f};
    for (size_t i = 0; i < s.size(); ++i) v[(i * 131 + 7) % n] = s[i];
  }
  return v;
}

struct OpResults {
  std::vector<std::vector<float>> values;
  std::vector<std::string> names;
  void add(const std::string& name, const Tensor& t) {
    names.push_back(name);
    values.push_back(t.to_vector<float>());
  }
};

// Every rewired op once, through the tensor API, on the active ISA.
OpResults run_ops(const std::vector<float>& xv, const std::vector<float>& gv, const Shape& shape,
                  const std::vector<float>& rows, const Shape& row_shape) {
  OpResults r;
  const Tensor x = from_vector(xv, shape), g = from_vector(gv, shape);
  r.add("exp", exp(x));
  r.add("tanh", tanh(x));
  r.add("sigmoid", sigmoid(x));
  for (const char* mode : {"none", "tanh"}) {
    Tensor xg = x.clone().detach().requires_grad_();
    Tensor y = gelu(xg, mode);
    sum(mul(y, g)).backward();
    r.add(std::string("gelu ") + mode, y);
    r.add(std::string("gelu grad ") + mode, xg.grad());
  }
  const Tensor xr = from_vector(rows, row_shape);
  r.add("softmax last", softmax(xr, -1));
  r.add("log_softmax last", log_softmax(xr, -1));
  r.add("softmax middle", softmax(xr, 1));
  r.add("log_softmax middle", log_softmax(xr, 1));
  {
    // log_softmax's gradient, g - exp(y) * sum(g): eager (Exp, Sum, Mul, Sub) and as the captured
    // graph's one fused op.
    const Tensor y = log_softmax(xr, -1);
    const Tensor gr = from_vector(test_values(rows.size(), 1.0f, 5, false), row_shape);
    const int64_t last = int64_t(row_shape.size()) - 1;
    r.add("log_softmax grad eager", sub(gr, mul(exp(y), sum(gr, {last}, true))));
    ir::Tracer tracer;
    const Tensor yi = tracer.input(y, "y"), gi = tracer.input(gr, "g");
    auto trace = tracer.finish({sub(gi, mul(exp(yi), sum(gi, {last}, true)))});
    cpu::GraphExecutor exec(trace.graph);
    r.add("log_softmax grad fused", exec.run({y, gr}, trace.states)[0]);
  }
  return r;
}

}  // namespace

TEST_CASE("ops built on exp tanh and erf keep their bits on every ISA", "[vmath]") {
  IsaGuard guard;
  // 7 x 333: rows across vmath's chunks of 512 and odd tails.
  const Shape shape{7, 333};
  const size_t n = 7 * 333;
  const auto xv = test_values(n, 3.0f, 1, true), gv = test_values(n, 1.0f, 2, true);
  // Softmax rows: [3, 5, 1037] (the last dim over two chunks; dim 1 runs the middle-dim path),
  // with -inf entries and one row all -inf.
  const Shape row_shape{3, 5, 1037};
  auto rows = test_values(3 * 5 * 1037, 4.0f, 3, false);
  for (size_t i = 0; i < rows.size(); i += 97) rows[i] = -std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < 1037; ++j) rows[4 * 1037 + j] = -std::numeric_limits<float>::infinity();

  // References: the former xsimd expressions.
  std::vector<std::pair<std::string, std::vector<float>>> refs;
  auto ref1 = [&](const std::string& name, auto f) {
    std::vector<float> y(n);
    batch_map(xv.data(), y.data(), n, f);
    refs.emplace_back(name, y);
  };
  ref1("exp", [](B v) { return xsimd::exp(v); });
  ref1("tanh", [](B v) { return xsimd::tanh(v); });
  ref1("sigmoid", [](B v) { return B(1.0f) / (B(1.0f) + xsimd::exp(-v)); });
  for (int mode : {0, 1}) {
    const std::string m = mode == 1 ? "tanh" : "none";
    ref1("gelu " + m, [mode](B v) { return gelu_ref(v, mode); });
    std::vector<float> d(n);
    batch_map2(gv.data(), xv.data(), d.data(), n,
               [mode](B g, B x) { return gelu_grad_ref(g, x, mode); });
    refs.emplace_back("gelu grad " + m, d);
  }
  std::vector<float> sm, lsm;
  for (int64_t r = 0; r < 15; ++r) {
    const auto a = softmax_row_ref(rows.data() + r * 1037, 1037, false);
    const auto b = softmax_row_ref(rows.data() + r * 1037, 1037, true);
    sm.insert(sm.end(), a.begin(), a.end());
    lsm.insert(lsm.end(), b.begin(), b.end());
  }
  refs.emplace_back("softmax last", sm);
  refs.emplace_back("log_softmax last", lsm);

  std::vector<OpResults> per_isa;
  for (Isa isa : supported_isas()) {
    cpu::set_gemm_isa(isa);
    per_isa.push_back(run_ops(xv, gv, shape, rows, row_shape));
    const OpResults& res = per_isa.back();
    for (const auto& [name, want] : refs) {
      const size_t k =
          size_t(std::find(res.names.begin(), res.names.end(), name) - res.names.begin());
      REQUIRE(k < res.names.size());
      const int64_t i = first_difference_but_nan_sign(res.values[k], want);
      INFO(name << " on " << cpu::gemm_isa_name() << " against its xsimd expression: element "
                << i);
      CHECK(i == -1);
    }
    // The fused log_softmax gradient has the eager ops' bits.
    const auto& names = res.names;
    const size_t e =
        size_t(std::find(names.begin(), names.end(), "log_softmax grad eager") - names.begin());
    INFO("fused log_softmax gradient on " << cpu::gemm_isa_name());
    CHECK(first_difference(res.values[e], res.values[e + 1]) == -1);
  }
  for (size_t i = 1; i < per_isa.size(); ++i)
    for (size_t k = 0; k < per_isa[0].values.size(); ++k) {
      INFO(per_isa[0].names[k] << ": ISA " << i << " against generic");
      CHECK(first_difference(per_isa[i].values[k], per_isa[0].values[k]) == -1);
    }
}
