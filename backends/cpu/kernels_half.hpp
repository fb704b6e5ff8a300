// Half-precision compute on the CPU: float16/bfloat16 operands are widened to float32, the op
// runs in float32 and each half result is rounded once to nearest even. That is the arithmetic
// of an IPU vertex with float accumulators ("16.32"); half partials and stochastic rounding are
// the IPU executor's (it rounds where its plan does). Creation, casts and data movement handle
// every dtype themselves and never come here.
#pragma once

#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/backends/cpu/kernels_common.hpp>

namespace ipuml::cpu::kdetail {

#if defined(__x86_64__)
// F16C converts 8 values an instruction with the same IEEE rounding (to nearest even,
// subnormals kept) as half_bits_to_float / float_to_half_bits; NaNs keep their top payload bits
// where the portable code writes the canonical quiet NaN. Used unless IPUML_CPU_ISA=generic.
inline bool f16c_enabled() {
  // CPUID leaf 1, ECX bit 29; the AVX state it needs is what detected_isa() checked for AVX2.
  static const bool cpu = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0 &&
           detected_isa() != Isa::generic;
  }();
  return cpu && active_isa() != Isa::generic;
}

__attribute__((target("avx,f16c"))) inline void widen_f16c(const uint16_t* h, float* dst,
                                                           int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) dst[i] = half_bits_to_float(h[i]);
}

__attribute__((target("avx,f16c"))) inline void narrow_f16c(const float* src, uint16_t* h,
                                                            int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) h[i] = float_to_half_bits(src[i]);
}
#else
inline bool f16c_enabled() { return false; }
inline void widen_f16c(const uint16_t*, float*, int64_t) {}
inline void narrow_f16c(const float*, uint16_t*, int64_t) {}
#endif

using ipuml::is_half;

// Ops whose kernels move or create elements of any dtype without arithmetic.
inline bool dtype_generic(ir::OpKind k) { return ir::op_has(k, ir::kRaw); }

inline void widen(DType t, const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  const bool fast = t == DType::Float16 && f16c_enabled();
  parallel_blocks(n, kBlock * 4, [&](int64_t b, int64_t e) {
    if (fast)
      widen_f16c(h + b, dst + b, e - b);
    else if (t == DType::Float16)
      for (int64_t i = b; i < e; ++i) dst[i] = half_bits_to_float(h[i]);
    else
      for (int64_t i = b; i < e; ++i) dst[i] = bf16_bits_to_float(h[i]);
  });
}

inline void narrow(DType t, const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  const bool fast = t == DType::Float16 && f16c_enabled();
  parallel_blocks(n, kBlock * 4, [&](int64_t b, int64_t e) {
    if (fast)
      narrow_f16c(src + b, h + b, e - b);
    else if (t == DType::Float16)
      for (int64_t i = b; i < e; ++i) h[i] = float_to_half_bits(src[i]);
    else
      for (int64_t i = b; i < e; ++i) h[i] = float_to_bf16_bits(src[i]);
  });
}

}  // namespace ipuml::cpu::kdetail
