// Internal to the CPU backend: the forward of a stride-1 convolution whose reduction is a handful
// of taps (MNIST's conv1: 1 input channel x 3x3), on AVX2. Not a public API.
//
// With so short a reduction the wide GEMM (conv_impl.hpp) is all overhead: each 6 x 16 tile runs
// 9 steps of the micro-kernel between loading and storing C, and its columns on the padded row
// pitch go through scratch to be copied out. Here a vector of 8 output pixels of one row loads its
// K input vectors once (each tap's pixels are a contiguous run of the padded image), keeps them in
// registers, and every output channel is K fused multiply-adds with broadcast weights, stored
// straight into the NCHW output. Each output's sum runs over the taps in order from zero, then
// adds the bias, whatever the split over threads (images, or bands of rows for few images).
#pragma once

#include <ipuml/backends/cpu/gemm_kernels.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace ipuml::cpu::detail {

// The most taps the kernel keeps in registers: K input vectors, an accumulator and a broadcast
// weight among AVX2's 16.
constexpr int64_t kSmallKMaxTaps = 12;

// Whether the forward of a stride-1 convolution with reduction depth k takes this path.
inline bool small_k_forward(int64_t k) {
#ifdef IPUML_CPU_X86
  return active_isa() == Isa::avx2 && k >= 1 && k <= kSmallKMaxTaps;
#else
  (void)k;
  return false;
#endif
}

#ifdef IPUML_CPU_X86
// y[o][oy * ow + ox] = bias[o] + sum over t < K of w[o * K + t] * xp[taps[t] + oy * wp + ox] for
// m output channels and output rows [oy0, oy1) of one (padded) image; bias may be null.
template <int K>
__attribute__((target("avx2,fma"))) void small_k_rows_avx2(int64_t m, const int64_t* taps,
                                                           const float* w, const float* bias,
                                                           const float* xp, int64_t oh, int64_t ow,
                                                           int64_t wp, int64_t oy0, int64_t oy1,
                                                           float* y) {
  const int64_t plane = oh * ow;
  // Rows narrower than a vector load and store under a mask; wider ones end with a vector
  // flush with the row's end, overlapping the one before (those outputs are computed twice, the
  // same way).
  const bool narrow = ow < 8;
  alignas(32) int32_t mask_bits[8];
  for (int l = 0; l < 8; ++l) mask_bits[l] = l < ow ? -1 : 0;
  const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask_bits));
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    const float* row = xp + oy * wp;
    for (int64_t ox = 0; ox < ow; ox += 8) {
      const int64_t x0 = narrow ? 0 : std::min(ox, ow - 8);
      __m256 xv[K];
#pragma GCC unroll 12
      for (int t = 0; t < K; ++t)
        xv[t] =
            narrow ? _mm256_maskload_ps(row + taps[t], mask) : _mm256_loadu_ps(row + taps[t] + x0);
      float* yo = y + oy * ow + x0;
      for (int64_t o = 0; o < m; ++o, yo += plane) {
        const float* wo = w + o * K;
        __m256 acc = _mm256_setzero_ps();
#pragma GCC unroll 12
        for (int t = 0; t < K; ++t) acc = _mm256_fmadd_ps(_mm256_set1_ps(wo[t]), xv[t], acc);
        if (bias != nullptr) acc = _mm256_add_ps(acc, _mm256_set1_ps(bias[o]));
        if (narrow)
          _mm256_maskstore_ps(yo, mask, acc);
        else
          _mm256_storeu_ps(yo, acc);
      }
    }
  }
}

using SmallKRowsFn = void (*)(int64_t, const int64_t*, const float*, const float*, const float*,
                              int64_t, int64_t, int64_t, int64_t, int64_t, float*);

template <int... Ks>
SmallKRowsFn small_k_rows_for(int64_t k, std::integer_sequence<int, Ks...>) {
  SmallKRowsFn fn = nullptr;
  ((k == Ks + 1 ? (fn = small_k_rows_avx2<Ks + 1>, 0) : 0), ...);
  return fn;
}
// The kernel for reduction depth k (1 .. kSmallKMaxTaps).
inline SmallKRowsFn small_k_rows(int64_t k) {
  return small_k_rows_for(k, std::make_integer_sequence<int, int(kSmallKMaxTaps)>{});
}
#endif

}  // namespace ipuml::cpu::detail
