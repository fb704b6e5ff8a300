// Internal to the CPU backend: direct convolution kernels for stride-1 convolutions, on AVX-512
// and (smaller tiles, the wide GEMM's bits) on AVX2.
// - Forward (and the input gradient as a convolution with the flipped kernel): a micro-tile is a
//   piece of one output row (up to 14 pixels on AVX-512, 6 on AVX2) x 32 output channels (on
//   AVX2 two halves of 16); the pixels are broadcast straight from the (padded) image at each tap,
//   the weights come prepacked 32 channels wide, and the whole reduction runs in registers before
//   the tile is transposed, in registers, into the NCHW output.
// - Small input gradients: W^T dy on the same kernels (AVX-512) or the GEMM (AVX2), then a masked
//   gather of the taps.
// - Weight gradient: a tile of 8 (AVX-512) or 6 (AVX2) reduction rows x 32 (16) output channels
//   over dy transposed once per image, pixel after pixel.
// Unlike the wide GEMM (conv_impl.hpp) they compute no dropped columns and make no round trips
// through C. Not a public API.
#pragma once

#include <ipuml/backends/cpu/channel_affine.hpp>
#include <ipuml/backends/cpu/gemm_kernels.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

namespace ipuml::cpu::detail {

constexpr int kPixelMr = 14;     // pixels per tile at most
constexpr int kPixelWidth = 32;  // output channels per tile (two 16-float vectors)

// y[j * ldy + i] = bias[j] + sum over p < k of x[taps[p] + i] * pw[p * 32 + j] for the tile's MR
// pixels i and its nr <= 32 channels j (bias may be null). Each output's sum runs in order over p
// in one register, whatever the tiling, so results do not depend on the thread count.
using PixelKernel = void (*)(int64_t k, const float* x, const int64_t* taps, const float* pw,
                             float* y, int64_t ldy, int nr, const float* bias);

#ifdef IPUML_CPU_X86
// GCC 12 flags the undefined pass-through operand inside the AVX-512 shuffle intrinsics, and the
// AVX2 kernel's sums, which it cannot see are stored before they are read.
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// r[j] = column j of the 16 x 16 matrix whose rows were r[0..15].
__attribute__((target("avx512f"), always_inline)) inline void transpose16_avx512(__m512* r) {
  __m512 t[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + j], 128-bit chunk k: column 4k + j of rows 4i .. 4i + 3.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
    t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
    r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
    r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xDD);
  }
}

template <int MR>
__attribute__((target("avx512f"))) void pixel_kernel_avx512(int64_t k, const float* x,
                                                            const int64_t* taps, const float* pw,
                                                            float* y, int64_t ldy, int nr,
                                                            const float* bias) {
  __m512 acc[MR][2];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* xr = x + taps[p];
    const __m512 b0 = _mm512_load_ps(pw + p * kPixelWidth);
    const __m512 b1 = _mm512_load_ps(pw + p * kPixelWidth + 16);
    _mm_prefetch(reinterpret_cast<const char*>(pw + (p + 8) * kPixelWidth), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(pw + (p + 8) * kPixelWidth + 16), _MM_HINT_T0);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(xr[i]);
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
    }
  }
  // Transposed in registers, 16 x 16 at a time: channel j's MR pixels are one run of y.
  const __mmask16 lanes = __mmask16((1u << MR) - 1u);
#pragma GCC unroll 2
  for (int v = 0; v < 2; ++v) {
    if (16 * v >= nr) break;
    __m512 r[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = i < MR ? acc[i < MR ? i : 0][v] : _mm512_setzero_ps();
    transpose16_avx512(r);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const int ch = 16 * v + j;
      if (ch >= nr) break;
      const __m512 out = bias != nullptr ? _mm512_add_ps(r[j], _mm512_set1_ps(bias[ch])) : r[j];
      _mm512_mask_storeu_ps(y + ch * ldy, lanes, out);
    }
  }
}

// The AVX2 form (16 ymm registers): a tile of up to 6 pixels x 16 channels, 12 accumulators, run
// once per half of the 32-channel panel; each half transposed in 8 x 8 blocks into y. It takes
// reductions of at most the AVX2 GEMM's kc (one k block, whose weight panel stays in L1): each
// output sums its products in order from zero, then adds the bias, as the wide GEMM rounds its
// one k block into C filled with the bias, so the outputs have the wide GEMM's bits.
constexpr int kPixelMrAvx2 = 6;

// The mask of the first n lanes (0 <= n <= 8), loaded from memory where it is used: a mask held
// in a register through the kernel's loop makes GCC spill accumulators (16 registers: 12 sums,
// 2 weight vectors and a broadcast).
__attribute__((target("avx2"), always_inline)) inline __m256i first_lanes_avx2(int n) {
  alignas(32) static constexpr int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                     0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - n));
}

// One AVX2 pixel tile's half (16 channels from pw): sums[i] = its sums over k plus the bias (may
// be null). Not inlined: inside the caller's loops GCC spilled accumulators to the stack.
template <int MR>
__attribute__((target("avx2,fma"), noinline)) void pixel_half_avx2(int64_t k, const float* x,
                                                                   const int64_t* taps,
                                                                   const float* pw,
                                                                   const float* bias, int nr,
                                                                   float (*sums)[16]) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* xr = x + taps[p];
    const __m256 b0 = _mm256_load_ps(pw + p * kPixelWidth);
    const __m256 b1 = _mm256_load_ps(pw + p * kPixelWidth + 8);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(xr + i);
      acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
    }
  }
  __m256 add[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  if (bias != nullptr)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v)
      if (nr > 8 * v)
        add[v] = _mm256_maskload_ps(bias + 8 * v, first_lanes_avx2(std::min(8, nr - 8 * v)));
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v)
      _mm256_store_ps(&sums[i][8 * v],
                      bias != nullptr ? _mm256_add_ps(acc[i][v], add[v]) : acc[i][v]);
}

template <int MR>
__attribute__((target("avx2,fma"))) void pixel_kernel_avx2(int64_t k, const float* x,
                                                           const int64_t* taps, const float* pw,
                                                           float* y, int64_t ldy, int nr,
                                                           const float* bias) {
  static_assert(MR <= kPixelMrAvx2);
  alignas(32) float sums[MR][16];
  for (int half = 0; half < 2 && 16 * half < nr; ++half) {
    pixel_half_avx2<MR>(k, x, taps, pw + 16 * half, bias != nullptr ? bias + 16 * half : nullptr,
                        std::min(16, nr - 16 * half), sums);
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      const int ch0 = 16 * half + 8 * v;
      if (ch0 >= nr) break;
      __m256 r[8], out[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i)
        r[i] = i < MR ? _mm256_load_ps(&sums[i < MR ? i : 0][8 * v]) : _mm256_setzero_ps();
      transpose8x8_regs(r, out);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        if (ch0 + j >= nr) break;
        _mm256_maskstore_ps(y + (ch0 + j) * ldy, first_lanes_avx2(MR), out[j]);
      }
    }
  }
}

#pragma GCC diagnostic pop

// Weight-gradient tile: c (MR x 32, in and out) += the sum over `rows` output rows of `ow`
// pixels of x[taps[i] + row * wp + ox] * dyt[(row * ow + ox) * 32 + j] for reduction rows i
// (krow) and output channels j. dyt is dy pixel-major, 32 channels per pixel. The sums run in
// registers, in pixel order.
using WgradPixelKernel = void (*)(const float* x, const int64_t* taps, int64_t rows, int64_t wp,
                                  int64_t ow, const float* dyt, float* c);

constexpr int kWgradMr = 8;  // krows per tile: 8 row pointers fit the general registers

template <int MR>
__attribute__((target("avx512f"))) void wgrad_pixel_kernel_avx512(const float* x,
                                                                  const int64_t* taps, int64_t rows,
                                                                  int64_t wp, int64_t ow,
                                                                  const float* dyt, float* c) {
  __m512 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = _mm512_load_ps(c + i * kPixelWidth);
    acc[i][1] = _mm512_load_ps(c + i * kPixelWidth + 16);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) xr[i] = x + taps[i] + r * wp;
    const float* d = dyt + r * ow * kPixelWidth;
    for (int64_t ox = 0; ox < ow; ++ox) {
      const __m512 b0 = _mm512_load_ps(d + ox * kPixelWidth);
      const __m512 b1 = _mm512_load_ps(d + ox * kPixelWidth + 16);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512 a = _mm512_set1_ps(xr[i][ox]);
        acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    _mm512_store_ps(c + i * kPixelWidth, acc[i][0]);
    _mm512_store_ps(c + i * kPixelWidth + 16, acc[i][1]);
  }
}

// A run of `len` real pixels of an AVX2 weight-gradient block: the input at x + tap + x_off
// (consecutive pixels, consecutive floats) and dy transposed at dyt + d_off (32 floats a pixel).
struct WgradRun {
  int64_t x_off, d_off, len;
};

// One k block of an AVX2 weight-gradient tile, MR reduction rows (taps[i]) x 16 channels (dyt and
// c already offset to the half panel; c's rows are 32 floats apart): the block's products summed
// from zero over its runs in order, then stored into c (the first block) or added to it, as the
// wide GEMM rounds its k blocks into C. Not inlined, as pixel_half_avx2.
template <int MR>
__attribute__((target("avx2,fma"), noinline)) void wgrad_block_avx2(const float* x,
                                                                    const int64_t* taps,
                                                                    const WgradRun* runs,
                                                                    int64_t nruns, const float* dyt,
                                                                    float* c, bool first) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t r = 0; r < nruns; ++r) {
    const float* xr[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) xr[i] = x + taps[i] + runs[r].x_off;
    const float* d = dyt + runs[r].d_off;
    for (int64_t q = 0; q < runs[r].len; ++q) {
      const __m256 b0 = _mm256_load_ps(d + q * kPixelWidth);
      const __m256 b1 = _mm256_load_ps(d + q * kPixelWidth + 8);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m256 a = _mm256_broadcast_ss(xr[i] + q);
        acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      float* ci = c + i * kPixelWidth + 8 * v;
      _mm256_store_ps(ci, first ? acc[i][v] : _mm256_add_ps(acc[i][v], _mm256_load_ps(ci)));
    }
}
using WgradBlockKernel = void (*)(const float*, const int64_t*, const WgradRun*, int64_t,
                                  const float*, float*, bool);

// table[mr] = make(mr) for mr = 1 .. N as compile-time constants (table[0] stays null): one
// kernel instantiation per tile height.
template <class Fn, int N, class Make, std::size_t... Is>
std::array<Fn, N + 1> kernel_table(Make make, std::index_sequence<Is...>) {
  return {Fn{}, make(std::integral_constant<int, int(Is) + 1>{})...};
}

inline const PixelKernel* pixel_kernels_avx512() {
  static const auto table = kernel_table<PixelKernel, kPixelMr>(
      [](auto mr) { return &pixel_kernel_avx512<decltype(mr)::value>; },
      std::make_index_sequence<kPixelMr>{});
  return table.data();
}

inline const PixelKernel* pixel_kernels_avx2() {
  static const auto table = kernel_table<PixelKernel, kPixelMrAvx2>(
      [](auto mr) { return &pixel_kernel_avx2<decltype(mr)::value>; },
      std::make_index_sequence<kPixelMrAvx2>{});
  return table.data();
}

inline const WgradBlockKernel* wgrad_block_kernels_avx2() {
  static const auto table = kernel_table<WgradBlockKernel, kPixelMrAvx2>(
      [](auto mr) { return &wgrad_block_avx2<decltype(mr)::value>; },
      std::make_index_sequence<kPixelMrAvx2>{});
  return table.data();
}

inline const WgradPixelKernel* wgrad_kernels_avx512() {
  static const auto table = kernel_table<WgradPixelKernel, kWgradMr>(
      [](auto mr) { return &wgrad_pixel_kernel_avx512<decltype(mr)::value>; },
      std::make_index_sequence<kWgradMr>{});
  return table.data();
}
#endif

// Weights packed for the pixel kernels: panels of 32 output channels, each k x 32 (zero past the
// last channel), 64-byte aligned.
inline size_t pixel_packed_size(int64_t m, int64_t k) {
  return size_t(ceil_div(m, kPixelWidth) * kPixelWidth * k);
}

// Panel `panel` of row-major weights (m x k, row stride ld), k x 32 floats at d:
// d[p * 32 + j] = w[(o0 + j) * ld + p] for o0 = 32 * panel.
inline void pack_pixel_panel(int64_t m, int64_t k, const float* w, int64_t ld, int64_t panel,
                             float* d) {
  const int64_t o0 = panel * kPixelWidth;
  const int nr = int(std::min<int64_t>(kPixelWidth, m - o0));
  const float* rows[kPixelWidth] = {};
  for (int j = 0; j < nr; ++j) rows[j] = w + (o0 + j) * ld;
  transpose_rows(d, kPixelWidth, rows, nr, k);
  if (nr < kPixelWidth)
    for (int64_t p = 0; p < k; ++p)
      std::fill(d + p * kPixelWidth + nr, d + (p + 1) * kPixelWidth, 0.0f);
}

// Every panel of row-major weights (m x k, row stride ld).
inline void pack_pixel_weights(int64_t m, int64_t k, const float* w, int64_t ld, float* dst,
                               bool parallel) {
  for_each_index(parallel, ceil_div(m, kPixelWidth), [&](int64_t panel) {
    pack_pixel_panel(m, k, w, ld, panel, dst + panel * kPixelWidth * k);
  });
}

// Panel of the flipped, transposed kernel that a stride-1 input gradient convolves dy with:
// row p = (o, r) and channel j = c hold w[o][c][khw - 1 - r] (w: cog x cig x khw).
inline void pack_pixel_weights_flipped(int64_t cog, int64_t cig, int64_t khw, const float* w,
                                       float* dst, bool parallel) {
  const int64_t k = cog * khw;
  for_each_index(parallel, ceil_div(cig, kPixelWidth), [&](int64_t panel) {
    const int64_t c0 = panel * kPixelWidth;
    const int nr = int(std::min<int64_t>(kPixelWidth, cig - c0));
    float* d = dst + c0 * k;
    for (int64_t o = 0; o < cog; ++o)
      for (int64_t r = 0; r < khw; ++r) {
        float* row = d + (o * khw + r) * kPixelWidth;
        const float* src = w + (o * cig + c0) * khw + khw - 1 - r;
        for (int j = 0; j < nr; ++j) row[j] = src[j * khw];
        std::fill(row + nr, row + kPixelWidth, 0.0f);
      }
  });
}

// Panel of a column-major operand (row r, depth p at w[p * ld + r], m rows): dst[p * 32 + j] =
// w[p * ld + r0 + j], the layout the input gradient's W^T takes.
inline void pack_pixel_weights_t(int64_t m, int64_t k, const float* w, int64_t ld, float* dst,
                                 bool parallel) {
  for_each_index(parallel, ceil_div(m, kPixelWidth), [&](int64_t panel) {
    const int64_t r0 = panel * kPixelWidth;
    const int nr = int(std::min<int64_t>(kPixelWidth, m - r0));
    float* d = dst + r0 * k;
    for (int64_t p = 0; p < k; ++p) {
      std::copy(w + p * ld + r0, w + p * ld + r0 + nr, d + p * kPixelWidth);
      std::fill(d + p * kPixelWidth + nr, d + (p + 1) * kPixelWidth, 0.0f);
    }
  });
}

// The weights of the pixel kernels: prepacked (pixel_packed_size(m, k) floats), or row-major
// (m x k, row stride ld) and packed a panel at a time by the task that runs that panel.
struct PixelWeights {
  const float* packed = nullptr;
  const float* w = nullptr;
  int64_t ld = 0;
};

// y (m channels x oh x ow) of one image from its padded input xp (rows of wp floats) through
// weights pw; taps[p] is input row p's offset from a pixel. Output rows split into even tiles
// of at most 14 pixels. With prepacked weights tasks take a panel of 32 channels and a band of
// rows; otherwise a task packs one panel, into a buffer that stays in its core's cache, and runs
// every row on it: the packed weights make no round trip through memory, which is what a batch-1
// convolution with large weights pays for (its weights serve few pixels). A task ends with the
// epilogue, if any, over the piece of y it wrote.
inline void pixel_conv_image(int64_t m, int64_t k, int64_t oh, int64_t ow, int64_t wp,
                             const int64_t* taps, const PixelWeights& pw, const float* xp,
                             const float* bias, float* y, bool parallel,
                             const ChannelAffineAt& epilogue = {}) {
#ifdef IPUML_CPU_X86
  const bool avx512 = active_isa() == Isa::avx512;
  const PixelKernel* kern = avx512 ? pixel_kernels_avx512() : pixel_kernels_avx2();
  const int64_t tiles = ceil_div(ow, avx512 ? kPixelMr : kPixelMrAvx2), mr = ceil_div(ow, tiles);
  const int64_t panels = ceil_div(m, kPixelWidth), plane = oh * ow;
  const int64_t band = pw.packed != nullptr ? std::max<int64_t>(1, ceil_div(oh, 4)) : oh;
  const int64_t bands = ceil_div(oh, band);
  // Weights that fit a core's L2 go band-major: a thread's consecutive tasks then read the same
  // input rows, from its L2 (ResNet-50's 3x3/2 at 56x56, batch 1, 2 threads: its 1.7 MB of phase
  // images do not fit; 1.16 -> 0.92 ms). Larger weights go panel-major, each panel's weights read
  // from memory once per image rather than once per band.
  const bool band_major = m * k * int64_t(sizeof(float)) <= (int64_t(1) << 20);
  for_each_index(parallel, panels * bands, [&](int64_t task) {
    const int64_t pn = band_major ? task % panels : task / bands;
    const int64_t oy0 = (band_major ? task / panels : task % bands) * band;
    const int64_t o0 = pn * kPixelWidth;
    const int nr = int(std::min<int64_t>(kPixelWidth, m - o0));
    std::optional<ScratchLease> own;
    const float* w = nullptr;
    if (pw.packed != nullptr) {
      w = pw.packed + o0 * k;
    } else {
      own.emplace(kScratchA, size_t(kPixelWidth * k));
      pack_pixel_panel(m, k, pw.w, pw.ld, pn, own->get());
      w = own->get();
    }
    const float* b = bias != nullptr ? bias + o0 : nullptr;
    const int64_t oy1 = std::min(oh, oy0 + band);
    for (int64_t oy = oy0; oy < oy1; ++oy)
      for (int64_t ox = 0; ox < ow; ox += mr) {
        const int rows = int(std::min(mr, ow - ox));
        kern[rows](k, xp + oy * wp + ox, taps, w, y + o0 * plane + oy * ow + ox, plane, nr, b);
      }
    if (epilogue) epilogue.apply(y, o0, o0 + nr, oy0 * ow, oy1 * ow);
  });
#else
  (void)m, (void)k, (void)oh, (void)ow, (void)wp, (void)taps, (void)pw, (void)xp, (void)bias;
  (void)y, (void)parallel, (void)epilogue;
#endif
}

inline void pixel_conv_image(int64_t m, int64_t k, int64_t oh, int64_t ow, int64_t wp,
                             const int64_t* taps, const float* packed, const float* xp,
                             const float* bias, float* y, bool parallel) {
  pixel_conv_image(m, k, oh, ow, wp, taps, PixelWeights{packed, nullptr, 0}, xp, bias, y, parallel);
}

// dW (m x k) += the weight gradient of one image: x is its padded input (rows of wp), taps[p]
// the offset of reduction row p from an output pixel, dy its output gradient (m x oh x ow).
// cbuf holds dW transposed and panelled ([panel][p][32], 64-byte aligned) across calls; dyt is
// scratch for pixel_packed_size(m, oh * ow) floats. Tasks take reduction-row tiles of a band of
// output rows; every dW element sums its pixels in order, whatever the split.
inline void pixel_wgrad_image(int64_t m, int64_t k, int64_t oh, int64_t ow, int64_t wp,
                              const int64_t* taps, const float* x, const float* dy, float* dyt,
                              float* cbuf, bool parallel) {
#ifdef IPUML_CPU_X86
  const int64_t P = oh * ow, panels = ceil_div(m, kPixelWidth);
  for_each_index(parallel, panels, [&](int64_t pn) {
    const int64_t o0 = pn * kPixelWidth;
    const int nr = int(std::min<int64_t>(kPixelWidth, m - o0));
    const float* rows[kPixelWidth];
    for (int j = 0; j < nr; ++j) rows[j] = dy + (o0 + j) * P;
    float* d = dyt + o0 * P;
    transpose_rows(d, kPixelWidth, rows, nr, P);
    if (nr < kPixelWidth)
      for (int64_t q = 0; q < P; ++q)
        std::fill(d + q * kPixelWidth + nr, d + (q + 1) * kPixelWidth, 0.0f);
  });
  const WgradPixelKernel* kern = wgrad_kernels_avx512();
  // Bands of output rows whose dy panel (32 channels) stays in L1 across the tiles.
  const int64_t band = std::max<int64_t>(1, 256 / ow);
  const int64_t ktiles = ceil_div(k, kWgradMr), tiles = panels * ktiles;
  const int64_t tasks = parallel ? std::min<int64_t>(tiles, 4 * available_threads()) : 1;
  for (int64_t oy0 = 0; oy0 < oh; oy0 += band) {
    const int64_t nrows = std::min(band, oh - oy0);
    for_each_index(parallel, tasks, [&](int64_t task) {
      for (int64_t t = task * tiles / tasks; t < (task + 1) * tiles / tasks; ++t) {
        const int64_t pn = t / ktiles, p0 = (t % ktiles) * kWgradMr;
        const int rows_k = int(std::min<int64_t>(kWgradMr, k - p0));
        kern[rows_k](x + oy0 * wp, taps + p0, nrows, wp, ow,
                     dyt + (pn * kPixelWidth * P) + oy0 * ow * kPixelWidth,
                     cbuf + (pn * k + p0) * kPixelWidth);
      }
    });
  }
#else
  (void)m, (void)k, (void)oh, (void)ow, (void)wp, (void)taps, (void)x, (void)dy, (void)dyt;
  (void)cbuf, (void)parallel;
#endif
}

#ifdef IPUML_CPU_X86
constexpr int64_t kMaxGatherKw = 16;  // kernel widths the gather takes
constexpr int kGatherChannels = 8;    // channels whose pieces the gather sums side by side

// Geometry of a stride-1 input gradient's gather (see tap_gather_avx512).
struct GatherGeom {
  int64_t c, h, w, oh, ow, kh, kw, dh, dw, ph, pw;
};

// dx (c x h x w) from Z, whose row (c, t) holds tap t = (ky, kx)'s products at the oh x ow
// outputs: dx[c][iy][ix] = sum over taps, in order, of Z[(c, t)][oy * ow + ox] where oy = iy +
// ph - ky * dh and ox = ix + pw - kx * dw fall inside the output. One 16-float piece of a dx row
// at a time: each tap adds one masked load (lanes outside the output read nothing).
//
// The pieces of CB channels at the same row go together, each its own sum: one piece's taps are
// a chain of dependent adds, and CB chains in flight keep the adders busy (MNIST's conv2 input
// gradient, 32 channels of 13 x 13 from 9 taps: its gather took 17 % of the pass one piece at a
// time). Each piece still sums its taps in the same order.
template <int CB>
__attribute__((target("avx512f"))) inline void tap_gather_channels_avx512(
    const GatherGeom& g, const float* z, float* dx, int64_t c, int64_t ix0, const __mmask16* mask,
    const int64_t* off, __mmask16 store) {
  const int64_t khw = g.kh * g.kw, P = g.oh * g.ow;
  for (int64_t iy = 0; iy < g.h; ++iy) {
    __m512 acc[CB];
#pragma GCC unroll 8
    for (int b = 0; b < CB; ++b) acc[b] = _mm512_setzero_ps();
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t oy = iy + g.ph - ky * g.dh;
      if (oy < 0 || oy >= g.oh) continue;
      const float* base = z + (c * khw + ky * g.kw) * P + oy * g.ow;
      // Masked-off lanes (outside the output row) are never read.
      for (int64_t kx = 0; kx < g.kw; ++kx)
#pragma GCC unroll 8
        for (int b = 0; b < CB; ++b)
          acc[b] =
              _mm512_add_ps(acc[b], _mm512_maskz_loadu_ps(mask[kx], base + b * khw * P + off[kx]));
    }
#pragma GCC unroll 8
    for (int b = 0; b < CB; ++b)
      _mm512_mask_storeu_ps(dx + ((c + b) * g.h + iy) * g.w + ix0, store, acc[b]);
  }
}

__attribute__((target("avx512f"))) inline void tap_gather_avx512(const GatherGeom& g,
                                                                 const float* z, float* dx) {
  const int64_t P = g.oh * g.ow;
  for (int64_t ix0 = 0; ix0 < g.w; ix0 += 16) {
    const int64_t lanes = std::min<int64_t>(16, g.w - ix0);
    // Per kx: the lanes whose output column falls inside the row, and where they read.
    __mmask16 mask[kMaxGatherKw];
    int64_t off[kMaxGatherKw];
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ox0 = ix0 + g.pw - kx * g.dw;
      const int64_t lo = std::max<int64_t>(0, -ox0), hi = std::min(lanes, g.ow - ox0);
      mask[kx] = hi <= lo ? __mmask16(0) : __mmask16(((1u << hi) - 1u) & ~((1u << lo) - 1u));
      off[kx] = kx * P + ox0;
    }
    const __mmask16 store = __mmask16((1u << lanes) - 1u);
    int64_t c = 0;
    for (; c + kGatherChannels <= g.c; c += kGatherChannels)
      tap_gather_channels_avx512<kGatherChannels>(g, z, dx, c, ix0, mask, off, store);
    for (; c < g.c; ++c) tap_gather_channels_avx512<1>(g, z, dx, c, ix0, mask, off, store);
  }
}

// The same gather with AVX2: 8-float pieces of a dx row, masked loads (lanes outside the output
// row read nothing). Every dx element sums its in-range taps in tap order from zero, the taps
// that fall outside adding nothing: the bits of tap_sum over a wide Z with zero margins (a sum
// of Z values, which are never -0, is unchanged by adding +0).
template <int CB>
__attribute__((target("avx2"))) inline void tap_gather_channels_avx2(
    const GatherGeom& g, const float* z, float* dx, int64_t c, int64_t ix0, const __m256i* mask,
    const int64_t* off, __m256i store) {
  const int64_t khw = g.kh * g.kw, P = g.oh * g.ow;
  for (int64_t iy = 0; iy < g.h; ++iy) {
    __m256 acc[CB];
#pragma GCC unroll 8
    for (int b = 0; b < CB; ++b) acc[b] = _mm256_setzero_ps();
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t oy = iy + g.ph - ky * g.dh;
      if (oy < 0 || oy >= g.oh) continue;
      const float* base = z + (c * khw + ky * g.kw) * P + oy * g.ow;
      for (int64_t kx = 0; kx < g.kw; ++kx)
#pragma GCC unroll 8
        for (int b = 0; b < CB; ++b)
          acc[b] =
              _mm256_add_ps(acc[b], _mm256_maskload_ps(base + b * khw * P + off[kx], mask[kx]));
    }
#pragma GCC unroll 8
    for (int b = 0; b < CB; ++b)
      _mm256_maskstore_ps(dx + ((c + b) * g.h + iy) * g.w + ix0, store, acc[b]);
  }
}

__attribute__((target("avx2"))) inline void tap_gather_avx2(const GatherGeom& g, const float* z,
                                                            float* dx) {
  const int64_t P = g.oh * g.ow;
  for (int64_t ix0 = 0; ix0 < g.w; ix0 += 8) {
    const int lanes = int(std::min<int64_t>(8, g.w - ix0));
    __m256i mask[kMaxGatherKw];
    int64_t off[kMaxGatherKw];
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ox0 = ix0 + g.pw - kx * g.dw;
      const int lo = int(std::clamp<int64_t>(-ox0, 0, lanes)),
                hi = int(std::clamp<int64_t>(g.ow - ox0, 0, lanes));
      mask[kx] = hi <= lo ? _mm256_setzero_si256()
                          : _mm256_andnot_si256(first_lanes_avx2(lo), first_lanes_avx2(hi));
      off[kx] = kx * P + ox0;
    }
    const __m256i store = first_lanes_avx2(lanes);
    int64_t c = 0;
    for (; c + kGatherChannels <= g.c; c += kGatherChannels)
      tap_gather_channels_avx2<kGatherChannels>(g, z, dx, c, ix0, mask, off, store);
    for (; c < g.c; ++c) tap_gather_channels_avx2<1>(g, z, dx, c, ix0, mask, off, store);
  }
}
#endif

}  // namespace ipuml::cpu::detail
