// CPU kernels of the creation, unary, cast, broadcasting binary, where and activation-gradient
// ops: contiguous fast paths, vmath and xsimd for transcendental functions, partition-independent
// results.
#pragma once

#include <ipuml/backends/cpu/kernels_common.hpp>
#include <ipuml/core/rng.hpp>

namespace ipuml::cpu::kdetail {

// ---- creation -------------------------------------------------------------------------------

inline void k_full(const ir::Attrs& a, const MutableBuffer& o) {
  const int64_t n = o.meta.numel();
  dispatch_all(o.meta.dtype, [&](auto tag) {
    using Tag = decltype(tag);
    using S = typename Tag::S;
    const S v = from_double<Tag>(a.scalar);
    S* y = out_ptr<S>(o);
    parallel_blocks(n, kBlock * 4, [&](int64_t b, int64_t e) { std::fill(y + b, y + e, v); });
  });
}

inline void k_arange(const ir::Attrs& a, const MutableBuffer& o) {
  const int64_t n = o.meta.numel();
  dispatch_all(o.meta.dtype, [&](auto tag) {
    using Tag = decltype(tag);
    using S = typename Tag::S;
    S* y = out_ptr<S>(o);
    parallel_blocks(n, kBlock, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        y[i] = from_double<Tag>(a.scalar + static_cast<double>(i) * a.scalar2);
    });
  });
}

inline void k_random(ir::OpKind k, const ir::Attrs& a, const MutableBuffer& o,
                     const KernelContext& ctx) {
  const RandomStream rs{a.seed, a.stream + (ctx.rng_step << 32)};
  const int64_t n = o.meta.numel();
  if (k == ir::OpKind::RandInt)
    IPUML_CHECK(a.end > a.start, "randint: expected start < end, got [", a.start, ", ", a.end, ")");
  dispatch_all(o.meta.dtype, [&](auto tag) {
    using Tag = decltype(tag);
    using S = typename Tag::S;
    S* y = out_ptr<S>(o);
    parallel_blocks(n, kBlock / 4, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const uint64_t ix = static_cast<uint64_t>(i);
        if (k == ir::OpKind::RandUniform) {
          if constexpr (std::is_same_v<Tag, F32>) {
            y[i] = static_cast<float>(a.scalar) +
                   (static_cast<float>(a.scalar2) - static_cast<float>(a.scalar)) * rs.uniform(ix);
          } else {
            y[i] = from_double<Tag>(a.scalar + (a.scalar2 - a.scalar) * rs.uniform(ix));
          }
        } else if (k == ir::OpKind::RandNormal) {
          if constexpr (std::is_same_v<Tag, F32>)
            y[i] = static_cast<float>(a.scalar) + static_cast<float>(a.scalar2) * rs.normal(ix);
          else
            y[i] = from_double<Tag>(a.scalar + a.scalar2 * rs.normal(ix));
        } else {
          y[i] = from_double<Tag>(static_cast<double>(rs.integer(ix, a.start, a.end)));
        }
      }
    });
  });
}

// ---- unary ----------------------------------------------------------------------------------

inline constexpr float kSqrt1_2 = 0.70710678118654752f;
inline constexpr float kSqrt2OverPi = 0.79788456080286536f;
inline constexpr float kInvSqrt2Pi = 0.39894228040143268f;
inline constexpr float kGeluC = 0.044715f;

// GELU of n floats, mode 1 the tanh approximation, 0 the erf form: y = x/2 (1 + tanh(..) or
// erf(x / sqrt(2))). y may be x.
inline void gelu_rows(const float* x, float* y, int64_t n, int64_t mode) {
  alignas(64) float t[kMathChunk];
  for (int64_t c = 0; c < n; c += kMathChunk) {
    const int64_t m = std::min(kMathChunk, n - c);
    const float* xc = x + c;
    if (mode == 1) {
      map_batch(xc, t, m,
                [](fbatch v) { return fbatch(kSqrt2OverPi) * (v + fbatch(kGeluC) * v * v * v); });
      vmath::tanh(t, t, m);
    } else {
      map_batch(xc, t, m, [](fbatch v) { return v * fbatch(kSqrt1_2); });
      vmath::erf(t, t, m);
    }
    map_batch2(xc, t, y + c, m,
               [](fbatch v, fbatch tv) { return fbatch(0.5f) * v * (fbatch(1.0f) + tv); });
  }
}

// dx = g * GELU'(x) over n floats (modes as gelu_rows); dx may be g or x.
inline void gelu_grad_rows(const float* g, const float* x, float* dx, int64_t n, int64_t mode) {
  alignas(64) float t[kMathChunk], p[kMathChunk];
  const fbatch half(0.5f), one(1.0f);
  for (int64_t c = 0; c < n; c += kMathChunk) {
    const int64_t m = std::min(kMathChunk, n - c);
    const float* xc = x + c;
    if (mode == 1) {
      map_batch(xc, t, m, [](fbatch v) {
        const fbatch x2 = v * v;
        return fbatch(kSqrt2OverPi) * (v + fbatch(kGeluC) * x2 * v);
      });
      vmath::tanh(t, t, m);
      map_batch2(xc, t, t, m, [&](fbatch v, fbatch tv) {
        const fbatch x2 = v * v;
        const fbatch dinner = fbatch(kSqrt2OverPi) * (one + fbatch(3.0f * kGeluC) * x2);
        return half * (one + tv) + half * v * (one - tv * tv) * dinner;
      });
    } else {
      map_batch(xc, t, m, [](fbatch v) { return v * fbatch(kSqrt1_2); });
      vmath::erf(t, t, m);
      map_batch(xc, p, m, [](fbatch v) { return fbatch(-0.5f) * v * v; });
      vmath::exp(p, p, m);
      map_batch3(xc, t, p, t, m, [&](fbatch v, fbatch ev, fbatch pv) {
        const fbatch cdf = half * (one + ev);
        const fbatch pdf = fbatch(kInvSqrt2Pi) * pv;
        return cdf + v * pdf;
      });
    }
    map_batch2(g + c, t, dx + c, m, [](fbatch gv, fbatch d) { return gv * d; });
  }
}

template <typename F>
void float_map(const ConstBuffer& in, const MutableBuffer& o, F&& f) {
  const float* x = in_ptr<float>(in);
  float* y = out_ptr<float>(o);
  parallel_blocks(o.meta.numel(), kBlock,
                  [&](int64_t b, int64_t e) { map_batch(x + b, y + b, e - b, f); });
}

// Elementwise with exact IEEE operations only: any vectorisation gives the same bits.
template <typename T, typename U, typename F>
void plain_map(const T* x, U* y, int64_t n, F&& f) {
  parallel_blocks(n, kBlock * 2, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

inline bool special_pow(const ConstBuffer& in, const MutableBuffer& o, double p) {
  const float* x = in_ptr<float>(in);
  float* y = out_ptr<float>(o);
  const int64_t n = o.meta.numel();
  if (p == 1.0)
    plain_map(x, y, n, [](float v) { return v; });
  else if (p == 2.0)
    plain_map(x, y, n, [](float v) { return v * v; });
  else if (p == 3.0)
    plain_map(x, y, n, [](float v) { return v * v * v; });
  else if (p == 0.0)
    plain_map(x, y, n, [](float) { return 1.0f; });
  else if (p == -1.0)
    plain_map(x, y, n, [](float v) { return 1.0f / v; });
  else if (p == 0.5)
    float_map(in, o, [](fbatch v) { return xsimd::sqrt(v); });
  else if (p == -0.5)
    float_map(in, o, [](fbatch v) { return fbatch(1.0f) / xsimd::sqrt(v); });
  else if (p == -2.0)
    plain_map(x, y, n, [](float v) { return 1.0f / (v * v); });
  else
    return false;
  return true;
}

inline void k_unary_float(ir::OpKind k, const ir::Attrs& a, const ConstBuffer& in,
                          const MutableBuffer& o) {
  using K = ir::OpKind;
  const char* name = ir::op_name(k);
  IPUML_CHECK(in.meta.dtype == DType::Float32, name, ": expected float32, got ",
              dtype_name(in.meta.dtype));
  const float* x = in_ptr<float>(in);
  float* y = out_ptr<float>(o);
  const int64_t n = o.meta.numel();
  switch (k) {
    case K::Exp:
      return parallel_blocks(n, kBlock,
                             [&](int64_t b, int64_t e) { vmath::exp(x + b, y + b, e - b); });
    case K::Log:
      return float_map(in, o, [](fbatch v) { return xsimd::log(v); });
    // The vector square root instruction, correctly rounded as std::sqrt is: the same bits. (A
    // loop over std::sqrt stays scalar: without -fno-math-errno each call keeps its errno path.)
    case K::Sqrt:
      return float_map(in, o, [](fbatch v) { return xsimd::sqrt(v); });
    case K::Rsqrt:
      return float_map(in, o, [](fbatch v) { return fbatch(1.0f) / xsimd::sqrt(v); });
    case K::Tanh:
      return parallel_blocks(n, kBlock,
                             [&](int64_t b, int64_t e) { vmath::tanh(x + b, y + b, e - b); });
    case K::Sigmoid:  // 1 / (1 + exp(-v)), exp(-v) through y
      return parallel_blocks(n, kBlock, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; c += kMathChunk) {
          const int64_t m = std::min(kMathChunk, e - c);
          map_batch(x + c, y + c, m, [](fbatch v) { return -v; });
          vmath::exp(y + c, y + c, m);
          map_batch(y + c, y + c, m, [](fbatch v) { return fbatch(1.0f) / (fbatch(1.0f) + v); });
        }
      });
    case K::Relu:
      return plain_map(x, y, n, [](float v) { return v < 0.0f ? 0.0f : v; });
    case K::Gelu: {
      const int64_t mode = a.mode;
      IPUML_CHECK(mode == 0 || mode == 1, "gelu: mode must be 0 (erf) or 1 (tanh), got ", mode);
      return parallel_blocks(n, kBlock,
                             [&](int64_t b, int64_t e) { gelu_rows(x + b, y + b, e - b, mode); });
    }
    case K::Clamp: {
      const float lo =
          a.flag ? static_cast<float>(a.scalar) : -std::numeric_limits<float>::infinity();
      const float hi =
          a.flag2 ? static_cast<float>(a.scalar2) : std::numeric_limits<float>::infinity();
      // NaN compares false both ways and so passes through, as in PyTorch.
      return plain_map(x, y, n, [lo, hi](float v) {
        v = v < lo ? lo : v;
        return v > hi ? hi : v;
      });
    }
    case K::PowScalar: {
      if (special_pow(in, o, a.scalar)) return;
      const float p = static_cast<float>(a.scalar);
      return plain_map(x, y, n, [p](float v) { return std::pow(v, p); });
    }
    default:
      fail(name, ": not a float unary op");
  }
}

// Neg, Abs, Sign on float32 / int32 / int64.
inline void k_unary_signed(ir::OpKind k, const ConstBuffer& in, const MutableBuffer& o) {
  using K = ir::OpKind;
  const int64_t n = o.meta.numel();
  auto run = [&](auto* x, auto* y) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
    if (k == K::Neg) {
      if constexpr (std::is_integral_v<T>)  // wraps at the minimum instead of overflowing
        plain_map(x, y, n,
                  [](T v) { return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v)); });
      else
        plain_map(x, y, n, [](T v) { return -v; });
    } else if (k == K::Abs) {
      if constexpr (std::is_integral_v<T>)
        plain_map(x, y, n, [](T v) {
          return v < 0 ? static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(v)) : v;
        });
      else
        plain_map(x, y, n, [](T v) { return std::fabs(v); });
    } else {
      plain_map(x, y, n, [](T v) { return static_cast<T>((T(0) < v) - (v < T(0))); });
    }
  };
  switch (in.meta.dtype) {
    case DType::Float32:
      return run(in_ptr<float>(in), out_ptr<float>(o));
    case DType::Int32:
      return run(in_ptr<int32_t>(in), out_ptr<int32_t>(o));
    case DType::Int64:
      return run(in_ptr<int64_t>(in), out_ptr<int64_t>(o));
    default:
      bad_dtype(ir::op_name(k), in.meta.dtype);
  }
}

inline void k_copy(const ConstBuffer& in, const MutableBuffer& o) {
  const size_t bytes = std::min(in.meta.nbytes(), o.meta.nbytes());
  if (in.data == o.data || bytes == 0) return;
  const int64_t chunk = int64_t{1} << 18;
  const char* src = static_cast<const char*>(in.data);
  char* dst = static_cast<char*>(o.data);
  parallel_blocks(static_cast<int64_t>(bytes), chunk, [&](int64_t b, int64_t e) {
    std::memcpy(dst + b, src + b, static_cast<size_t>(e - b));
  });
}

inline void k_cast(const ConstBuffer& in, const MutableBuffer& o) {
  if (in.meta.dtype == o.meta.dtype) return k_copy(in, o);
  const int64_t n = o.meta.numel();
  dispatch_all(in.meta.dtype, [&](auto from) {
    dispatch_all(o.meta.dtype, [&](auto to) {
      using From = decltype(from);
      using To = decltype(to);
      const auto* x = in_ptr<typename From::S>(in);
      auto* y = out_ptr<typename To::S>(o);
      plain_map(x, y, n, [](typename From::S v) { return convert<From, To>(v); });
    });
  });
}

// ---- binary ---------------------------------------------------------------------------------

// Row loop of a binary op over one coalesced inner row with strides 0 or 1 on each side; the
// four stride patterns get their own loops so GCC vectorises the common ones.
template <typename A, typename B, typename O, typename F>
void binary_rows(const BroadcastPlan<2>& p, const A* a, const B* b, O* o, F f) {
  const int64_t sa = p.inner_stride[0], sb = p.inner_stride[1];
  for_each_row(p, [&](int64_t oo, const std::array<int64_t, 2>& off, int64_t len) {
    const A* x = a + off[0];
    const B* y = b + off[1];
    O* z = o + oo;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < len; ++i) z[i] = f(x[i], y[i]);
    } else if (sa == 1) {
      const B c = y[0];
      for (int64_t i = 0; i < len; ++i) z[i] = f(x[i], c);
    } else if (sb == 1) {
      const A c = x[0];
      for (int64_t i = 0; i < len; ++i) z[i] = f(c, y[i]);
    } else {
      const O v = f(x[0], y[0]);
      for (int64_t i = 0; i < len; ++i) z[i] = v;
    }
  });
}

template <typename T>
T max_nan(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    return (x > y || x != x) ? x : y;
  else
    return x > y ? x : y;
}
template <typename T>
T min_nan(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    return (x < y || x != x) ? x : y;
  else
    return x < y ? x : y;
}

// Integer add/sub/mul wrap modulo 2^n (as in PyTorch) instead of being undefined on overflow.
template <typename T, typename F>
T wrap_op(T x, T y, F f) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(f(static_cast<U>(x), static_cast<U>(y)));
}

// The comparisons of two bool tensors, which compare as 0/1 whatever nonzero byte stores true;
// false for the ops that take the bytes as they are (LogicalAnd).
inline bool compare_bools(ir::OpKind k, const BroadcastPlan<2>& p, const uint8_t* a8,
                          const uint8_t* b8, uint8_t* z) {
  using K = ir::OpKind;
  auto rows = [&](auto cmp) {
    binary_rows(p, a8, b8, z, [cmp](uint8_t x, uint8_t y) -> uint8_t {
      return cmp(uint8_t{x != 0}, uint8_t{y != 0});
    });
    return true;
  };
  switch (k) {
    case K::Eq:
      return rows(std::equal_to<>{});
    case K::Ne:
      return rows(std::not_equal_to<>{});
    case K::Lt:
      return rows(std::less<>{});
    case K::Le:
      return rows(std::less_equal<>{});
    case K::Gt:
      return rows(std::greater<>{});
    case K::Ge:
      return rows(std::greater_equal<>{});
    default:
      return false;
  }
}

inline void k_binary(ir::OpKind k, const ConstBuffer& ia, const ConstBuffer& ib,
                     const MutableBuffer& o) {
  using K = ir::OpKind;
  const char* name = ir::op_name(k);
  IPUML_CHECK(ia.meta.dtype == ib.meta.dtype, name, ": dtypes differ: ", dtype_name(ia.meta.dtype),
              " and ", dtype_name(ib.meta.dtype));
  IPUML_CHECK(broadcast_shapes(ia.meta.shape, ib.meta.shape, name) == o.meta.shape, name,
              ": output shape ", shape_str(o.meta.shape), " does not match the broadcast of ",
              shape_str(ia.meta.shape), " and ", shape_str(ib.meta.shape));
  const auto p = make_plan<2>(o.meta.shape, {&ia.meta.shape, &ib.meta.shape});
  const DType t = ia.meta.dtype;

  auto arith = [&](auto* a, auto* b) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(a)>>;
    T* z = out_ptr<T>(o);
    if constexpr (std::is_integral_v<T>) {
      switch (k) {
        case K::Add:
          return binary_rows(p, a, b, z, [](T x, T y) { return wrap_op(x, y, std::plus<>{}); });
        case K::Sub:
          return binary_rows(p, a, b, z, [](T x, T y) { return wrap_op(x, y, std::minus<>{}); });
        case K::Mul:
          return binary_rows(p, a, b, z,
                             [](T x, T y) { return wrap_op(x, y, std::multiplies<>{}); });
        default:
          break;
      }
    } else {
      switch (k) {
        case K::Add:
          return binary_rows(p, a, b, z, [](T x, T y) { return x + y; });
        case K::Sub:
          return binary_rows(p, a, b, z, [](T x, T y) { return x - y; });
        case K::Mul:
          return binary_rows(p, a, b, z, [](T x, T y) { return x * y; });
        case K::Div:
          return binary_rows(p, a, b, z, [](T x, T y) { return x / y; });
        case K::Pow:
          return binary_rows(p, a, b, z, [](T x, T y) { return std::pow(x, y); });
        default:
          break;
      }
    }
    if (k == K::Maximum) return binary_rows(p, a, b, z, [](T x, T y) { return max_nan(x, y); });
    if (k == K::Minimum) return binary_rows(p, a, b, z, [](T x, T y) { return min_nan(x, y); });
    bad_dtype(name, t);
  };
  auto compare = [&](auto* a, auto* b) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(a)>>;
    uint8_t* z = out_ptr<uint8_t>(o);
    auto u8 = [](bool v) { return static_cast<uint8_t>(v); };
    switch (k) {
      case K::Eq:
        return binary_rows(p, a, b, z, [u8](T x, T y) { return u8(x == y); });
      case K::Ne:
        return binary_rows(p, a, b, z, [u8](T x, T y) { return u8(x != y); });
      case K::Lt:
        return binary_rows(p, a, b, z, [u8](T x, T y) { return u8(x < y); });
      case K::Le:
        return binary_rows(p, a, b, z, [u8](T x, T y) { return u8(x <= y); });
      case K::Gt:
        return binary_rows(p, a, b, z, [u8](T x, T y) { return u8(x > y); });
      case K::Ge:
        return binary_rows(p, a, b, z, [u8](T x, T y) { return u8(x >= y); });
      case K::LogicalAnd:
        return binary_rows(p, a, b, z, [u8](T x, T y) { return u8(x != 0 && y != 0); });
      default:
        bad_dtype(name, t);
    }
  };
  if (ir::op_has(k, ir::kBool)) {
    IPUML_CHECK(o.meta.dtype == DType::Bool, name, ": output must be bool");
    if (k == K::LogicalAnd && t != DType::Bool) bad_dtype(name, t);
    switch (t) {
      case DType::Float32:
        return compare(in_ptr<float>(ia), in_ptr<float>(ib));
      case DType::Int32:
        return compare(in_ptr<int32_t>(ia), in_ptr<int32_t>(ib));
      case DType::Int64:
        return compare(in_ptr<int64_t>(ia), in_ptr<int64_t>(ib));
      case DType::Bool:
        if (compare_bools(k, p, in_ptr<uint8_t>(ia), in_ptr<uint8_t>(ib), out_ptr<uint8_t>(o)))
          return;
        return compare(in_ptr<uint8_t>(ia), in_ptr<uint8_t>(ib));
      default:
        bad_dtype(name, t);
    }
  }
  IPUML_CHECK(o.meta.dtype == t, name, ": output dtype ", dtype_name(o.meta.dtype),
              " differs from ", dtype_name(t));
  switch (t) {
    case DType::Float32:
      return arith(in_ptr<float>(ia), in_ptr<float>(ib));
    case DType::Int32:
      if (k == K::Div || k == K::Pow) bad_dtype(name, t);
      return arith(in_ptr<int32_t>(ia), in_ptr<int32_t>(ib));
    case DType::Int64:
      if (k == K::Div || k == K::Pow) bad_dtype(name, t);
      return arith(in_ptr<int64_t>(ia), in_ptr<int64_t>(ib));
    default:
      bad_dtype(name, t);
  }
}

inline void k_where(const ConstBuffer& c, const ConstBuffer& ia, const ConstBuffer& ib,
                    const MutableBuffer& o) {
  IPUML_CHECK(c.meta.dtype == DType::Bool, "where: condition must be bool, got ",
              dtype_name(c.meta.dtype));
  IPUML_CHECK(ia.meta.dtype == ib.meta.dtype && o.meta.dtype == ia.meta.dtype,
              "where: branch dtypes differ: ", dtype_name(ia.meta.dtype), " and ",
              dtype_name(ib.meta.dtype));
  IPUML_CHECK(broadcast_shapes(broadcast_shapes(c.meta.shape, ia.meta.shape, "where"),
                               ib.meta.shape, "where") == o.meta.shape,
              "where: output shape ", shape_str(o.meta.shape), " is not the broadcast shape");
  const auto p = make_plan<3>(o.meta.shape, {&c.meta.shape, &ia.meta.shape, &ib.meta.shape});
  dispatch_size(dtype_size(o.meta.dtype), [&](auto tag) {
    using T = decltype(tag);
    const uint8_t* cc = in_ptr<uint8_t>(c);
    const T* a = in_ptr<T>(ia);
    const T* b = in_ptr<T>(ib);
    T* z = out_ptr<T>(o);
    const auto s = p.inner_stride;
    for_each_row(p, [&](int64_t oo, const std::array<int64_t, 3>& off, int64_t len) {
      const uint8_t* c0 = cc + off[0];
      const T* a0 = a + off[1];
      const T* b0 = b + off[2];
      T* z0 = z + oo;
      if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
        for (int64_t i = 0; i < len; ++i) z0[i] = c0[i] ? a0[i] : b0[i];
      } else {
        for (int64_t i = 0; i < len; ++i) z0[i] = c0[i * s[0]] ? a0[i * s[1]] : b0[i * s[2]];
      }
    });
  });
}

inline void k_act_grad(ir::OpKind k, const ir::Attrs& a, const ConstBuffer& g, const ConstBuffer& x,
                       const MutableBuffer& o) {
  const char* name = ir::op_name(k);
  IPUML_CHECK(g.meta.dtype == DType::Float32 && x.meta.dtype == DType::Float32, name,
              ": expected float32 inputs");
  IPUML_CHECK(g.meta.shape == x.meta.shape && o.meta.numel() == g.meta.numel(), name,
              ": shapes differ: ", shape_str(g.meta.shape), " and ", shape_str(x.meta.shape));
  const float* gp = in_ptr<float>(g);
  const float* xp = in_ptr<float>(x);
  float* y = out_ptr<float>(o);
  const int64_t n = o.meta.numel();
  if (k == ir::OpKind::ReluGrad) {
    parallel_blocks(n, kBlock * 2, [&](int64_t b, int64_t e) {
      // The gradient is loaded unconditionally so the select vectorises (no branch per element).
      for (int64_t i = b; i < e; ++i) {
        const float gv = gp[i];
        y[i] = xp[i] > 0.0f ? gv : 0.0f;
      }
    });
    return;
  }
  const int64_t mode = a.mode;
  IPUML_CHECK(mode == 0 || mode == 1, "gelu_backward: mode must be 0 (erf) or 1 (tanh), got ",
              mode);
  parallel_blocks(
      n, kBlock, [&](int64_t b, int64_t e) { gelu_grad_rows(gp + b, xp + b, y + b, e - b, mode); });
}

}  // namespace ipuml::cpu::kdetail
