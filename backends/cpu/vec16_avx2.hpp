// Internal to the CPU backend: 16-lane float vectors (the Winograd transforms' WinoVec, one tile
// or channel per lane) loaded, gathered and stored as two AVX2 halves, with the masks that
// AVX-512 has in hardware held as two 8-lane integer masks. Not a public API.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace ipuml::cpu::detail {

// 16 lanes, one float each: GCC's vector extension (two ymm registers under AVX2).
typedef float Vec16 __attribute__((vector_size(64)));

// Which of 16 lanes take part: all bits set in a lane's 32 bits, or none.
struct Lanes16 {
  __m256i lo, hi;
};

// Lanes whose bit is set in `bits` (bit l for lane l).
__attribute__((target("avx2"))) inline Lanes16 lanes16_from_bits(uint32_t bits) {
  const __m256i shift = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32(int32_t(bits & 0xFFu)), shift);
  const __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32(int32_t((bits >> 8) & 0xFFu)), shift);
  const __m256i one = _mm256_set1_epi32(1);
  return {_mm256_cmpeq_epi32(_mm256_and_si256(lo, one), one),
          _mm256_cmpeq_epi32(_mm256_and_si256(hi, one), one)};
}
// The first n lanes (0 <= n <= 16).
__attribute__((target("avx2"))) inline Lanes16 lanes16_first(int64_t n) {
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_set1_epi32(int32_t(n)), hi = _mm256_set1_epi32(int32_t(n - 8));
  return {_mm256_cmpgt_epi32(lo, iota), _mm256_cmpgt_epi32(hi, iota)};
}

// (Vectors of 16 floats go by reference: returning one by value would need AVX-512's ABI.)
__attribute__((target("avx2"))) inline void vec16_join(__m256 lo, __m256 hi, Vec16& v) {
  std::memcpy(reinterpret_cast<char*>(&v), &lo, 32);
  std::memcpy(reinterpret_cast<char*>(&v) + 32, &hi, 32);
}
__attribute__((target("avx2"))) inline __m256 vec16_lo(const Vec16& v) {
  __m256 r;
  std::memcpy(&r, &v, 32);
  return r;
}
__attribute__((target("avx2"))) inline __m256 vec16_hi(const Vec16& v) {
  __m256 r;
  std::memcpy(&r, reinterpret_cast<const char*>(&v) + 32, 32);
  return r;
}

// p[0..16) where `keep`, zero elsewhere (lanes outside `keep` are not read).
__attribute__((target("avx2"))) inline void load16_avx2(const Lanes16& keep, const float* p,
                                                        Vec16& v) {
  vec16_join(_mm256_maskload_ps(p, keep.lo), _mm256_maskload_ps(p + 8, keep.hi), v);
}
// p[l] = v[l] where `keep` (lanes outside it are not written).
__attribute__((target("avx2"))) inline void store16_avx2(const Lanes16& keep, float* p,
                                                         const Vec16& v) {
  _mm256_maskstore_ps(p, keep.lo, vec16_lo(v));
  _mm256_maskstore_ps(p + 8, keep.hi, vec16_hi(v));
}
// base[idx[l]] for 8 lanes with idx[l] >= 0, zero for the others (their addresses are not read).
__attribute__((target("avx2"))) inline __m256 gather8_avx2(const int32_t* idx, const float* base) {
  const __m256i i = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx));
  const __m256 in = _mm256_castsi256_ps(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(-1)));
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, i, in, 4);
}
// The same for 16 lanes.
__attribute__((target("avx2"))) inline void gather16_avx2(const int32_t* idx, const float* base,
                                                          Vec16& v) {
  const __m256i i0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx));
  const __m256i i1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + 8));
  const __m256i none = _mm256_set1_epi32(-1);
  const __m256 z = _mm256_setzero_ps();
  const __m256 m0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(i0, none));
  const __m256 m1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(i1, none));
  vec16_join(_mm256_mask_i32gather_ps(z, base, i0, m0, 4),
             _mm256_mask_i32gather_ps(z, base, i1, m1, 4), v);
}
// base[l * stride] for lanes in `keep`, zero for the others.
__attribute__((target("avx2"))) inline void gather16_strided_avx2(const Lanes16& keep,
                                                                  const float* base, int64_t stride,
                                                                  Vec16& v) {
  const __m256i s = _mm256_set1_epi32(int32_t(stride));
  const __m256i l0 = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), s);
  const __m256i l1 = _mm256_mullo_epi32(_mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15), s);
  const __m256 z = _mm256_setzero_ps();
  vec16_join(_mm256_mask_i32gather_ps(z, base, l0, _mm256_castsi256_ps(keep.lo), 4),
             _mm256_mask_i32gather_ps(z, base, l1, _mm256_castsi256_ps(keep.hi), 4), v);
}

}  // namespace ipuml::cpu::detail

#endif
