// y = act(x * scale[c] + shift[c] + residual) per channel c of an [N, C, ...] float32 tensor: the
// output pass of a batch norm, shared by its kernels and by a forward convolution that applies it
// to each piece of its output while the piece is still in cache (Conv -> BatchNormInference).
#pragma once

#include <ipuml/backends/cpu/cpu_features.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ipuml::cpu {

namespace detail {

inline void affine_act_generic(const float* x, const float* r, float* y, int64_t s, float scale,
                               float shift, bool relu) {
  if (r && relu) {
    for (int64_t j = 0; j < s; ++j) y[j] = std::max(x[j] * scale + shift + r[j], 0.0f);
  } else if (r) {
    for (int64_t j = 0; j < s; ++j) y[j] = x[j] * scale + shift + r[j];
  } else if (relu) {
    for (int64_t j = 0; j < s; ++j) y[j] = std::max(x[j] * scale + shift, 0.0f);
  } else {
    for (int64_t j = 0; j < s; ++j) y[j] = x[j] * scale + shift;
  }
}

#if defined(__x86_64__) || defined(__i386__)
// The same operations, 16 lanes at a time. The product is held in a register (the empty asm)
// so that it is never fused with the add into one multiply-add, which rounds once instead of
// twice: the bits stay the generic loop's. max(0, v) returns v when v is NaN and -0 for -0, as
// std::max(v, 0) does.
template <bool Residual, bool Relu>
__attribute__((target("avx512f"))) void affine_act_avx512(const float* x, const float* r, float* y,
                                                          int64_t s, float scale, float shift) {
  const __m512 vs = _mm512_set1_ps(scale), vb = _mm512_set1_ps(shift), zero = _mm512_setzero_ps();
  for (int64_t j = 0; j < s; j += 16) {
    const __mmask16 m = s - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (s - j)) - 1u);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), vs);
    __asm__("" : "+v"(v));
    v = _mm512_add_ps(v, vb);
    if constexpr (Residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, r + j));
    if constexpr (Relu) v = _mm512_maskz_max_ps(m, zero, v);  // (unmasked: a GCC 12 warning)
    _mm512_mask_storeu_ps(y + j, m, v);
  }
}
#endif

}  // namespace detail

// y[j] = act(x[j] * scale + shift + r[j]) for j < s (r may be null; x may be y), on AVX-512
// where the kernels use it, with the same bits on every path. Never inlined: inlined into a
// function compiled for AVX-512, the generic loop's x * scale + shift could contract to one fused
// multiply-add.
[[gnu::noinline]] inline void affine_act(const float* x, const float* r, float* y, int64_t s,
                                         float scale, float shift, bool relu) {
#if defined(__x86_64__) || defined(__i386__)
  if (active_isa() == Isa::avx512) {
    if (r && relu) return detail::affine_act_avx512<true, true>(x, r, y, s, scale, shift);
    if (r) return detail::affine_act_avx512<true, false>(x, r, y, s, scale, shift);
    if (relu) return detail::affine_act_avx512<false, true>(x, r, y, s, scale, shift);
    return detail::affine_act_avx512<false, false>(x, r, y, s, scale, shift);
  }
#endif
  detail::affine_act_generic(x, r, y, s, scale, shift, relu);
}

// A batch norm's per-channel scale and shift from its statistics (w, b may be null).
inline void batch_norm_affine(float mean, float var, const float* w, const float* b, int64_t c,
                              float eps, float& scale, float& shift) {
  const float rs = 1.0f / std::sqrt(var + eps);
  scale = w ? w[c] * rs : rs;
  shift = (b ? b[c] : 0.0f) - mean * scale;
}

// The pass as an epilogue over a tensor of `channels` channels of `plane` elements each:
// apply(y, p, j0, j1) updates elements [j0, j1) of channel plane p (p = image * channels + c),
// in place, y pointing at that plane.
struct ChannelAffine {
  const float* scale = nullptr;     // [channels]
  const float* shift = nullptr;     // [channels]
  const float* residual = nullptr;  // shaped like the tensor, or null
  bool relu = false;
  int64_t channels = 1, plane = 1;

  void apply(float* y, int64_t p, int64_t j0, int64_t j1) const {
    affine_act(y + j0, residual != nullptr ? residual + p * plane + j0 : nullptr, y + j0, j1 - j0,
               scale[p % channels], shift[p % channels], relu);
  }
};

// The pass seen from a piece of the tensor whose planes start at plane p0 (one image and group
// of a convolution's output): apply(y, o, j0, j1) with y pointing at plane p0. Empty (false)
// when there is no pass to apply.
struct ChannelAffineAt {
  const ChannelAffine* affine = nullptr;
  int64_t p0 = 0;

  explicit operator bool() const { return affine != nullptr; }
  void apply(float* y, int64_t o, int64_t j0, int64_t j1) const {
    affine->apply(y + o * affine->plane, p0 + o, j0, j1);
  }
  // Rows [o0, o1), elements [j0, j1) of each.
  void apply(float* y, int64_t o0, int64_t o1, int64_t j0, int64_t j1) const {
    for (int64_t o = o0; o < o1; ++o) apply(y, o, j0, j1);
  }
};

}  // namespace ipuml::cpu
