// Kernel-level tests of cpu::run_kernel: every op family against straightforward double-precision
// loops written here, error paths, and bit-identical results with 1 and 2 threads.
#include <catch2/catch.hpp>

#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/core/dtype.hpp>
#include <ipuml/core/parallel.hpp>
#include <ipuml/ir/op_catalogue.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

using namespace ipuml;
using ir::Attrs;
using ir::OpKind;

namespace {

struct Buf {
  ir::TensorMeta meta;
  std::vector<unsigned char> bytes;
  template <typename S>
  std::vector<S> as() const {
    std::vector<S> v(bytes.size() / sizeof(S));
    if (!bytes.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  std::vector<float> f() const { return as<float>(); }
};

template <typename S>
Buf make(const Shape& s, DType t, const std::vector<S>& v) {
  REQUIRE(static_cast<int64_t>(v.size()) == numel(s));
  REQUIRE(sizeof(S) == dtype_size(t));
  Buf b{{s, t}, std::vector<unsigned char>(v.size() * sizeof(S))};
  if (!v.empty()) std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
  return b;
}
Buf tf(const Shape& s, const std::vector<float>& v) { return make(s, kFloat32, v); }
Buf ti64(const Shape& s, const std::vector<int64_t>& v) { return make(s, kInt64, v); }
Buf ti32(const Shape& s, const std::vector<int32_t>& v) { return make(s, kInt32, v); }
Buf tb(const Shape& s, const std::vector<uint8_t>& v) { return make(s, kBool, v); }

std::vector<Buf> run(OpKind k, const Attrs& a, const std::vector<const Buf*>& ins,
                     const cpu::KernelContext& ctx = {}) {
  std::vector<ir::TensorMeta> metas;
  std::vector<cpu::ConstBuffer> cin;
  for (auto* b : ins) {
    metas.push_back(b->meta);
    cin.push_back({b->bytes.data(), b->meta});
  }
  std::vector<Buf> outs;
  for (auto& m : ir::infer(k, a, metas))
    outs.push_back({m, std::vector<unsigned char>(m.nbytes(), 0xCD)});
  std::vector<cpu::MutableBuffer> cout;
  for (auto& o : outs) cout.push_back({o.bytes.data(), o.meta});
  cpu::run_kernel(k, a, cin, cout, ctx);
  return outs;
}
Buf run1(OpKind k, const Attrs& a, const std::vector<const Buf*>& ins,
         const cpu::KernelContext& ctx = {}) {
  return run(k, a, ins, ctx).at(0);
}

std::vector<float> seq(int64_t n, float scale = 1.0f, float offset = 0.0f, unsigned seed = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g) * scale + offset;
  return v;
}

Attrs dims_attrs(std::vector<int64_t> d, bool keep = false) {
  Attrs a;
  a.dims = std::move(d);
  a.keepdim = keep;
  return a;
}

// Index of output element `flat` of shape `out` inside a broadcast input of shape `in`.
int64_t bcast_index(int64_t flat, const Shape& out, const Shape& in) {
  std::vector<int64_t> idx(out.size());
  for (size_t d = out.size(); d-- > 0;) {
    idx[d] = flat % out[d];
    flat /= out[d];
  }
  int64_t r = 0;
  const size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) r = r * in[d] + (in[d] == 1 ? 0 : idx[off + d]);
  return r;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_close(const std::vector<float>& got, const std::vector<double>& want, double rel = 2e-6,
                 double abs = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << " want " << want[i]);
    if (std::isnan(want[i])) {
      CHECK(std::isnan(got[i]));
    } else if (std::isinf(want[i])) {
      CHECK(got[i] == want[i]);
    } else {
      CHECK(std::fabs(got[i] - want[i]) <= abs + rel * std::fabs(want[i]));
    }
  }
}

// Independent 16-bit float oracle: the nearest of all 65536 encodings (ties to even mantissa).
uint16_t nearest16(double v, float (*decode)(uint16_t), uint16_t inf_bits) {
  if (std::isnan(v)) return 0;
  int best = -1;
  double bd = std::numeric_limits<double>::infinity();
  double maxf = 0;
  for (int b = 0; b < 65536; ++b) {
    const float f = decode(static_cast<uint16_t>(b));
    if (!std::isfinite(f)) continue;
    maxf = std::max(maxf, static_cast<double>(f));
    const double d = std::fabs(static_cast<double>(f) - v);
    if (d < bd ||
        (d == bd && (b & 1) == 0 && (best & 1) == 1 && std::signbit(f) == std::signbit(v))) {
      bd = d;
      best = b;
    }
  }
  // Past the largest finite value by at least half an ulp: infinity.
  const uint16_t maxbits = static_cast<uint16_t>(inf_bits - 1);
  const double ulp =
      static_cast<double>(decode(maxbits)) - static_cast<double>(decode(maxbits - 1));
  if (std::fabs(v) >= maxf + ulp / 2) return static_cast<uint16_t>(inf_bits | (v < 0 ? 0x8000 : 0));
  if (v == 0) return std::signbit(v) ? 0x8000 : 0;
  return static_cast<uint16_t>(best);
}

}  // namespace

// ---- creation -----------------------------------------------------------------------------

TEST_CASE("full and arange fill every dtype", "[kernels]") {
  Attrs a;
  a.shape = {2, 3};
  a.scalar = 1.0 + std::ldexp(1.0, -11);  // a float16 tie: rounds to even (1.0)
  a.dtype = kFloat16;
  for (auto h : run1(OpKind::Full, a, {}).as<uint16_t>()) CHECK(h == 0x3C00);
  a.scalar = 1.0 + 3 * std::ldexp(1.0, -11);
  for (auto h : run1(OpKind::Full, a, {}).as<uint16_t>()) CHECK(h == 0x3C02);
  a.scalar = -2.75;
  a.dtype = kInt32;
  for (auto v : run1(OpKind::Full, a, {}).as<int32_t>()) CHECK(v == -2);
  a.dtype = kBool;
  for (auto v : run1(OpKind::Full, a, {}).as<uint8_t>()) CHECK(v == 1);
  a.dtype = kBFloat16;
  for (auto v : run1(OpKind::Full, a, {}).as<uint16_t>()) CHECK(bf16_bits_to_float(v) == -2.75f);

  Attrs r;
  r.shape = {7};
  r.scalar = 0.5;
  r.scalar2 = 0.25;
  auto y = run1(OpKind::Arange, r, {}).f();
  for (int i = 0; i < 7; ++i) CHECK(y[i] == 0.5f + 0.25f * i);
  r.dtype = kInt64;
  r.scalar = -3;
  r.scalar2 = 2;
  auto yi = run1(OpKind::Arange, r, {}).as<int64_t>();
  for (int i = 0; i < 7; ++i) CHECK(yi[i] == -3 + 2 * i);
}

TEST_CASE("random ops are reproducible and well distributed", "[kernels]") {
  Attrs a;
  a.shape = {100003};
  a.scalar = 0.0;
  a.scalar2 = 1.0;
  a.seed = 42;
  a.stream = 7;
  const auto u1 = run1(OpKind::RandUniform, a, {}).f();
  const auto u2 = run1(OpKind::RandUniform, a, {}).f();
  CHECK(bits_equal(u1, u2));
  const auto u3 = run1(OpKind::RandUniform, a, {}, cpu::KernelContext{1}).f();
  CHECK_FALSE(bits_equal(u1, u3));
  double mean = 0;
  for (float v : u1) {
    CHECK(v >= 0.0f);
    CHECK(v < 1.0f);
    mean += v;
  }
  mean /= static_cast<double>(u1.size());
  CHECK(std::fabs(mean - 0.5) < 0.01);
  // Element values never depend on the thread count.
  set_num_threads(1);
  const auto u4 = run1(OpKind::RandUniform, a, {}).f();
  set_num_threads(0);
  CHECK(bits_equal(u1, u4));

  a.scalar = -2;
  a.scalar2 = 3;
  for (float v : run1(OpKind::RandUniform, a, {}).f()) {
    CHECK(v >= -2.0f);
    CHECK(v < 3.0f);
  }

  a.scalar = 1.0;
  a.scalar2 = 2.0;
  const auto nrm = run1(OpKind::RandNormal, a, {}).f();
  double m = 0, m2 = 0;
  for (float v : nrm) {
    m += v;
    m2 += static_cast<double>(v) * v;
  }
  m /= static_cast<double>(nrm.size());
  const double sd = std::sqrt(m2 / static_cast<double>(nrm.size()) - m * m);
  CHECK(std::fabs(m - 1.0) < 0.03);
  CHECK(std::fabs(sd - 2.0) < 0.03);

  a.start = -3;
  a.end = 4;
  a.dtype = kInt64;
  std::vector<int> count(7, 0);
  for (auto v : run1(OpKind::RandInt, a, {}).as<int64_t>()) {
    REQUIRE(v >= -3);
    REQUIRE(v < 4);
    ++count[static_cast<size_t>(v + 3)];
  }
  for (int c : count) CHECK(std::abs(c - 100003 / 7) < 600);
  a.end = -3;
  CHECK_THROWS_AS(run1(OpKind::RandInt, a, {}), Error);
}

// ---- unary --------------------------------------------------------------------------------

TEST_CASE("float unary ops match double references", "[kernels]") {
  std::vector<float> xs = seq(37, 4.0f);
  xs.push_back(0.0f);
  xs.push_back(-20.0f);
  xs.push_back(20.0f);
  std::vector<float> pos;
  for (float v : xs) pos.push_back(std::fabs(v) + 0.01f);
  const Buf x = tf({static_cast<int64_t>(xs.size())}, xs);
  const Buf xp = tf({static_cast<int64_t>(pos.size())}, pos);
  auto ref = [](const std::vector<float>& in, const std::function<double(double)>& f) {
    std::vector<double> r;
    for (float v : in) r.push_back(f(v));
    return r;
  };
  check_close(run1(OpKind::Exp, {}, {&x}).f(), ref(xs, [](double v) { return std::exp(v); }));
  check_close(run1(OpKind::Log, {}, {&xp}).f(), ref(pos, [](double v) { return std::log(v); }));
  check_close(run1(OpKind::Sqrt, {}, {&xp}).f(), ref(pos, [](double v) { return std::sqrt(v); }));
  check_close(run1(OpKind::Rsqrt, {}, {&xp}).f(),
              ref(pos, [](double v) { return 1 / std::sqrt(v); }));
  check_close(run1(OpKind::Tanh, {}, {&x}).f(), ref(xs, [](double v) { return std::tanh(v); }));
  check_close(run1(OpKind::Sigmoid, {}, {&x}).f(),
              ref(xs, [](double v) { return 1 / (1 + std::exp(-v)); }));
  check_close(run1(OpKind::Relu, {}, {&x}).f(), ref(xs, [](double v) { return v > 0 ? v : 0; }));
  Attrs g;
  check_close(run1(OpKind::Gelu, g, {&x}).f(),
              ref(xs, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), 1e-5,
              1e-6);
  g.mode = 1;
  check_close(run1(OpKind::Gelu, g, {&x}).f(),
              ref(xs,
                  [](double v) {
                    return 0.5 * v *
                           (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
                  }),
              1e-5, 1e-6);
  Attrs c;
  c.flag = true;
  c.scalar = -1.5;
  check_close(run1(OpKind::Clamp, c, {&x}).f(),
              ref(xs, [](double v) { return std::max(v, -1.5); }));
  c.flag2 = true;
  c.scalar2 = 0.5;
  check_close(run1(OpKind::Clamp, c, {&x}).f(),
              ref(xs, [](double v) { return std::min(std::max(v, -1.5), 0.5); }));
  c.flag = false;
  check_close(run1(OpKind::Clamp, c, {&x}).f(), ref(xs, [](double v) { return std::min(v, 0.5); }));
  for (double p : {2.0, 3.0, -1.0, 0.5, -0.5, 1.7, 0.0}) {
    Attrs pa;
    pa.scalar = p;
    check_close(run1(OpKind::PowScalar, pa, {&xp}).f(),
                ref(pos, [p](double v) { return std::pow(v, p); }), 1e-5);
  }
  Attrs p3;
  p3.scalar = 3.0;  // negative bases with an integer exponent stay real
  check_close(run1(OpKind::PowScalar, p3, {&x}).f(), ref(xs, [](double v) { return v * v * v; }),
              1e-5);
  const Buf nanx = tf({1}, {std::numeric_limits<float>::quiet_NaN()});
  CHECK(std::isnan(run1(OpKind::Relu, {}, {&nanx}).f()[0]));
  c.flag = true;
  CHECK(std::isnan(run1(OpKind::Clamp, c, {&nanx}).f()[0]));
}

TEST_CASE("neg abs sign on floats and integers", "[kernels]") {
  const Buf f = tf({4}, {-2.5f, 0.0f, 3.0f, -0.0f});
  CHECK(run1(OpKind::Neg, {}, {&f}).f() == std::vector<float>{2.5f, -0.0f, -3.0f, 0.0f});
  CHECK(run1(OpKind::Abs, {}, {&f}).f() == std::vector<float>{2.5f, 0.0f, 3.0f, 0.0f});
  CHECK(run1(OpKind::Sign, {}, {&f}).f() == std::vector<float>{-1.0f, 0.0f, 1.0f, 0.0f});
  const Buf i = ti32({3}, {-7, 0, 9});
  CHECK(run1(OpKind::Neg, {}, {&i}).as<int32_t>() == std::vector<int32_t>{7, 0, -9});
  CHECK(run1(OpKind::Abs, {}, {&i}).as<int32_t>() == std::vector<int32_t>{7, 0, 9});
  CHECK(run1(OpKind::Sign, {}, {&i}).as<int32_t>() == std::vector<int32_t>{-1, 0, 1});
  const Buf l = ti64({2}, {-(int64_t{1} << 40), 5});
  CHECK(run1(OpKind::Abs, {}, {&l}).as<int64_t>() == std::vector<int64_t>{int64_t{1} << 40, 5});
  const Buf bl = tb({2}, {1, 0});
  CHECK(run1(OpKind::Copy, {}, {&bl}).as<uint8_t>() == std::vector<uint8_t>{1, 0});
}

// ---- cast ---------------------------------------------------------------------------------

TEST_CASE("cast converts every dtype pair", "[kernels]") {
  const double e11 = std::ldexp(1.0, -11), e8 = std::ldexp(1.0, -8);
  const std::vector<double> fvals = {
      0.0,     -0.0,       1.0,         -2.7,
      2.7,     1 + e11,    1 + 3 * e11, 1 + e11 + std::ldexp(1.0, -20),
      1 + e8,  1 + 3 * e8, 65504.0,     65520.0,
      70000.0, -1e6,       3e9,         -3e9,
      1e-6,    6e-8,       1e-40,       0.5,
      255.5};
  const std::vector<double> ivals = {0,
                                     1,
                                     -1,
                                     2049,
                                     4097,
                                     65519,
                                     65520,
                                     -70000,
                                     123456789,
                                     33554432.0 + 131072.0 + 1.0,
                                     2147483647.0,
                                     -2147483648.0};
  const std::vector<DType> all = {kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kBool};

  auto make_src = [&](DType t) -> std::pair<Buf, std::vector<double>> {
    std::vector<double> exact;
    const auto& src = (t == kInt32 || t == kInt64) ? ivals : fvals;
    const Shape s{static_cast<int64_t>(src.size())};
    switch (t) {
      case DType::Float32: {
        std::vector<float> v;
        for (double d : src) {
          v.push_back(static_cast<float>(d));
          exact.push_back(static_cast<float>(d));
        }
        return {tf(s, v), exact};
      }
      case DType::Float16:
      case DType::BFloat16: {
        std::vector<uint16_t> v;
        for (double d : src) {
          const uint16_t b = t == kFloat16 ? float_to_half_bits(static_cast<float>(d))
                                           : float_to_bf16_bits(static_cast<float>(d));
          v.push_back(b);
          exact.push_back(t == kFloat16 ? half_bits_to_float(b) : bf16_bits_to_float(b));
        }
        return {make(s, t, v), exact};
      }
      case DType::Int32: {
        std::vector<int32_t> v;
        for (double d : src) {
          v.push_back(static_cast<int32_t>(static_cast<int64_t>(d)));
          exact.push_back(v.back());
        }
        return {ti32(s, v), exact};
      }
      case DType::Int64: {
        std::vector<int64_t> v;
        for (double d : src) {
          v.push_back(static_cast<int64_t>(d) * 3);  // beyond int32 too
          exact.push_back(static_cast<double>(v.back()));
        }
        return {ti64(s, v), exact};
      }
      case DType::Bool: {
        std::vector<uint8_t> v{0, 1, 1, 0};
        for (auto b : v) exact.push_back(b);
        return {tb({4}, v), exact};
      }
    }
    return {};
  };
  auto trunc_sat = [](double v, double lo, double hi) {
    if (std::isnan(v)) return 0.0;
    return std::min(std::max(std::trunc(v), lo), hi);
  };
  for (DType from : all) {
    auto [src, exact] = make_src(from);
    for (DType to : all) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      Attrs a;
      a.dtype = to;
      const Buf y = run1(OpKind::Cast, a, {&src});
      for (size_t i = 0; i < exact.size(); ++i) {
        const double v = exact[i];
        INFO("value " << v);
        switch (to) {
          case DType::Float32:
            CHECK(y.f()[i] == static_cast<float>(v));
            break;
          case DType::Float16:
            CHECK(y.as<uint16_t>()[i] == nearest16(v, half_bits_to_float, 0x7C00));
            break;
          case DType::BFloat16:
            CHECK(y.as<uint16_t>()[i] == nearest16(v, bf16_bits_to_float, 0x7F80));
            break;
          case DType::Int32:
            if (from == kInt64)
              CHECK(y.as<int32_t>()[i] ==
                    static_cast<int32_t>(static_cast<uint32_t>(static_cast<int64_t>(v))));
            else
              CHECK(y.as<int32_t>()[i] == trunc_sat(v, -2147483648.0, 2147483647.0));
            break;
          case DType::Int64:
            CHECK(static_cast<double>(y.as<int64_t>()[i]) ==
                  trunc_sat(v, -9223372036854775808.0, 9223372036854775807.0));
            break;
          case DType::Bool:
            CHECK(y.as<uint8_t>()[i] == (v != 0 ? 1 : 0));
            break;
        }
      }
    }
  }
  // Explicit rounding spot checks.
  Attrs h;
  h.dtype = kFloat16;
  const Buf ties =
      tf({3}, {static_cast<float>(1 + e11), static_cast<float>(1 + 3 * e11), 65520.0f});
  CHECK(run1(OpKind::Cast, h, {&ties}).as<uint16_t>() ==
        std::vector<uint16_t>{0x3C00, 0x3C02, 0x7C00});
  h.dtype = kBFloat16;
  const Buf bt = tf({2}, {static_cast<float>(1 + e8), static_cast<float>(1 + 3 * e8)});
  CHECK(run1(OpKind::Cast, h, {&bt}).as<uint16_t>() == std::vector<uint16_t>{0x3F80, 0x3F82});
  // int64 -> bfloat16 rounds once (a float32 detour would land on a tie and round down).
  const Buf big = ti64({1}, {(int64_t{1} << 25) + (int64_t{1} << 17) + 1});
  CHECK(bf16_bits_to_float(run1(OpKind::Cast, h, {&big}).as<uint16_t>()[0]) ==
        static_cast<float>((1 << 25) + (1 << 18)));
  h.dtype = kBool;
  const Buf nanb = tf({2}, {std::numeric_limits<float>::quiet_NaN(), -0.0f});
  CHECK(run1(OpKind::Cast, h, {&nanb}).as<uint8_t>() == std::vector<uint8_t>{1, 0});
}

// ---- binary -------------------------------------------------------------------------------

TEST_CASE("binary ops broadcast like NumPy", "[kernels]") {
  const std::vector<std::pair<Shape, Shape>> pats = {
      {{3, 4}, {3, 4}}, {{3, 4}, {}},          {{1}, {3, 4}},       {{3, 4}, {4}},
      {{3, 4}, {3, 1}}, {{3, 1}, {1, 4}},      {{2, 1, 4}, {3, 1}}, {{2, 3, 1, 5}, {3, 4, 1}},
      {{5}, {5}},       {{2, 1, 3}, {2, 4, 3}}};
  for (const auto& pat : pats) {
    const Shape sa = pat.first, sb = pat.second;  // named copies: lambdas below capture them
    INFO(shape_str(sa) << " op " << shape_str(sb));
    const Buf a = tf(sa, seq(numel(sa), 2.0f, 0.0f, 3));
    const Buf b = tf(sb, seq(numel(sb), 2.0f, 0.5f, 4));
    const auto av = a.f(), bv = b.f();
    const Shape so = broadcast_shapes(sa, sb, "test");
    auto expect = [&](const std::function<double(double, double)>& f) {
      std::vector<double> r;
      for (int64_t i = 0; i < numel(so); ++i)
        r.push_back(f(av[bcast_index(i, so, sa)], bv[bcast_index(i, so, sb)]));
      return r;
    };
    check_close(run1(OpKind::Add, {}, {&a, &b}).f(),
                expect([](double x, double y) { return x + y; }));
    check_close(run1(OpKind::Sub, {}, {&a, &b}).f(),
                expect([](double x, double y) { return x - y; }));
    check_close(run1(OpKind::Mul, {}, {&a, &b}).f(),
                expect([](double x, double y) { return x * y; }));
    check_close(run1(OpKind::Div, {}, {&a, &b}).f(),
                expect([](double x, double y) { return x / y; }));
    check_close(run1(OpKind::Maximum, {}, {&a, &b}).f(),
                expect([](double x, double y) { return std::max(x, y); }));
    check_close(run1(OpKind::Minimum, {}, {&a, &b}).f(),
                expect([](double x, double y) { return std::min(x, y); }));
    const Buf pa = tf(sa, [&] {
      auto v = av;
      for (auto& x : v) x = std::fabs(x) + 0.1f;
      return v;
    }());
    const auto pav = pa.f();
    std::vector<double> pw;
    for (int64_t i = 0; i < numel(so); ++i)
      pw.push_back(std::pow(pav[bcast_index(i, so, sa)], bv[bcast_index(i, so, sb)]));
    check_close(run1(OpKind::Pow, {}, {&pa, &b}).f(), pw, 1e-5);
    const auto lt = run1(OpKind::Lt, {}, {&a, &b}).as<uint8_t>();
    const auto ge = run1(OpKind::Ge, {}, {&a, &b}).as<uint8_t>();
    for (int64_t i = 0; i < numel(so); ++i) {
      const bool want = av[bcast_index(i, so, sa)] < bv[bcast_index(i, so, sb)];
      CHECK(lt[i] == want);
      CHECK(ge[i] == !want);
    }
  }
  // Integer arithmetic and comparisons.
  const Buf ia = ti64({2, 3}, {1, -2, 3, 4, 5, -6});
  const Buf ib = ti64({3}, {10, -2, 0});
  CHECK(run1(OpKind::Add, {}, {&ia, &ib}).as<int64_t>() ==
        std::vector<int64_t>{11, -4, 3, 14, 3, -6});
  CHECK(run1(OpKind::Mul, {}, {&ia, &ib}).as<int64_t>() ==
        std::vector<int64_t>{10, 4, 0, 40, -10, 0});
  CHECK(run1(OpKind::Maximum, {}, {&ia, &ib}).as<int64_t>() ==
        std::vector<int64_t>{10, -2, 3, 10, 5, 0});
  CHECK(run1(OpKind::Eq, {}, {&ia, &ib}).as<uint8_t>() == std::vector<uint8_t>{0, 1, 0, 0, 0, 0});
  const Buf i32a = ti32({2}, {7, -7}), i32b = ti32({1}, {-7});
  CHECK(run1(OpKind::Sub, {}, {&i32a, &i32b}).as<int32_t>() == std::vector<int32_t>{14, 0});
  CHECK(run1(OpKind::Ne, {}, {&i32a, &i32b}).as<uint8_t>() == std::vector<uint8_t>{1, 0});
  const Buf ba = tb({2, 2}, {1, 0, 1, 0}), bb = tb({2, 1}, {1, 0});
  CHECK(run1(OpKind::LogicalAnd, {}, {&ba, &bb}).as<uint8_t>() == std::vector<uint8_t>{1, 0, 0, 0});
  CHECK(run1(OpKind::Le, {}, {&ba, &bb}).as<uint8_t>() == std::vector<uint8_t>{1, 1, 0, 1});
  // NaN propagates through maximum/minimum.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Buf na = tf({2}, {nan, 1.0f}), nb = tf({2}, {1.0f, nan});
  for (float v : run1(OpKind::Maximum, {}, {&na, &nb}).f()) CHECK(std::isnan(v));
  for (float v : run1(OpKind::Minimum, {}, {&na, &nb}).f()) CHECK(std::isnan(v));
}

TEST_CASE("where broadcasts three ways", "[kernels]") {
  const Buf c = tb({2, 1, 3}, {1, 0, 1, 0, 1, 0});
  const Buf a = tf({4, 1}, {1, 2, 3, 4});
  const Buf b = tf({}, {-1});
  const Buf y = run1(OpKind::Where, {}, {&c, &a, &b});
  REQUIRE(y.meta.shape == Shape{2, 4, 3});
  const auto cv = c.as<uint8_t>();
  const auto av = a.f();
  const auto yv = y.f();
  for (int64_t i = 0; i < 24; ++i) {
    const bool cc = cv[bcast_index(i, {2, 4, 3}, {2, 1, 3})];
    CHECK(yv[i] == (cc ? av[bcast_index(i, {2, 4, 3}, {4, 1})] : -1.0f));
  }
  const Buf li = ti64({3}, {5, 6, 7}), lj = ti64({1}, {0});
  const Buf c3 = tb({3}, {0, 1, 0});
  CHECK(run1(OpKind::Where, {}, {&c3, &li, &lj}).as<int64_t>() == std::vector<int64_t>{0, 6, 0});
}

TEST_CASE("relu and gelu gradients", "[kernels]") {
  const auto xs = seq(29, 3.0f, 0.0f, 9);
  const auto gs = seq(29, 1.0f, 0.0f, 10);
  const Buf x = tf({29}, xs), g = tf({29}, gs);
  std::vector<double> rg;
  for (size_t i = 0; i < xs.size(); ++i) rg.push_back(xs[i] > 0 ? gs[i] : 0.0);
  check_close(run1(OpKind::ReluGrad, {}, {&g, &x}).f(), rg);
  for (int64_t mode : {0, 1}) {
    Attrs a;
    a.mode = mode;
    auto gelu = [mode](double v) {
      return mode == 0
                 ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
                 : 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    };
    std::vector<double> want;
    for (size_t i = 0; i < xs.size(); ++i) {
      const double h = 1e-5;
      want.push_back(gs[i] * (gelu(xs[i] + h) - gelu(xs[i] - h)) / (2 * h));
    }
    check_close(run1(OpKind::GeluGrad, a, {&g, &x}).f(), want, 1e-4, 1e-5);
  }
}

// ---- reductions ---------------------------------------------------------------------------

namespace {
// Reference reduction over `dims` of shape s (empty dims = all), returning doubles in output order.
std::vector<double> ref_reduce(const std::vector<double>& x, const Shape& s,
                               std::vector<int64_t> dims,
                               const std::function<double(double, double)>& f, double init) {
  std::vector<bool> red(s.size(), dims.empty());
  for (auto d : dims) red[static_cast<size_t>(d)] = true;
  Shape os;
  for (size_t i = 0; i < s.size(); ++i)
    if (!red[i]) os.push_back(s[i]);
  std::vector<double> out(static_cast<size_t>(numel(os)), init);
  for (int64_t e = 0; e < numel(s); ++e) {
    int64_t rem = e, o = 0, mul = 1;
    for (size_t d = s.size(); d-- > 0;) {
      const int64_t i = rem % s[d];
      rem /= s[d];
      if (!red[d]) {
        o += i * mul;
        mul *= s[d];
      }
    }
    out[static_cast<size_t>(o)] = f(out[static_cast<size_t>(o)], x[static_cast<size_t>(e)]);
  }
  return out;
}
}  // namespace

TEST_CASE("sum amax amin over dims with keepdim", "[kernels]") {
  const Shape s{2, 3, 4, 5};
  const auto xv = seq(120, 5.0f, 0.0f, 11);
  std::vector<double> xd(xv.begin(), xv.end());
  const Buf x = tf(s, xv);
  std::vector<int32_t> iv(120);
  for (int i = 0; i < 120; ++i) iv[i] = (i * 37) % 11 - 5;
  std::vector<double> id(iv.begin(), iv.end());
  const Buf xi = ti32(s, iv);
  for (const auto& dims : std::vector<std::vector<int64_t>>{
           {}, {0}, {1}, {3}, {0, 2}, {1, 2}, {0, 1, 2, 3}, {1, 3}, {2, 0}}) {
    for (bool keep : {false, true}) {
      INFO("dims " << detail::str(dims) << " keepdim " << keep);
      const Attrs a = dims_attrs(dims, keep);
      const Buf y = run1(OpKind::Sum, a, {&x});
      CHECK(y.meta.shape == ir::infer(OpKind::Sum, a, {x.meta})[0].shape);
      check_close(y.f(), ref_reduce(xd, s, dims, std::plus<double>(), 0.0), 1e-5, 1e-5);
      check_close(run1(OpKind::Amax, a, {&x}).f(),
                  ref_reduce(
                      xd, s, dims, [](double p, double q) { return std::max(p, q); }, -1e300));
      check_close(run1(OpKind::Amin, a, {&x}).f(),
                  ref_reduce(
                      xd, s, dims, [](double p, double q) { return std::min(p, q); }, 1e300));
      const Buf yi = run1(OpKind::Sum, a, {&xi});
      CHECK(yi.meta.dtype == kInt64);
      const auto want = ref_reduce(id, s, dims, std::plus<double>(), 0.0);
      const auto got = yi.as<int64_t>();
      for (size_t i = 0; i < want.size(); ++i) CHECK(static_cast<double>(got[i]) == want[i]);
      const auto mx = run1(OpKind::Amax, a, {&xi}).as<int32_t>();
      const auto wmx = ref_reduce(
          id, s, dims, [](double p, double q) { return std::max(p, q); }, -1e300);
      for (size_t i = 0; i < wmx.size(); ++i) CHECK(mx[i] == wmx[i]);
    }
  }
  const Buf bl = tb({2, 3}, {1, 0, 1, 1, 1, 0});
  CHECK(run1(OpKind::Sum, dims_attrs({1}), {&bl}).as<int64_t>() == std::vector<int64_t>{2, 2});
  const Buf empty = tf({0, 3}, {});
  CHECK(run1(OpKind::Sum, dims_attrs({0}), {&empty}).f() == std::vector<float>{0, 0, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Buf withnan = tf({4}, {1.0f, nan, 3.0f, 2.0f});
  CHECK(std::isnan(run1(OpKind::Amax, dims_attrs({}), {&withnan}).f()[0]));
}

TEST_CASE("sum of a long row is accurate", "[kernels]") {
  const int64_t n = 3000017;
  std::vector<float> v(static_cast<size_t>(n), 0.1f);
  const Buf x = tf({n}, v);
  const double want = 0.1f * static_cast<double>(n);
  CHECK(std::fabs(run1(OpKind::Sum, dims_attrs({}), {&x}).f()[0] - want) < want * 1e-6);
  // Column sums over a long reduced dim.
  const Buf c = tf({n / 7, 7}, std::vector<float>(static_cast<size_t>(n / 7 * 7), 0.1f));
  for (float s : run1(OpKind::Sum, dims_attrs({0}), {&c}).f())
    CHECK(std::fabs(s - 0.1f * static_cast<double>(n / 7)) < 1e-6 * n);
}

TEST_CASE("max/min along a dim and argmax/argmin pick the first extreme", "[kernels]") {
  const Buf x = tf({2, 4}, {1, 5, 5, 2, 7, 7, -1, 7});
  auto r = run(OpKind::MaxDim, dims_attrs({1}), {&x});
  CHECK(r[0].f() == std::vector<float>{5, 7});
  CHECK(r[1].as<int64_t>() == std::vector<int64_t>{1, 0});
  r = run(OpKind::MinDim, dims_attrs({0}, true), {&x});
  CHECK(r[0].meta.shape == Shape{1, 4});
  CHECK(r[0].f() == std::vector<float>{1, 5, -1, 2});
  CHECK(r[1].as<int64_t>() == std::vector<int64_t>{0, 0, 1, 0});
  CHECK(run1(OpKind::ArgMax, dims_attrs({}), {&x}).as<int64_t>() == std::vector<int64_t>{4});
  CHECK(run1(OpKind::ArgMin, dims_attrs({}), {&x}).as<int64_t>() == std::vector<int64_t>{6});
  CHECK(run1(OpKind::ArgMax, dims_attrs({0}), {&x}).as<int64_t>() ==
        std::vector<int64_t>{1, 1, 0, 1});
  const Buf xi = ti64({3, 2}, {4, 9, 4, 9, 1, 9});
  CHECK(run1(OpKind::ArgMax, dims_attrs({0}), {&xi}).as<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(run1(OpKind::ArgMin, dims_attrs({1}), {&xi}).as<int64_t>() ==
        std::vector<int64_t>{0, 0, 0});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Buf xn = tf({5}, {1, nan, 9, nan, 2});
  CHECK(run1(OpKind::ArgMax, dims_attrs({}), {&xn}).as<int64_t>()[0] == 1);
  CHECK(run1(OpKind::ArgMin, dims_attrs({}), {&xn}).as<int64_t>()[0] == 1);
  // A long flattened argmax crosses block boundaries: the first of two equal maxima wins.
  std::vector<float> big(200000, 0.0f);
  big[150000] = 3.0f;
  big[40000] = 3.0f;
  const Buf xb = tf({200000}, big);
  CHECK(run1(OpKind::ArgMax, dims_attrs({}), {&xb}).as<int64_t>()[0] == 40000);
}

TEST_CASE("softmax and log_softmax are stable and normalised", "[kernels]") {
  const Shape s{3, 5, 4};
  auto xv = seq(60, 3.0f, 0.0f, 21);
  for (int i = 0; i < 20; ++i) xv[i] += 1000.0f;  // would overflow exp without the max shift
  const Buf x = tf(s, xv);
  for (int64_t dim : {0, 1, 2}) {
    INFO("dim " << dim);
    const auto y = run1(OpKind::Softmax, dims_attrs({dim}), {&x}).f();
    const auto ly = run1(OpKind::LogSoftmax, dims_attrs({dim}), {&x}).f();
    const int64_t strides[3] = {20, 4, 1};
    const int64_t st = strides[dim], n = s[static_cast<size_t>(dim)];
    for (int64_t e = 0; e < 60; ++e) {
      if ((e / st) % n != 0) continue;  // e is the first element of its softmax line
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(xv[e + j * st]));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(xv[e + j * st] - m);
      double tot = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double want = std::exp(xv[e + j * st] - m) / sum;
        CHECK(std::fabs(y[e + j * st] - want) < 1e-6);
        CHECK(std::fabs(ly[e + j * st] - (xv[e + j * st] - m - std::log(sum))) < 2e-4);
        tot += y[e + j * st];
      }
      CHECK(std::fabs(tot - 1.0) < 1e-5);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  const Buf xi = tf({1, 3}, {-inf, 0.0f, -inf});
  CHECK(run1(OpKind::Softmax, dims_attrs({1}), {&xi}).f() == std::vector<float>{0, 1, 0});
}

// ---- movement -----------------------------------------------------------------------------

TEST_CASE("permute, slice, expand, cat, reshape", "[kernels]") {
  const Shape s{2, 3, 4, 5};
  std::vector<float> xv(120);
  std::iota(xv.begin(), xv.end(), 0.0f);
  const Buf x = tf(s, xv);
  const Strides cs = contiguous_strides(s);
  for (const auto& perm : std::vector<std::vector<int64_t>>{
           {0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 1, 3}, {1, 0, 3, 2}, {0, 3, 1, 2}, {2, 3, 0, 1}}) {
    INFO("perm " << detail::str(perm));
    const auto y = run1(OpKind::Permute, dims_attrs(perm), {&x}).f();
    Shape os;
    for (auto d : perm) os.push_back(s[d]);
    for (int64_t e = 0; e < 120; ++e) {
      int64_t rem = e, src = 0;
      for (size_t d = 4; d-- > 0;) {
        src += (rem % os[d]) * cs[perm[d]];
        rem /= os[d];
      }
      REQUIRE(y[e] == xv[src]);
    }
  }
  // A big non-square 2-d transpose (blocked path) of int64 values.
  std::vector<int64_t> tv(67 * 45);
  std::iota(tv.begin(), tv.end(), 0);
  const Buf tin = ti64({67, 45}, tv);
  const auto tt = run1(OpKind::Permute, dims_attrs({1, 0}), {&tin}).as<int64_t>();
  for (int64_t i = 0; i < 45; ++i)
    for (int64_t j = 0; j < 67; ++j) REQUIRE(tt[i * 67 + j] == j * 45 + i);

  Attrs sl = dims_attrs({2});
  sl.start = 1;
  sl.end = 4;
  sl.step = 2;
  const auto ys = run1(OpKind::Slice, sl, {&x}).f();
  REQUIRE(ys.size() == 2 * 3 * 2 * 5);
  for (int64_t a = 0; a < 6; ++a)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 5; ++k)
        CHECK(ys[(a * 2 + j) * 5 + k] == xv[(a * 4 + 1 + 2 * j) * 5 + k]);
  sl.dims = {0};
  sl.start = 1;
  sl.end = 2;
  sl.step = 1;
  const auto y0 = run1(OpKind::Slice, sl, {&x}).f();
  CHECK(std::vector<float>(xv.begin() + 60, xv.end()) == y0);

  Attrs ex;
  ex.shape = {2, 3, 4};
  const Buf e = tf({3, 1}, {1, 2, 3});
  const auto ye = run1(OpKind::Expand, ex, {&e}).f();
  for (int64_t i = 0; i < 24; ++i) CHECK(ye[i] == static_cast<float>((i / 4) % 3 + 1));

  const Buf c1 = tf({2, 1}, {1, 2}), c2 = tf({2, 3}, {3, 4, 5, 6, 7, 8});
  CHECK(run1(OpKind::Cat, dims_attrs({1}), {&c1, &c2}).f() ==
        std::vector<float>{1, 3, 4, 5, 2, 6, 7, 8});
  const Buf c3 = tf({1, 3}, {9, 9, 9});
  CHECK(run1(OpKind::Cat, dims_attrs({0}), {&c2, &c3}).f() ==
        std::vector<float>{3, 4, 5, 6, 7, 8, 9, 9, 9});
  Attrs rs;
  rs.shape = {6};
  CHECK(run1(OpKind::Reshape, rs, {&c2}).f() == c2.f());
}

// ---- indexing -----------------------------------------------------------------------------

TEST_CASE("index_select, index_add, gather, scatter_add and their bounds", "[kernels]") {
  const Buf x = tf({3, 4}, {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23});
  const Buf i64 = ti64({3}, {2, 0, 2});
  CHECK(run1(OpKind::IndexSelect, dims_attrs({0}), {&x, &i64}).f() ==
        std::vector<float>{20, 21, 22, 23, 0, 1, 2, 3, 20, 21, 22, 23});
  const Buf i32 = ti32({2}, {3, 1});
  CHECK(run1(OpKind::IndexSelect, dims_attrs({1}), {&x, &i32}).f() ==
        std::vector<float>{3, 1, 13, 11, 23, 21});
  const Buf bad = ti64({2}, {0, 7});
  try {
    run1(OpKind::IndexSelect, dims_attrs({0}), {&x, &bad});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("index 7 is out of range for dim 0 of size 3") !=
          std::string::npos);
  }
  const Buf neg = ti64({1}, {-1});
  CHECK_THROWS_AS(run1(OpKind::IndexSelect, dims_attrs({1}), {&x, &neg}), Error);

  Attrs ia = dims_attrs({0});
  ia.shape = {3, 2};
  const Buf src = tf({3, 2}, {1, 2, 3, 4, 5, 6});
  CHECK(run1(OpKind::IndexAdd, ia, {&i64, &src}).f() == std::vector<float>{3, 4, 0, 0, 6, 8});
  ia.shape = {2, 2};
  CHECK_THROWS_AS(run1(OpKind::IndexAdd, ia, {&i64, &src}), Error);

  // gather along dim 1 with an index narrower than the input in dim 0.
  const Buf gi = ti64({2, 3}, {3, 0, 0, 1, 2, 3});
  CHECK(run1(OpKind::Gather, dims_attrs({1}), {&x, &gi}).f() ==
        std::vector<float>{3, 0, 0, 11, 12, 13});
  const Buf gi0 = ti64({2, 2}, {2, 1, 0, 2});
  CHECK(run1(OpKind::Gather, dims_attrs({0}), {&x, &gi0}).f() == std::vector<float>{20, 11, 0, 21});
  const Buf gbad = ti64({1, 1}, {4});
  CHECK_THROWS_AS(run1(OpKind::Gather, dims_attrs({1}), {&x, &gbad}), Error);

  Attrs sa = dims_attrs({1});
  sa.shape = {2, 4};
  const Buf si = ti64({2, 3}, {3, 3, 0, 1, 1, 1});
  const Buf sv = tf({2, 3}, {1, 2, 4, 8, 16, 32});
  CHECK(run1(OpKind::ScatterAdd, sa, {&si, &sv}).f() ==
        std::vector<float>{4, 0, 0, 3, 0, 56, 0, 0});
  sa.dims = {0};
  sa.shape = {3, 3};
  const Buf si0 = ti64({2, 3}, {2, 0, 2, 2, 1, 0});
  CHECK(run1(OpKind::ScatterAdd, sa, {&si0, &sv}).f() ==
        std::vector<float>{0, 2, 32, 0, 16, 0, 9, 0, 4});
  const Buf sbad = ti64({2, 3}, {0, 0, 3, 0, 0, 0});
  CHECK_THROWS_AS(run1(OpKind::ScatterAdd, sa, {&sbad, &sv}), Error);
  sa.shape = {3, 2};  // index wider than the output outside the scatter dim
  CHECK_THROWS_AS(run1(OpKind::ScatterAdd, sa, {&si0, &sv}), Error);
  const Buf svi = ti64({2, 3}, {1, 2, 3, 4, 5, 6});
  sa.shape = {3, 3};
  CHECK(run1(OpKind::ScatterAdd, sa, {&si0, &svi}).as<int64_t>() ==
        std::vector<int64_t>{0, 2, 6, 0, 5, 0, 5, 0, 3});
}

TEST_CASE("index_add and scatter_add accumulate in index order on wide rows", "[kernels]") {
  const int64_t rows = 50, cols = 300, len = 400;
  std::vector<int64_t> iv(len);
  for (int64_t i = 0; i < len; ++i) iv[i] = (i * 7919) % rows;
  const Buf idx = ti64({len}, iv);
  const auto sv = seq(len * cols, 1.0f, 0.0f, 40);
  const Buf src = tf({len, cols}, sv);
  Attrs a = dims_attrs({0});
  a.shape = {rows, cols};
  std::vector<float> want(rows * cols, 0.0f);
  for (int64_t i = 0; i < len; ++i)
    for (int64_t k = 0; k < cols; ++k) want[iv[i] * cols + k] += sv[i * cols + k];
  set_num_threads(1);
  const auto one = run1(OpKind::IndexAdd, a, {&idx, &src}).f();
  set_num_threads(0);
  CHECK(bits_equal(one, want));
  CHECK(bits_equal(run1(OpKind::IndexAdd, a, {&idx, &src}).f(), want));
  // The same accumulation through scatter_add with an index expanded along the columns.
  std::vector<int64_t> full(len * cols);
  for (int64_t i = 0; i < len; ++i)
    for (int64_t k = 0; k < cols; ++k) full[i * cols + k] = iv[i];
  const Buf fidx = ti64({len, cols}, full);
  CHECK(bits_equal(run1(OpKind::ScatterAdd, a, {&fidx, &src}).f(), want));
}

// ---- matmul / conv ------------------------------------------------------------------------

TEST_CASE("matmul with transposes and broadcast batches", "[kernels]") {
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const std::vector<Case> cases = {
      {{3, 5}, {5, 4}, false, false},          {{5, 3}, {5, 4}, true, false},
      {{3, 5}, {4, 5}, false, true},           {{5, 3}, {4, 5}, true, true},
      {{2, 3, 5}, {5, 4}, false, false},       {{5, 4}, {2, 4, 6}, false, false},
      {{2, 1, 3, 5}, {3, 5, 4}, false, false}, {{2, 5, 3}, {2, 4, 5}, true, true},
      {{3, 0}, {0, 2}, false, false}};
  for (const auto& c : cases) {
    INFO(shape_str(c.a) << " @ " << shape_str(c.b) << " ta=" << c.ta << " tb=" << c.tb);
    const Buf a = tf(c.a, seq(numel(c.a), 1.0f, 0.0f, 5));
    const Buf b = tf(c.b, seq(numel(c.b), 1.0f, 0.0f, 6));
    Attrs at;
    at.flag = c.ta;
    at.flag2 = c.tb;
    const Buf y = run1(OpKind::MatMul, at, {&a, &b});
    const Shape& so = y.meta.shape;
    const int64_t m = so[so.size() - 2], n = so.back();
    const int64_t k = c.ta ? c.a[c.a.size() - 2] : c.a.back();
    const Shape bo(so.begin(), so.end() - 2), ba(c.a.begin(), c.a.end() - 2),
        bb(c.b.begin(), c.b.end() - 2);
    const auto av = a.f(), bv = b.f();
    std::vector<double> want;
    for (int64_t bi = 0; bi < numel(bo); ++bi) {
      const int64_t oa = bcast_index(bi, bo, ba) * m * k, ob = bcast_index(bi, bo, bb) * k * n;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p)
            s += static_cast<double>(av[oa + (c.ta ? p * m + i : i * k + p)]) *
                 bv[ob + (c.tb ? j * k + p : p * n + j)];
          want.push_back(s);
        }
    }
    check_close(y.f(), want, 1e-5, 1e-5);
  }
}

TEST_CASE("conv forward and gradients match direct loops", "[kernels]") {
  const int64_t N = 2, C = 4, H = 7, W = 6, O = 6, G = 2, KH = 3, KW = 2;
  Attrs a;
  a.kernel = {KH, KW};
  a.stride = {2, 1};
  a.padding = {1, 1};
  a.dilation = {1, 2};
  a.groups = G;
  const Buf x = tf({N, C, H, W}, seq(N * C * H * W, 1.0f, 0.0f, 7));
  const Buf w = tf({O, C / G, KH, KW}, seq(O * C / G * KH * KW, 1.0f, 0.0f, 8));
  const Buf bias = tf({O}, seq(O, 1.0f, 0.0f, 9));
  const Buf y = run1(OpKind::Conv, a, {&x, &w, &bias});
  const int64_t OH = y.meta.shape[2], OW = y.meta.shape[3];
  const auto xv = x.f(), wv = w.f(), bv = bias.f();
  auto xat = [&](int64_t n, int64_t c, int64_t h, int64_t ww) -> double {
    if (h < 0 || h >= H || ww < 0 || ww >= W) return 0.0;
    return xv[((n * C + c) * H + h) * W + ww];
  };
  std::vector<double> want;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double s = bv[o];
          const int64_t g = o / (O / G);
          for (int64_t c = 0; c < C / G; ++c)
            for (int64_t p = 0; p < KH; ++p)
              for (int64_t q = 0; q < KW; ++q)
                s += xat(n, g * (C / G) + c, i * 2 - 1 + p, j - 1 + 2 * q) *
                     wv[((o * (C / G) + c) * KH + p) * KW + q];
          want.push_back(s);
        }
  check_close(y.f(), want, 1e-5, 1e-5);

  // Gradients through the adjoint identity <conv(x), dy> = <x, dx(dy)> = <w, dw(x, dy)>.
  const Buf dy = tf(y.meta.shape, seq(numel(y.meta.shape), 1.0f, 0.0f, 10));
  Attrs bi = a;
  bi.shape = x.meta.shape;
  const auto dx = run1(OpKind::ConvBackwardInput, bi, {&dy, &w}).f();
  Attrs bw = a;
  bw.shape = w.meta.shape;
  const auto dw = run1(OpKind::ConvBackwardWeight, bw, {&x, &dy}).f();
  const auto dyv = dy.f();
  double lhs = 0, rx = 0, rw = 0;
  for (size_t i = 0; i < dyv.size(); ++i) {
    const int64_t o = static_cast<int64_t>(i / static_cast<size_t>(OH * OW)) % O;
    lhs += (want[i] - bv[o]) * dyv[i];
  }
  for (size_t i = 0; i < xv.size(); ++i) rx += static_cast<double>(xv[i]) * dx[i];
  for (size_t i = 0; i < wv.size(); ++i) rw += static_cast<double>(wv[i]) * dw[i];
  CHECK(std::fabs(lhs - rx) < 1e-4 * (1 + std::fabs(lhs)));
  CHECK(std::fabs(lhs - rw) < 1e-4 * (1 + std::fabs(lhs)));
  // A mismatched output gradient is an error, not an out-of-bounds read.
  const Buf dy_bad =
      tf({N, O, OH + 1, OW}, std::vector<float>(static_cast<size_t>(N * O * (OH + 1) * OW)));
  CHECK_THROWS_AS(run1(OpKind::ConvBackwardInput, bi, {&dy_bad, &w}), Error);
}

// ---- pooling ------------------------------------------------------------------------------

TEST_CASE("max pool with padding, indices and backward", "[kernels]") {
  const int64_t H = 5, W = 6;
  const auto xv = seq(2 * H * W, 1.0f, 0.0f, 12);
  const Buf x = tf({1, 2, H, W}, xv);
  Attrs a;
  a.kernel = {3, 2};
  a.stride = {2, 2};
  a.padding = {1, 1};
  auto r = run(OpKind::MaxPool, a, {&x});
  const int64_t OH = r[0].meta.shape[2], OW = r[0].meta.shape[3];
  CHECK(OH == 3);
  CHECK(OW == 4);
  const auto y = r[0].f();
  const auto ix = r[1].as<int64_t>();
  for (int64_t pl = 0; pl < 2; ++pl)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double best = -1e300;
        int64_t bi = -1;
        for (int64_t p = 0; p < 3; ++p)
          for (int64_t q = 0; q < 2; ++q) {
            const int64_t h = i * 2 - 1 + p, w = j * 2 - 1 + q;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            if (xv[pl * H * W + h * W + w] > best) {
              best = xv[pl * H * W + h * W + w];
              bi = h * W + w;
            }
          }
        CHECK(y[(pl * OH + i) * OW + j] == best);
        CHECK(ix[(pl * OH + i) * OW + j] == bi);
      }
  const Buf dy = tf(r[0].meta.shape, seq(2 * OH * OW, 1.0f, 0.0f, 13));
  Attrs b = a;
  b.shape = x.meta.shape;
  const auto dx = run1(OpKind::MaxPoolBackward, b, {&dy, &r[1]}).f();
  std::vector<double> want(2 * H * W, 0.0);
  const auto dyv = dy.f();
  for (int64_t pl = 0; pl < 2; ++pl)
    for (int64_t e = 0; e < OH * OW; ++e)
      want[pl * H * W + ix[pl * OH * OW + e]] += dyv[pl * OH * OW + e];
  check_close(dx, want);
  // Ties: the first maximum in the window wins.
  const Buf t = tf({1, 1, 2, 2}, {4, 4, 4, 4});
  Attrs ta;
  ta.kernel = {2, 2};
  ta.stride = {2, 2};
  ta.padding = {0, 0};
  CHECK(run(OpKind::MaxPool, ta, {&t})[1].as<int64_t>() == std::vector<int64_t>{0});
  const Buf badix =
      ti64(r[1].meta.shape, std::vector<int64_t>(static_cast<size_t>(2 * OH * OW), 99));
  CHECK_THROWS_AS(run1(OpKind::MaxPoolBackward, b, {&dy, &badix}), Error);
}

TEST_CASE("avg pool divisor rules and backward", "[kernels]") {
  const int64_t H = 5, W = 4;
  const auto xv = seq(H * W, 1.0f, 0.0f, 14);
  const Buf x = tf({1, 1, H, W}, xv);
  for (bool include_pad : {false, true}) {
    INFO("count_include_pad " << include_pad);
    Attrs a;
    a.kernel = {3, 3};
    a.stride = {2, 2};
    a.padding = {1, 1};
    a.flag = include_pad;
    const Buf y = run1(OpKind::AvgPool, a, {&x});
    const int64_t OH = y.meta.shape[2], OW = y.meta.shape[3];
    std::vector<double> want;
    std::vector<std::vector<std::pair<int64_t, double>>> taps;
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double s = 0;
        int64_t valid = 0, padded = 0;
        std::vector<int64_t> cells;
        for (int64_t p = 0; p < 3; ++p)
          for (int64_t q = 0; q < 3; ++q) {
            const int64_t h = i * 2 - 1 + p, w = j * 2 - 1 + q;
            // Cells inside the padded frame [-1, H+1) x [-1, W+1) count when padding is included.
            if (h < H + 1 && w < W + 1) ++padded;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            s += xv[h * W + w];
            ++valid;
            cells.push_back(h * W + w);
          }
        const double div = include_pad ? padded : valid;
        want.push_back(s / div);
        taps.emplace_back();
        for (auto c : cells) taps.back().emplace_back(c, 1.0 / div);
      }
    check_close(y.f(), want);
    const Buf dy = tf(y.meta.shape, seq(OH * OW, 1.0f, 0.0f, 15));
    Attrs b = a;
    b.shape = x.meta.shape;
    const auto dyv = dy.f();
    std::vector<double> dx(H * W, 0.0);
    for (size_t o = 0; o < taps.size(); ++o)
      for (auto [c, wgt] : taps[o]) dx[c] += dyv[o] * wgt;
    check_close(run1(OpKind::AvgPoolBackward, b, {&dy}).f(), dx);
  }
}

TEST_CASE("adaptive avg pool with non-divisible sizes", "[kernels]") {
  const int64_t H = 5, W = 7, OH = 3, OW = 4;
  const auto xv = seq(2 * H * W, 1.0f, 0.0f, 16);
  const Buf x = tf({2, 1, H, W}, xv);
  Attrs a;
  a.shape = {OH, OW};
  const Buf y = run1(OpKind::AdaptiveAvgPool, a, {&x});
  std::vector<double> want;
  const Buf dy = tf({2, 1, OH, OW}, seq(2 * OH * OW, 1.0f, 0.0f, 17));
  const auto dyv = dy.f();
  std::vector<double> dx(2 * H * W, 0.0);
  for (int64_t pl = 0; pl < 2; ++pl)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        const int64_t h0 = static_cast<int64_t>(std::floor(double(i) * H / OH));
        const int64_t h1 = static_cast<int64_t>(std::ceil(double(i + 1) * H / OH));
        const int64_t w0 = static_cast<int64_t>(std::floor(double(j) * W / OW));
        const int64_t w1 = static_cast<int64_t>(std::ceil(double(j + 1) * W / OW));
        double s = 0;
        const double cnt = static_cast<double>((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) {
            s += xv[pl * H * W + h * W + w];
            dx[pl * H * W + h * W + w] += dyv[(pl * OH + i) * OW + j] / cnt;
          }
        want.push_back(s / cnt);
      }
  check_close(y.f(), want);
  Attrs b;
  b.shape = x.meta.shape;
  check_close(run1(OpKind::AdaptiveAvgPoolBackward, b, {&dy}).f(), dx);
}

// ---- determinism --------------------------------------------------------------------------

TEST_CASE("big elementwise and reduction calls are bit-identical with 1 and 2 threads",
          "[kernels]") {
  const int64_t n = (1 << 20) + 7;
  const Buf x = tf({n}, seq(n, 3.0f, 0.0f, 31));
  const Buf y = tf({n}, seq(n, 3.0f, 0.0f, 32));
  const Buf m = tf({1031, 1017}, seq(1031 * 1017, 3.0f, 0.0f, 33));
  const Buf row = tf({1017}, seq(1017, 1.0f, 0.0f, 34));
  Attrs gelu;
  gelu.mode = 0;
  auto all = [&] {
    std::vector<std::vector<float>> r;
    r.push_back(run1(OpKind::Exp, {}, {&x}).f());
    r.push_back(run1(OpKind::Tanh, {}, {&x}).f());
    r.push_back(run1(OpKind::Gelu, gelu, {&x}).f());
    r.push_back(run1(OpKind::GeluGrad, gelu, {&y, &x}).f());
    r.push_back(run1(OpKind::Add, {}, {&x, &y}).f());
    r.push_back(run1(OpKind::Mul, {}, {&m, &row}).f());
    r.push_back(run1(OpKind::Sum, dims_attrs({}), {&x}).f());
    r.push_back(run1(OpKind::Sum, dims_attrs({1}), {&m}).f());
    r.push_back(run1(OpKind::Sum, dims_attrs({0}), {&m}).f());
    r.push_back(run1(OpKind::Amax, dims_attrs({1}), {&m}).f());
    r.push_back(run1(OpKind::Softmax, dims_attrs({1}), {&m}).f());
    r.push_back(run1(OpKind::LogSoftmax, dims_attrs({0}), {&m}).f());
    r.push_back(run1(OpKind::Permute, dims_attrs({1, 0}), {&m}).f());
    return r;
  };
  set_num_threads(1);
  const auto one = all();
  set_num_threads(2);
  const auto two = all();
  set_num_threads(0);
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("result " << i);
    CHECK(bits_equal(one[i], two[i]));
  }
}

TEST_CASE("in-place calls: exact aliasing for elementwise ops, copies otherwise", "[kernels]") {
  std::vector<float> v(12);
  std::iota(v.begin(), v.end(), 0.0f);
  const std::vector<float> b{1, 2, 3};
  ir::TensorMeta m{{4, 3}, kFloat32};
  cpu::run_kernel(OpKind::Add, {}, {{v.data(), m}, {b.data(), {{3}, kFloat32}}}, {{v.data(), m}});
  for (int i = 0; i < 12; ++i) CHECK(v[i] == static_cast<float>(i + 1 + i % 3));
  // A square transpose into its own input must not read overwritten elements.
  std::vector<float> sq(16);
  std::iota(sq.begin(), sq.end(), 0.0f);
  ir::TensorMeta ms{{4, 4}, kFloat32};
  cpu::run_kernel(OpKind::Permute, dims_attrs({1, 0}), {{sq.data(), ms}}, {{sq.data(), ms}});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) CHECK(sq[i * 4 + j] == static_cast<float>(j * 4 + i));
  std::vector<float> e(5, 1.0f);
  ir::TensorMeta me{{5}, kFloat32};
  cpu::run_kernel(OpKind::Softmax, dims_attrs({0}), {{e.data(), me}}, {{e.data(), me}});
  for (float x : e) CHECK(x == Approx(0.2f));
}

TEST_CASE("kernel errors name the op", "[kernels]") {
  const Buf x = tf({2}, {1, 2});
  std::vector<cpu::ConstBuffer> in{{x.bytes.data(), x.meta}};
  std::vector<cpu::MutableBuffer> none;
  CHECK_THROWS_AS(cpu::run_kernel(OpKind::Exp, {}, in, none), Error);
  const Buf i = ti64({2}, {1, 2});
  std::vector<float> out(2);
  std::vector<cpu::ConstBuffer> iin{{i.bytes.data(), i.meta}};
  std::vector<cpu::MutableBuffer> o{{out.data(), {{2}, kFloat32}}};
  CHECK_THROWS_WITH(cpu::run_kernel(OpKind::Exp, {}, iin, o), Catch::Contains("Exp"));
}
