// Internal to the CPU backend: exp, tanh and erf of float arrays, 16 lanes at a time on AVX-512
// and 8 on AVX2 (chosen by active_isa()), with the bits of xsimd::exp, xsimd::tanh and xsimd::erf
// on xsimd::batch<float> as the library compiles them (the baseline x86-64 target: SSE2, 4
// lanes, no fused multiply-add), which is also the generic path. Not a public API.
//
// xsimd's algorithms are sequences of IEEE operations that each round once: products, sums,
// quotients, comparisons, selections and bit operations. The wide paths perform the same
// operations in the same order, so every lane rounds as xsimd's does; a lane's result depends on
// its input alone, so where a value falls in a vector (or in a tail under a mask) changes
// nothing. Three things need care:
// - Fusion. xsimd's generic fma(x, y, z) is x * y + z, two roundings. GCC contracts a product
//   feeding a sum into one fused multiply-add in functions whose target has FMA (with
//   -ffp-contract=fast, GNU C's default), also when written with _mm*_mul_ps / _mm*_add_ps, which
//   GCC treats as plain vector arithmetic. AVX-512 products here use the rounding-mode form of
//   the multiply (a builtin, not an arithmetic expression, so never contracted); AVX2 products
//   pass through an empty asm, which hides them from the optimiser.
// - Rounding to an integer. xsimd's nearbyint on SSE2 adds and subtracts 2^23 (with the sign
//   restored), which is round-to-nearest-even for every float; the round instruction gives the
//   same value.
// - NaN. Where an operation meets two NaNs x86 returns the first operand's, and xsimd's code
//   meets a NaN and its negation (fnma is -(x * y) + z, erf squares -|x| * |x|): the sign of the
//   NaN it returns follows the compiler's operand order, not the arithmetic. As GCC 12 compiles
//   it (-O0 to -O3 alike, and in the kernels that used it), a NaN input gives back its payload,
//   quieted, with the sign flipped by exp and tanh and cleared by erf; the wide paths set that
//   result for NaN inputs explicitly. (Clang -O2 orders the operands otherwise, and so changes
//   xsimd's own NaN signs: exp and tanh keep them there.)
#pragma once

#include <ipuml/backends/cpu/cpu_features.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>

#include <xsimd/xsimd.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IPUML_VMATH_X86 1
#endif

namespace ipuml::cpu {

namespace vmath_detail {

enum class Fn { exp, tanh, erf };

// ---- the constants of xsimd's float kernels (their bit patterns) ----------------------------

inline constexpr float kInvLog2 = 1.44269504088896340736f;  // 1/log(2)
inline constexpr uint32_t kLog2Hi = 0x3f318000u;            // log(2) = kLog2Hi + kLog2Lo
inline constexpr uint32_t kLog2Lo = 0xb95e8083u;
inline constexpr float kMaxLog = 88.3762626647949f;   // exp gives inf from here
inline constexpr float kMinLog = -88.3762626647949f;  // and 0 up to here
// exp(r) = 1 + r + r^2 * P(r) on |r| <= log(2) / 2; coefficients of r^0 .. r^4.
inline constexpr uint32_t kExpP[] = {0x3f000000u, 0x3e2aa9a5u, 0x3d2aa957u, 0x3c098d8bu,
                                     0x3ab778cfu};
// tanh(x) = x + x * x^2 * P(x^2) on |x| < 0.625.
inline constexpr uint32_t kTanhP[] = {0xbeaaaa99u, 0x3e088393u, 0xbd5c1e2du, 0x3ca9134eu,
                                      0xbbbaf0eau};
// erf(x) = x * P(x^2) on |x| < 2/3.
inline constexpr uint32_t kErfP[] = {0x3f906ebau, 0xbec0937eu, 0x3de70f22u,
                                     0xbcdb61f4u, 0x3ba4468du, 0xba1fc83bu};
// erfc(x) * exp(x^2) = Q(x / (1 + x) - 0.4) on x >= 2/3.
inline constexpr uint32_t kErfcQ[] = {0x3f0a0e8bu, 0xbf918a62u, 0x3e243828u, 0x3ec4ca6eu,
                                      0x3e1175c7u, 0x3e2006f0u, 0xbfaea865u, 0x4050b063u,
                                      0xc0cd1a85u, 0x40d67e3bu, 0xc0283611u};
inline constexpr float kTanhSwitch = 0.625f;  // 5 / 8
inline constexpr float kErfSwitch = 2.0f / 3.0f;
inline constexpr float kErfShift = 0.4f;
inline constexpr uint32_t kQuietBit = 0x00400000u;

constexpr float f32(uint32_t bits) { return std::bit_cast<float>(bits); }

// ---- generic: xsimd's own functions on its baseline batch -----------------------------------

template <Fn F>
inline xsimd::batch<float> apply_batch(xsimd::batch<float> v) {
  if constexpr (F == Fn::exp)
    return xsimd::exp(v);
  else if constexpr (F == Fn::tanh)
    return xsimd::tanh(v);
  else
    return xsimd::erf(v);
}

template <Fn F>
void map_generic(const float* x, float* y, int64_t n) {
  using B = xsimd::batch<float>;
  constexpr int64_t w = static_cast<int64_t>(B::size);
  int64_t i = 0;
  for (; i + w <= n; i += w) apply_batch<F>(B::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) float buf[B::size] = {};
    std::memcpy(buf, x + i, static_cast<size_t>(n - i) * sizeof(float));
    apply_batch<F>(B::load_aligned(buf)).store_aligned(buf);
    std::memcpy(y + i, buf, static_cast<size_t>(n - i) * sizeof(float));
  }
}

#ifdef IPUML_VMATH_X86

// ---- AVX-512, 16 lanes ------------------------------------------------------------------------

#define IPUML_VM512 [[gnu::target("avx512f"), gnu::always_inline]] inline

IPUML_VM512 __m512 c16(float v) { return _mm512_set1_ps(v); }
IPUML_VM512 __m512 c16(uint32_t bits) { return _mm512_castsi512_ps(_mm512_set1_epi32(int(bits))); }
// A product that is never fused with a following sum: one rounding, as SSE2's mulps.
IPUML_VM512 __m512 mul16(__m512 a, __m512 b) {
  // (The zero-masking form with every lane set: the plain one trips GCC 12's -Wmaybe-uninitialized
  // on its undefined pass-through operand.)
  return _mm512_maskz_mul_round_ps(__mmask16(0xFFFF), a, b,
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
IPUML_VM512 __m512 and16(__m512 a, uint32_t bits) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(int(bits))));
}
IPUML_VM512 __m512 or16(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
IPUML_VM512 __m512 xor16(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
// c[0] + v * (c[1] + v * (... + v * c[N-1])), each step a product then a sum.
template <size_t N, size_t... I>
IPUML_VM512 __m512 poly16(__m512 v, const uint32_t (&c)[N], std::index_sequence<I...>) {
  __m512 h = c16(c[N - 1]);
  ((h = _mm512_add_ps(mul16(v, h), c16(c[N - 2 - I]))), ...);
  return h;
}
template <size_t N>
IPUML_VM512 __m512 poly16(__m512 v, const uint32_t (&c)[N]) {
  return poly16(v, c, std::make_index_sequence<N - 1>{});
}

IPUML_VM512 __m512 exp16(__m512 a) {
  // a = k log(2) + r: k the nearest integer to a / log(2), r in two steps (log(2) in two parts).
  const __m512 k = _mm512_maskz_roundscale_ps(__mmask16(0xFFFF), mul16(c16(kInvLog2), a),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_sub_ps(a, mul16(k, c16(kLog2Hi)));
  r = _mm512_sub_ps(r, mul16(k, c16(kLog2Lo)));
  // exp(r), then times 2^k built in the exponent field (k + 127 wraps as 32-bit integers do).
  __m512 e = _mm512_add_ps(mul16(poly16(r, kExpP), mul16(r, r)), r);
  e = _mm512_add_ps(e, c16(1.0f));
  const __mmask16 all = 0xFFFF;
  const __m512i k2 = _mm512_maskz_slli_epi32(
      all, _mm512_add_epi32(_mm512_maskz_cvttps_epi32(all, k), _mm512_set1_epi32(127)), 23);
  e = mul16(e, _mm512_castsi512_ps(k2));
  e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, c16(kMinLog), _CMP_LE_OQ), e, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, c16(kMaxLog), _CMP_GE_OQ), e, c16(0x7f800000u));
}

IPUML_VM512 __m512 tanh16(__m512 v) {
  const __m512 x = and16(v, 0x7fffffffu), sign = and16(v, 0x80000000u);
  const __mmask16 small = _mm512_cmp_ps_mask(x, c16(kTanhSwitch), _CMP_LT_OQ);
  __m512 z = _mm512_setzero_ps();
  if (small != 0) {  // x + x * (x^2 P(x^2))
    const __m512 x2 = mul16(x, x);
    z = _mm512_add_ps(mul16(mul16(poly16(x2, kTanhP), x2), x), x);
  }
  if (small != 0xFFFF) {  // 1 - 2 / (1 + exp(2x))
    const __m512 q = _mm512_div_ps(c16(1.0f), _mm512_add_ps(c16(1.0f), exp16(_mm512_add_ps(x, x))));
    z = _mm512_mask_blend_ps(small, _mm512_add_ps(mul16(c16(-2.0f), q), c16(1.0f)), z);
  }
  z = xor16(z, sign);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(nan, z, xor16(or16(v, c16(kQuietBit)), c16(0x80000000u)));
}

IPUML_VM512 __m512 erf16(__m512 v) {
  const __m512 x = and16(v, 0x7fffffffu);
  const __mmask16 small = _mm512_cmp_ps_mask(x, c16(kErfSwitch), _CMP_LT_OQ);
  __m512 r = _mm512_setzero_ps();
  if (small != 0) r = mul16(v, poly16(mul16(x, x), kErfP));
  if (small != 0xFFFF) {  // 1 - exp(-x^2) Q(x / (1 + x) - 0.4), the sign of v
    const __m512 z = _mm512_sub_ps(_mm512_div_ps(x, _mm512_add_ps(c16(1.0f), x)), c16(kErfShift));
    const __m512 ex = exp16(mul16(xor16(x, c16(0x80000000u)), x));
    __m512 big = _mm512_sub_ps(c16(1.0f), mul16(ex, poly16(z, kErfcQ)));
    const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
    big = _mm512_mask_blend_ps(neg, big, xor16(big, c16(0x80000000u)));
    r = _mm512_mask_blend_ps(small, big, r);
    // erf(+-inf) = +-1
    const __mmask16 inf = _mm512_cmp_ps_mask(x, c16(0x7f800000u), _CMP_EQ_OQ);
    r = _mm512_mask_blend_ps(inf, r, or16(c16(1.0f), and16(v, 0x80000000u)));
  }
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(nan, r, and16(or16(v, c16(kQuietBit)), 0x7fffffffu));
}

template <Fn F>
IPUML_VM512 __m512 apply16(__m512 v) {
  if constexpr (F == Fn::exp) {
    const __m512 e = exp16(v);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(nan, e, xor16(or16(v, c16(kQuietBit)), c16(0x80000000u)));
  } else if constexpr (F == Fn::tanh) {
    return tanh16(v);
  } else {
    return erf16(v);
  }
}

template <Fn F>
[[gnu::target("avx512f")]] void map_avx512(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, apply16<F>(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, m, apply16<F>(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

#undef IPUML_VM512

// ---- AVX2, 8 lanes ----------------------------------------------------------------------------

#define IPUML_VM256 [[gnu::target("avx2"), gnu::always_inline]] inline

IPUML_VM256 __m256 c8(float v) { return _mm256_set1_ps(v); }
IPUML_VM256 __m256 c8(uint32_t bits) { return _mm256_castsi256_ps(_mm256_set1_epi32(int(bits))); }
// A product that is never fused with a following sum: the empty asm hides it from the optimiser
// (in a function that can use FMA, as under -mfma or -march=native, GCC would otherwise fuse).
IPUML_VM256 __m256 mul8(__m256 a, __m256 b) {
  __m256 p = _mm256_mul_ps(a, b);
  __asm__("" : "+x"(p));
  return p;
}
template <size_t N, size_t... I>
IPUML_VM256 __m256 poly8(__m256 v, const uint32_t (&c)[N], std::index_sequence<I...>) {
  __m256 h = c8(c[N - 1]);
  ((h = _mm256_add_ps(mul8(v, h), c8(c[N - 2 - I]))), ...);
  return h;
}
template <size_t N>
IPUML_VM256 __m256 poly8(__m256 v, const uint32_t (&c)[N]) {
  return poly8(v, c, std::make_index_sequence<N - 1>{});
}

IPUML_VM256 __m256 exp8(__m256 a) {
  const __m256 k =
      _mm256_round_ps(mul8(c8(kInvLog2), a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_sub_ps(a, mul8(k, c8(kLog2Hi)));
  r = _mm256_sub_ps(r, mul8(k, c8(kLog2Lo)));
  __m256 e = _mm256_add_ps(mul8(poly8(r, kExpP), mul8(r, r)), r);
  e = _mm256_add_ps(e, c8(1.0f));
  const __m256i k2 =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(k), _mm256_set1_epi32(127)), 23);
  e = mul8(e, _mm256_castsi256_ps(k2));
  e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(a, c8(kMinLog), _CMP_LE_OQ));
  return _mm256_blendv_ps(e, c8(0x7f800000u), _mm256_cmp_ps(a, c8(kMaxLog), _CMP_GE_OQ));
}

IPUML_VM256 __m256 tanh8(__m256 v) {
  const __m256 x = _mm256_and_ps(v, c8(0x7fffffffu)), sign = _mm256_and_ps(v, c8(0x80000000u));
  const __m256 small = _mm256_cmp_ps(x, c8(kTanhSwitch), _CMP_LT_OQ);
  const int bits = _mm256_movemask_ps(small);
  __m256 z = _mm256_setzero_ps();
  if (bits != 0) {
    const __m256 x2 = mul8(x, x);
    z = _mm256_add_ps(mul8(mul8(poly8(x2, kTanhP), x2), x), x);
  }
  if (bits != 0xFF) {
    const __m256 q = _mm256_div_ps(c8(1.0f), _mm256_add_ps(c8(1.0f), exp8(_mm256_add_ps(x, x))));
    z = _mm256_blendv_ps(_mm256_add_ps(mul8(c8(-2.0f), q), c8(1.0f)), z, small);
  }
  z = _mm256_xor_ps(z, sign);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_ps(z, _mm256_xor_ps(_mm256_or_ps(v, c8(kQuietBit)), c8(0x80000000u)), nan);
}

IPUML_VM256 __m256 erf8(__m256 v) {
  const __m256 x = _mm256_and_ps(v, c8(0x7fffffffu));
  const __m256 small = _mm256_cmp_ps(x, c8(kErfSwitch), _CMP_LT_OQ);
  const int bits = _mm256_movemask_ps(small);
  __m256 r = _mm256_setzero_ps();
  if (bits != 0) r = mul8(v, poly8(mul8(x, x), kErfP));
  if (bits != 0xFF) {
    const __m256 z = _mm256_sub_ps(_mm256_div_ps(x, _mm256_add_ps(c8(1.0f), x)), c8(kErfShift));
    const __m256 ex = exp8(mul8(_mm256_xor_ps(x, c8(0x80000000u)), x));
    __m256 big = _mm256_sub_ps(c8(1.0f), mul8(ex, poly8(z, kErfcQ)));
    const __m256 neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
    big = _mm256_blendv_ps(big, _mm256_xor_ps(big, c8(0x80000000u)), neg);
    r = _mm256_blendv_ps(big, r, small);
    const __m256 inf = _mm256_cmp_ps(x, c8(0x7f800000u), _CMP_EQ_OQ);
    r = _mm256_blendv_ps(r, _mm256_or_ps(c8(1.0f), _mm256_and_ps(v, c8(0x80000000u))), inf);
  }
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_ps(r, _mm256_and_ps(_mm256_or_ps(v, c8(kQuietBit)), c8(0x7fffffffu)), nan);
}

template <Fn F>
IPUML_VM256 __m256 apply8(__m256 v) {
  if constexpr (F == Fn::exp) {
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    return _mm256_blendv_ps(exp8(v), _mm256_xor_ps(_mm256_or_ps(v, c8(kQuietBit)), c8(0x80000000u)),
                            nan);
  } else if constexpr (F == Fn::tanh) {
    return tanh8(v);
  } else {
    return erf8(v);
  }
}

template <Fn F>
[[gnu::target("avx2")]] void map_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, apply8<F>(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n - i)),
                                         _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(y + i, m, apply8<F>(_mm256_maskload_ps(x + i, m)));
  }
}

#undef IPUML_VM256

#endif  // IPUML_VMATH_X86

template <Fn F>
void map(const float* x, float* y, int64_t n) {
  if (n <= 0) return;
#ifdef IPUML_VMATH_X86
  const Isa isa = active_isa();
  if (isa == Isa::avx512) return map_avx512<F>(x, y, n);
  if (isa == Isa::avx2) return map_avx2<F>(x, y, n);
#endif
  map_generic<F>(x, y, n);
}

}  // namespace vmath_detail

// y[i] = f(x[i]) for i < n, with the bits of xsimd's f on its baseline batch (see above) on
// every instruction set; y may be x.
namespace vmath {
inline void exp(const float* x, float* y, int64_t n) {
  vmath_detail::map<vmath_detail::Fn::exp>(x, y, n);
}
inline void tanh(const float* x, float* y, int64_t n) {
  vmath_detail::map<vmath_detail::Fn::tanh>(x, y, n);
}
inline void erf(const float* x, float* y, int64_t n) {
  vmath_detail::map<vmath_detail::Fn::erf>(x, y, n);
}
}  // namespace vmath

}  // namespace ipuml::cpu
