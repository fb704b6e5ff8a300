// Bodies of the convolutions declared in conv.hpp.
// Header-only mode includes this from conv.hpp; compiled mode compiles it once in src/lib.
#pragma once

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/conv_direct.hpp>
#include <ipuml/backends/cpu/conv_small_k.hpp>
#include <ipuml/backends/cpu/conv_space_to_depth.hpp>
#include <ipuml/backends/cpu/conv_wgrad_1x1.hpp>
#include <ipuml/backends/cpu/conv_winograd.hpp>
#include <ipuml/backends/cpu/conv_winograd_wgrad.hpp>
#include <ipuml/backends/cpu/gemm_kernels.hpp>
#include <ipuml/core/error.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

namespace ipuml::cpu {

namespace detail {

// Range of t in [0, len) for which lo + t * step lies in [0, limit): the taps inside the image.
inline void valid_taps(int64_t lo, int64_t step, int64_t limit, int64_t len, int64_t& t0,
                       int64_t& t1) {
  t0 = lo >= 0 ? 0 : std::min(len, ceil_div(-lo, step));
  t1 = lo >= limit ? 0 : std::min(len, ceil_div(limit - lo, step));
  if (t1 < t0) t1 = t0;
}

// B(krow, col) of the forward GEMM, read straight from the image: krow = (c, ky, kx) and
// col = (oy, ox). Packing from the image avoids writing and re-reading an im2col matrix.
struct PackIm2colB {
  const float* x;  // this image and group: cig x h x w
  const Conv2dParams* cp;
  int64_t ow;
  void operator()(float* dst, int64_t j0, int nr, int w, int64_t p0, int64_t kc) const {
    const Conv2dParams& p = *cp;
    struct Run {
      int j, len;
      int64_t oy, ox;
    };
    Run runs[kMaxNv * 16 + 1];
    int nruns = 0;
    for (int j = 0; j < nr;) {
      const int64_t col = j0 + j, oy = col / ow, ox = col % ow;
      const int len = int(std::min<int64_t>(nr - j, ow - ox));
      runs[nruns++] = Run{j, len, oy, ox};
      j += len;
    }
    const int64_t khw = p.kh * p.kw;
    for (int64_t q = 0; q < kc; ++q) {
      const int64_t krow = p0 + q, c = krow / khw, r = krow % khw, ky = r / p.kw, kx = r % p.kw;
      const float* xc = x + c * p.h * p.w;
      float* d = dst + q * w;
      for (int s = 0; s < nruns; ++s) {
        const Run& run = runs[s];
        float* dr = d + run.j;
        const int64_t iy = run.oy * p.stride_h - p.pad_h + ky * p.dil_h;
        if (iy < 0 || iy >= p.h) {
          std::fill(dr, dr + run.len, 0.0f);
          continue;
        }
        const float* row = xc + iy * p.w;
        const int64_t ix0 = run.ox * p.stride_w - p.pad_w + kx * p.dil_w;
        int64_t t0, t1;
        valid_taps(ix0, p.stride_w, p.w, run.len, t0, t1);
        std::fill(dr, dr + t0, 0.0f);
        if (p.stride_w == 1) {
          // Runs are output-row pieces (often < 32 floats): a plain loop beats a memcpy call.
          const float* src = row + ix0;
          for (int64_t t = t0; t < t1; ++t) dr[t] = src[t];
        } else {
          for (int64_t t = t0; t < t1; ++t) dr[t] = row[ix0 + t * p.stride_w];
        }
        std::fill(dr + t1, dr + run.len, 0.0f);
      }
      std::fill(d + nr, d + w, 0.0f);
    }
  }
};

// A(o, q) of the weight-gradient GEMM: dy of output channel o at q = image * P + pixel.
struct PackDyA {
  const float* dy;  // dy + g * cog * P
  int64_t img_stride, P;
  void operator()(float* dst, int64_t i0, int mr, int64_t q0, int64_t kc) const {
    for (int i = 0; i < mr; ++i) {
      int64_t img = q0 / P, pix = q0 % P;
      const float* src = dy + img * img_stride + (i0 + i) * P;
      for (int64_t q = 0; q < kc; ++q) {
        dst[q * mr + i] = src[pix];
        if (++pix == P) {
          pix = 0;
          src += img_stride;
        }
      }
    }
  }
};

// B(q, krow) of the weight-gradient GEMM: the input tap that met output pixel q through krow.
struct PackIm2colTB {
  const float* x;  // x + g * cig * h * w
  const Conv2dParams* cp;
  int64_t oh, ow;
  void operator()(float* dst, int64_t j0, int nr, int w, int64_t q0, int64_t kc) const {
    const Conv2dParams& p = *cp;
    const int64_t khw = p.kh * p.kw, P = oh * ow, img_stride = p.c_in * p.h * p.w;
    for (int j = 0; j < nr; ++j) {
      const int64_t krow = j0 + j, c = krow / khw, r = krow % khw, ky = r / p.kw, kx = r % p.kw;
      int64_t img = q0 / P, pix = q0 % P, oy = pix / ow, ox = pix % ow;
      const float* xc = x + img * img_stride + c * p.h * p.w;
      const int64_t dy0 = ky * p.dil_h - p.pad_h, dx0 = kx * p.dil_w - p.pad_w;
      for (int64_t q = 0; q < kc;) {
        // One output row at a time, so the bounds test on ix becomes a range.
        const int64_t len = std::min(kc - q, ow - ox);
        float* d = dst + q * w + j;
        const int64_t iy = oy * p.stride_h + dy0;
        if (iy < 0 || iy >= p.h) {
          for (int64_t t = 0; t < len; ++t) d[t * w] = 0.0f;
        } else {
          const float* row = xc + iy * p.w;
          const int64_t ix0 = ox * p.stride_w + dx0;
          int64_t t0, t1;
          valid_taps(ix0, p.stride_w, p.w, len, t0, t1);
          for (int64_t t = 0; t < t0; ++t) d[t * w] = 0.0f;
          for (int64_t t = t0; t < t1; ++t) d[t * w] = row[ix0 + t * p.stride_w];
          for (int64_t t = t1; t < len; ++t) d[t * w] = 0.0f;
        }
        q += len;
        ox += len;
        if (ox == ow) {
          ox = 0;
          if (++oy == oh) {
            oy = 0;
            xc += img_stride;
          }
        }
      }
    }
    for (int64_t q = 0; q < kc; ++q)
      for (int j = nr; j < w; ++j) dst[q * w + j] = 0.0f;
  }
};

// Scatter-adds a K x P column matrix back onto one image and group (cig x h x w), in a fixed order.
inline void col2im_add(const Conv2dParams& p, int64_t oh, int64_t ow, const float* col, float* dx) {
  const int64_t cig = p.c_in / p.groups, P = oh * ow;
  for (int64_t c = 0; c < cig; ++c)
    for (int64_t ky = 0; ky < p.kh; ++ky)
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const float* src = col + ((c * p.kh + ky) * p.kw + kx) * P;
        float* dc = dx + c * p.h * p.w;
        const int64_t ix0 = kx * p.dil_w - p.pad_w;
        int64_t t0, t1;
        valid_taps(ix0, p.stride_w, p.w, ow, t0, t1);
        for (int64_t oy = 0; oy < oh; ++oy) {
          const int64_t iy = oy * p.stride_h - p.pad_h + ky * p.dil_h;
          if (iy < 0 || iy >= p.h) continue;
          float* row = dc + iy * p.w + ix0;
          const float* s = src + oy * ow;
          if (p.stride_w == 1) {
            for (int64_t t = t0; t < t1; ++t) row[t] += s[t];
          } else {
            for (int64_t t = t0; t < t1; ++t) row[t * p.stride_w] += s[t];
          }
        }
      }
}

// ---------------------------------------------------------------- stride-1 "wide" GEMMs
// A stride-1 convolution computed on the padded input's full row pitch wp: output column
// q = oy * wp + ox (ox < wp, "wide") meets tap (c, ky, kx) at xp[c][ky * dil_h * wp + kx * dil_w +
// q], so every row of the implicit im2col matrix is one contiguous run of the (padded) image and
// packs with plain copies. The columns ox >= ow are computed and dropped (cost wp / ow); q stops at
// the last real output, (oh - 1) * wp + ow, so no read leaves the padded image.
struct WideGeom {
  int64_t c, h, w;         // input channels (of one group) and size, unpadded
  int64_t ph, pw;          // padding
  int64_t kh, kw, dh, dw;  // kernel and dilation
  int64_t hp() const { return h + 2 * ph; }
  int64_t wp() const { return w + 2 * pw; }
  int64_t oh() const { return hp() - dh * (kh - 1); }
  int64_t ow() const { return wp() - dw * (kw - 1); }
  int64_t plane() const { return hp() * wp(); }
  int64_t cols() const { return (oh() - 1) * wp() + ow(); }  // wide columns
  int64_t k() const { return c * kh * kw; }
  bool padded() const { return ph != 0 || pw != 0; }
  // Offset of tap krow = (c, ky, kx) from the wide column in a padded image.
  int64_t tap(int64_t krow) const {
    const int64_t khw = kh * kw, ch = krow / khw, r = krow % khw;
    return ch * plane() + (r / kw) * dh * wp() + (r % kw) * dw;
  }
  // Every tap's offset: the packers look them up (four divisions per row cost more than the copy).
  std::vector<int64_t> taps() const {
    std::vector<int64_t> t(static_cast<size_t>(k()));
    for (int64_t i = 0; i < k(); ++i) t[static_cast<size_t>(i)] = tap(i);
    return t;
  }
};

// Copies one image row. Rows are short (MNIST: 11 to 28 floats): an inlined loop, not a
// memcpy call per row.
inline void copy_row(float* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

// Copies channels x h x w into channels x hp x wp with zero borders.
inline void pad_image(const WideGeom& g, int64_t channels, const float* src, float* dst) {
  const int64_t wp = g.wp();
  for (int64_t ch = 0; ch < channels; ++ch) {
    float* d = dst + ch * g.plane();
    std::fill(d, d + g.ph * wp, 0.0f);
    for (int64_t y = 0; y < g.h; ++y) {
      float* row = d + (g.ph + y) * wp;
      std::fill(row, row + g.pw, 0.0f);
      copy_row(row + g.pw, src + (ch * g.h + y) * g.w, g.w);
      std::fill(row + g.pw + g.w, row + wp, 0.0f);
    }
    std::fill(d + (g.ph + g.h) * wp, d + g.plane(), 0.0f);
  }
}

// x itself or, when the convolution pads, its padded copy in scratch that `lease` holds (and
// reuses on the next call with the same lease).
inline const float* padded_image(const WideGeom& g, const float* x,
                                 std::optional<ScratchLease>& lease) {
  if (!g.padded()) return x;
  if (!lease) lease.emplace(kScratchConv, size_t(g.c * g.plane()));
  pad_image(g, g.c, x, lease->get());
  return lease->get();
}

// B(krow, q) of a wide forward GEMM over one padded image.
struct PackWideB {
  const float* xp;
  const int64_t* taps;
  void operator()(float* dst, int64_t j0, int nr, int w, int64_t p0, int64_t kc) const {
    for (int64_t q = 0; q < kc; ++q) {
      const float* src = xp + taps[p0 + q] + j0;
      float* d = dst + q * w;
      // Fixed-size copies of full panels inline into vector moves; a memcpy call per 32 floats
      // cost a quarter of the GEMM.
      if (nr == 32 && w == 32) {
        std::memcpy(d, src, 32 * sizeof(float));
      } else if (nr == 16 && w == 16) {
        std::memcpy(d, src, 16 * sizeof(float));
      } else {
        for (int j = 0; j < nr; ++j) d[j] = src[j];
        for (int j = nr; j < w; ++j) d[j] = 0.0f;
      }
    }
  }
};

// C (m x n) = A (prepacked) x B + beta C where B(krow, q) = xp[taps[krow] + q]: the wide GEMM,
// whose full panels the tap kernels read in place when m is one row tile (otherwise each task
// packs its panels once, see below). Blocks of k run in order around a split over panels, so
// results do not depend on the thread count. `done(i0, i1, j0, j1)`, if given, runs in the task
// that finished rows [i0, i1) x columns [j0, j1) of C, right after its last block of k.
using TileDone = std::function<void(int64_t, int64_t, int64_t, int64_t)>;
inline void run_wide_gemm(const GemmConfig& cfg, int64_t m, int64_t n, int64_t k,
                          const PrepackedA& a, const float* xp, const int64_t* taps, float beta,
                          float* c, int64_t ldc, bool allow_parallel, const TileDone& done = {}) {
  const int mr = tile_rows(cfg, m), nr_full = cfg.nr();
  const int64_t kc_blk = block_depth(cfg, k), panels = ceil_div(n, nr_full);
  const bool parallel = allow_parallel && available_threads() > 1 &&
                        2.0 * double(m) * double(n) * double(k) >= kParallelFlops;
  // 128 columns per task whatever the ISA's panel width: each of the kc input rows a task packs
  // is then one 512-byte run (AVX2's 16-wide panels at 4 per task read half that, and ran a 1x1
  // convolution 25 % slower).
  const int64_t kPanelsPerTask = std::max<int64_t>(1, 128 / nr_full);
  const int64_t panel_tasks = ceil_div(panels, kPanelsPerTask);
  // Few pixels (ResNet's 14x14 and 7x7 maps at batch 1: 7 and 2 panels) leave too few panel
  // tasks to share: the row tiles are then split too, at tile boundaries, every task packing its
  // panels for itself (a few KiB). Each C element keeps its tile and its k blocks, so the bits do
  // not change with the split.
  const int64_t tiles = ceil_div(m, mr);
  const int64_t want = 2 * int64_t(available_threads());
  const int64_t m_chunks =
      parallel && panel_tasks < want ? std::min(tiles, ceil_div(want, panel_tasks)) : 1;
  const int64_t chunk_tiles = ceil_div(tiles, m_chunks);
  for (int64_t pc = 0; pc < k; pc += kc_blk) {
    const int64_t kc = std::min(kc_blk, k - pc);
    const float beta_eff = pc == 0 ? beta : 1.0f;
    for_each_index(parallel, panel_tasks * m_chunks, [&](int64_t task) {
      const int64_t jp0 = (task / m_chunks) * kPanelsPerTask,
                    jp_end = std::min(panels, jp0 + kPanelsPerTask);
      const int64_t i_begin = (task % m_chunks) * chunk_tiles * mr,
                    i_end = std::min(m, i_begin + chunk_tiles * mr);
      if (i_begin >= i_end) return;
      // With more than one row tile every panel is read once per tile: the task's panels are
      // packed first, row by row (a row's run of columns at once), so that the kernels read
      // them from L1 / L2 rather than kc rows far apart (a plane apart for a 1x1 convolution),
      // whose cache sets collide and whose streams the hardware prefetcher cannot follow.
      // Otherwise full panels are read in place, and only a partial last panel is packed.
      const bool pack_all = m > mr;
      std::optional<ScratchLease> packed;
      if (pack_all) {
        packed.emplace(kScratchB, size_t(kc * (jp_end - jp0) * nr_full));
        const int64_t j_first = jp0 * nr_full, j_last = std::min(n, jp_end * nr_full);
        const int64_t full = (j_last - j_first) / nr_full;
        // Fixed-size copies, rows prefetched: a library call per 64-byte row took 40 % of a 1x1
        // convolution's time on AVX2, whose panels are 16 wide.
        copy_panels_by_rows(packed->get(), full, nr_full, kc,
                            [&](int64_t q) { return xp + taps[pc + q] + j_first; });
        if (full < jp_end - jp0) {  // the partial last panel, zero-padded to whole vectors
          const int64_t j0 = j_first + full * nr_full;
          const int nr = int(n - j0), w = int(round_up(nr, cfg.vw));
          PackWideB{xp, taps}(packed->get() + full * kc * nr_full, j0, nr, w, pc, kc);
        }
      }
      for (int64_t jp = jp0; jp < jp_end; ++jp) {
        const int64_t j0 = jp * nr_full;
        const int nr = int(std::min<int64_t>(nr_full, n - j0));
        const int nv = int(ceil_div(nr, cfg.vw));
        const float* pb = pack_all ? packed->get() + (jp - jp0) * kc * nr_full : nullptr;
        std::optional<ScratchLease> partial;
        if (!pack_all && nr < nr_full) {
          const int w = int(round_up(nr, cfg.vw));
          partial.emplace(kScratchB, size_t(kc * w));
          PackWideB{xp, taps}(partial->get(), j0, nr, w, pc, kc);
          pb = partial->get();
        }
        for (int64_t ir = i_begin; ir < i_end; ir += mr) {
          const int rows = int(std::min<int64_t>(mr, m - ir));
          const float* pa = a.block(ir, pc);
          float* ct = c + ir * ldc + j0;
          if (pb != nullptr)
            cfg.kern[rows][nv](kc, pa, pb, ct, ldc, nr, 1.0f, beta_eff);
          else
            cfg.kern_taps[rows][nv](kc, pa, xp + j0, taps + pc, ct, ldc, nr, 1.0f, beta_eff);
        }
      }
      if (done && pc + kc == k) done(i_begin, i_end, jp0 * nr_full, std::min(n, jp_end * nr_full));
    });
  }
}

// y (m x oh x ow) = A (m x K, prepacked) x wide im2col of one image (g.c x h x w); y rows start
// filled with `init` per row (beta 1) when it is given; then the epilogue, if any, on each
// finished tile (or row, when C is scratch).
inline void wide_conv_image(const GemmConfig& cfg, const WideGeom& g, const int64_t* taps,
                            const PrepackedA& a, int64_t m, const float* x, const float* init,
                            float* y, bool inner, const ChannelAffineAt& epilogue = {}) {
  const int64_t oh = g.oh(), ow = g.ow(), wp = g.wp(), cols = g.cols();
  std::optional<ScratchLease> padded;
  const float* xp = padded_image(g, x, padded);
  // When the wide columns are the real ones (no horizontal halo) C is y itself.
  const bool direct = wp == ow;
  std::optional<ScratchLease> out;
  float* c = y;
  if (!direct) {
    out.emplace(kScratchConvOut, size_t(m * cols));
    c = out->get();
  }
  const int64_t ldc = direct ? oh * ow : cols;
  float beta = 0.0f;
  if (init != nullptr) {
    for (int64_t o = 0; o < m; ++o) std::fill(c + o * ldc, c + o * ldc + cols, init[o]);
    beta = 1.0f;
  }
  TileDone done;
  if (epilogue && direct)
    done = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
      epilogue.apply(y, i0, i1, j0, j1);
    };
  run_wide_gemm(cfg, m, cols, g.k(), a, xp, taps, beta, c, ldc, inner, done);
  if (!direct)
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t oy = 0; oy < oh; ++oy)
        copy_row(y + (o * oh + oy) * ow, c + o * cols + oy * wp, ow);
      if (epilogue) epilogue.apply(y, o, 0, oh * ow);
    }
}

// Whether the direct pixel kernels (conv_direct.hpp) take a stride-1 product with reduction
// depth k over `taps` taps per channel: they need AVX-512 and a deep enough reduction to pay for
// the transposed write. A forward tile reads every reduction row from a different place; with
// one tap per channel those are as many channel planes (and pages) as the reduction is deep, and
// the wide GEMM, which wastes no columns on a 1x1 anyway, is faster there.
inline bool use_pixel_kernels(int64_t k, int64_t taps = 9) {
  return active_isa() == Isa::avx512 && k >= 8 && taps > 1;
}

// Whether the pixel kernels take a stride-1 convolution's product of reduction depth k over
// `taps` taps per channel (its forward, or its input gradient in the flipped form): with AVX-512
// as use_pixel_kernels says; with AVX2 (6 x 16 tiles, the wide GEMM's bits) whenever a channel
// has several taps and k is at most the AVX2 GEMM's kc (384), unless set_conv_avx2_pixels(false).
// Deeper products (3x3s from 64 channels) ran as fast or faster on the wide GEMM, which packs its
// operands for the caches, where a pixel tile streams its whole weight panel (k x 32) from L2:
// 56x56 maps of 64 channels 101 against 106 GFLOP/s, 14x14 maps of 256 186 against 203 on 2
// threads, 7x7 maps of 512 channels' weight gradients 55 against 85 on 1. Where they take it,
// AVX2 GFLOP/s on 1 / 2 threads: MNIST's conv2 (32 -> 64, 13x13, batch 64) forward 90 -> 110 /
// 176 -> 213, LeNet's 5x5 62 -> 107 / 115 -> 200, a padded 3x3 32 -> 32 on 28x28 89 -> 106 /
// 172 -> 194 and its flipped input gradient 90 -> 106 / 170 -> 200 (docs/cpu-kernels.md). 1x1s
// ran 30 % slower (their wide GEMM wastes no columns), and so did the flipped form where the cost
// model picks col2im (conv2's input gradient: 74 -> 58-66); there the GEMM onto the taps runs
// over the real outputs instead and a masked gather sums them (81 -> 96 / 160 -> 186). Weight
// gradients on the AVX2 pixel kernels: pixel_wgrad_chunk_avx2.
IPUML_INLINE std::atomic<bool>& avx2_pixels_state() {
  static std::atomic<bool> enabled{[] {
    const char* env = std::getenv("IPUML_CONV_AVX2_PIXELS");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }()};
  return enabled;
}
inline bool pixel_kernels_convolve(int64_t k, int64_t taps) {
  if (active_isa() == Isa::avx2)
    return avx2_pixels_state().load(std::memory_order_relaxed) && k >= 8 &&
           k <= config_for(Isa::avx2).kc && taps > 1;
  return use_pixel_kernels(k, taps);
}

// Whether the pixel kernels take an unpadded stride-1 1x1 convolution of reduction depth k whose
// maps have `pixels` pixels, seen as one row of that many pixels (a 7x7 map's own rows would make
// tiles of 7). There a map's channel planes are a few KiB apart, and the wide GEMM wastes columns
// on its last panel (49 pixels take 64) for weights it packs to use on few pixels. On ResNet-50's
// 14x14 and 7x7 maps the pixel kernels ran 25-45 % faster (batch 1 to 16, 2 threads), and as
// fast or faster on 28x28 maps from 256 channels; with shorter reductions (128 -> 512 at 28x28)
// and on larger maps the wide GEMM kept its lead.
inline bool pixel_kernels_take_1x1(int64_t k, int64_t pixels) {
  return active_isa() == Isa::avx512 && k >= 256 && pixels <= 1024;
}

// Whether a convolution is an unpadded stride-1 1x1 that the pixel kernels take flat; k is the
// reduction depth of the product asked for (c_in per group forward, c_out per group for dx).
inline bool flat_1x1(const Conv2dParams& p, int64_t k) {
  return p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
         p.pad_w == 0 && pixel_kernels_take_1x1(k, p.out_h() * p.out_w());
}

// Whether a convolution runs as its transposed product (AVX2): out^T (pixels x channels)
// through the GEMM, then transposed. On small maps the wide GEMM's panels of 16 columns leave
// columns empty (49 pixels take 64; a padded 3x3 on a 7x7 map computes 63 wide columns) and its
// few columns split badly among threads; the transpose has the pixels as rows and the channels as
// columns, both filled. AVX2, 1 / 2 threads, GFLOP/s: 2048 x 49 x 512 78 -> 91 / 97 -> 178,
// 512 x 49 x 2048 77 -> 91 / 99 -> 169; on 14x14 maps only the split gains (1024 x 196 x 256
// 110 -> 110 / 174 -> 205), so those go transposed when the product runs on several threads
// (`inner`: few images); at 784 pixels the wide GEMM is faster (198 against 151 for 128 -> 512
// channels, 2 threads). Other than an unpadded stride-1 1x1, a convolution first gathers the
// image's column matrix (im2col_image). Each output sums the same products in the same order as
// the path it replaces (the wide GEMM at stride 1, the im2col GEMM when strided), so the bits are
// that path's. The pixel kernels take these on AVX-512. Switched off by set_conv_transposed(false)
// or IPUML_CONV_TRANSPOSED=0 at start-up.
IPUML_INLINE std::atomic<bool>& transposed_state() {
  static std::atomic<bool> enabled{[] {
    const char* env = std::getenv("IPUML_CONV_TRANSPOSED");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }()};
  return enabled;
}
inline bool transposed_conv(const Conv2dParams& p, int64_t m, int64_t k, bool inner) {
  const int64_t pixels = p.out_h() * p.out_w();
  return transposed_state().load(std::memory_order_relaxed) && active_isa() == Isa::avx2 &&
         (pixels <= 64 || (inner && pixels <= 256)) && m >= 16 && k >= 16;
}
// Whether p is an unpadded stride-1 1x1, whose column matrix is its input.
inline bool plain_1x1(const Conv2dParams& p) {
  return p.kh == 1 && p.kw == 1 && p.pad_h == 0 && p.pad_w == 0 && p.stride_h == 1 &&
         p.stride_w == 1;
}

// The column matrix of one image and group for the transposed product, k x (oh * ow): row
// krow = (c, ky, kx), in the order of the wide and im2col GEMMs, holds that tap's input at every
// output pixel, zero in the padding. xg: the group's cig channels of h x w.
inline void im2col_image(const Conv2dParams& p, const float* xg, int64_t cig, float* col,
                         bool parallel) {
  const int64_t oh = p.out_h(), ow = p.out_w(), khw = p.kh * p.kw;
  for_each_index(parallel && cig > 1, cig, [&](int64_t ch) {
    const float* xc = xg + ch * p.h * p.w;
    for (int64_t r = 0; r < khw; ++r) {
      const int64_t ky = r / p.kw, kx = r % p.kw;
      // The output columns whose input column lies inside the image: [ox0, ox1).
      const int64_t x0 = kx * p.dil_w - p.pad_w;
      const int64_t ox0 = std::min(ow, ceil_div(std::max<int64_t>(-x0, 0), p.stride_w));
      const int64_t ox1 = std::clamp<int64_t>(ceil_div(p.w - x0, p.stride_w), ox0, ow);
      float* dst = col + (ch * khw + r) * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy, dst += ow) {
        const int64_t iy = oy * p.stride_h - p.pad_h + ky * p.dil_h;
        if (iy < 0 || iy >= p.h) {
          std::fill_n(dst, ow, 0.0f);
          continue;
        }
        const float* src = xc + iy * p.w + x0;
        std::fill_n(dst, ox0, 0.0f);
        for (int64_t ox = ox0; ox < ox1; ++ox) dst[ox] = src[ox * p.stride_w];
        std::fill(dst + ox1, dst + ow, 0.0f);
      }
    }
  });
}

// out (m x P, row-major) = a convolution's product for one image and group, computed as its
// transpose: out^T (P x m) = planes^T op(B) with planes the k x P column matrix (a plain 1x1's
// input itself: x forward, dy for dx) and op(B) the k x m weights, then transposed into out.
// init (per row of out, or null) starts every sum as the wide and im2col GEMMs start it.
template <class PackB>
void transposed_conv_image(const GemmConfig& cfg, int64_t m, int64_t p_count, int64_t k,
                           const float* planes, const PackB& weights, const float* init, float* out,
                           bool inner, const ChannelAffineAt& epilogue = {}) {
  ScratchLease scratch(kScratchConvOut, size_t(p_count * m));
  float* ct = scratch.get();
  float beta = 0.0f;
  if (init != nullptr) {
    for (int64_t i = 0; i < p_count; ++i) std::copy_n(init, m, ct + i * m);
    beta = 1.0f;
  }
  run_gemm(cfg, p_count, m, k, 1.0f, PackColMajorA{planes, p_count}, weights, beta, ct, m, inner);
  // Transposed (and the epilogue applied) in blocks of 64 channels, over the threads with `inner`.
  constexpr int64_t kChannels = 64;
  for_each_index(inner, ceil_div(m, kChannels), [&](int64_t b) {
    const int64_t j0 = b * kChannels, len = std::min(kChannels, m - j0);
    const float* rows[kMaxTransposeRows];
    for (int64_t i0 = 0; i0 < p_count; i0 += kMaxTransposeRows) {
      const int nrows = int(std::min<int64_t>(kMaxTransposeRows, p_count - i0));
      for (int r = 0; r < nrows; ++r) rows[r] = ct + (i0 + r) * m + j0;
      transpose_rows(out + j0 * p_count + i0, p_count, rows, nrows, len);
    }
    if (epilogue)
      for (int64_t o = j0; o < j0 + len; ++o) epilogue.apply(out, o, 0, p_count);
  });
}

// conv2d_forward through transposed_conv_image, image by image (and group by group).
inline void transposed_conv_forward(const Conv2dParams& p, const float* x, const float* w,
                                    const float* bias, float* y, const ChannelAffine* epilogue,
                                    bool outer, bool inner) {
  const GemmConfig& cfg = config_for(active_isa());
  const int64_t G = p.groups, cig = p.c_in / G, cog = p.c_out / G;
  const int64_t P = p.out_h() * p.out_w(), K = cig * p.kh * p.kw;
  const bool plain = plain_1x1(p);
  for_each_index(outer, p.n * G, [&](int64_t t) {
    const int64_t img = t / G, g = t % G;
    const float* xg = x + (img * p.c_in + g * cig) * p.h * p.w;
    std::optional<ScratchLease> col;
    if (!plain) {
      col.emplace(kScratchWide, size_t(K * P));
      im2col_image(p, xg, cig, col->get(), inner);
    }
    transposed_conv_image(
        cfg, cog, P, K, plain ? xg : col->get(), PackColMajorB{w + g * cog * K, K},
        bias != nullptr ? bias + g * cog : nullptr, y + (img * p.c_out + g * cog) * P, inner,
        {epilogue, img * p.c_out + g * cog});
  });
}

// The weights of a forward convolution on the pixel kernels, m x k per group (row-major), for
// `tasks` images and groups: packed here once for all of them, or, for one task with enough
// panels of 32 channels to share among the threads without splitting rows, panel by panel in
// the tasks that use them (see pixel_conv_image). Each panel's packing and products are the same
// either way, so are the bits.
class PixelPanels {
 public:
  PixelPanels(int64_t m, int64_t k, const float* w, int64_t groups, int64_t tasks, int threads)
      : m_(m), k_(k), w_(w) {
    late_ = tasks == 1 && ceil_div(m, kPixelWidth) >= 4 * threads;
    if (late_) return;
    per_group_ = pixel_packed_size(m, k);
    packed_.emplace(kScratchPrepack, per_group_ * size_t(groups));
    for (int64_t g = 0; g < groups; ++g)
      pack_pixel_weights(m, k, w + g * m * k, k, packed_->get() + size_t(g) * per_group_,
                         threads > 1);
  }
  PixelWeights group(int64_t g) const {
    if (late_) return {nullptr, w_ + g * m_ * k_, k_};
    return {packed_->get() + size_t(g) * per_group_, nullptr, 0};
  }

 private:
  int64_t m_, k_;
  const float* w_;
  bool late_ = false;
  size_t per_group_ = 0;
  std::optional<ScratchLease> packed_;
};

// Whether the pixel kernels' weight gradient (m x k) pays: its accumulator, read and written
// once per chunk of images, stays under 4 MiB. ResNet-50's layer4 1x1s (exactly 4 MiB) ran 15-25 %
// faster on the wide GEMM, and its 3x3/2 (9 MiB) 15 % faster on the strided GEMM.
inline bool pixel_wgrad_fits(int64_t m, int64_t k) {
  return pixel_packed_size(m, k) < (size_t(1) << 20);
}

// A strided, unpadded 1x1 (ResNet's downsampling shortcuts) is a stride-1 1x1 over every
// stride-th pixel: q of compact_1x1 below, on maps of oh x ow.
inline bool strided_1x1(const Conv2dParams& p) {
  return p.kh == 1 && p.kw == 1 && p.pad_h == 0 && p.pad_w == 0 &&
         (p.stride_h > 1 || p.stride_w > 1);
}

inline Conv2dParams compact_1x1(const Conv2dParams& p) {
  Conv2dParams q = p;
  q.h = p.out_h(), q.w = p.out_w(), q.stride_h = q.stride_w = 1;
  return q;
}

// f(full, compact) for every stride-th pixel of every map: its offsets in the n * c_in maps of
// h x w and in those of oh x ow; begin(plane) before each map's pixels.
template <class Begin, class F>
void for_strided_pixels(const Conv2dParams& p, bool parallel, const Begin& begin, const F& f) {
  const int64_t oh = p.out_h(), ow = p.out_w();
  for_each_index(parallel, p.n * p.c_in, [&](int64_t plane) {
    begin(plane);
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        f(plane * p.h * p.w + oy * p.stride_h * p.w + ox * p.stride_w, (plane * oh + oy) * ow + ox);
  });
}

// One image's output (m x oh x ow) through the pixel kernels, padding the input first if needed.
inline void pixel_conv_padded(const WideGeom& g, const int64_t* taps, const PixelWeights& pw,
                              int64_t m, const float* x, const float* bias, float* y, bool inner,
                              const ChannelAffineAt& epilogue = {}) {
  std::optional<ScratchLease> padded;
  const float* xp = padded_image(g, x, padded);
  pixel_conv_image(m, g.k(), g.oh(), g.ow(), g.wp(), taps, pw, xp, bias, y, inner, epilogue);
}

// The epilogue over all of y (planes of `plane` elements), for the paths that finish y at once.
inline void apply_epilogue(const ChannelAffine* e, float* y, int64_t planes, bool parallel) {
  if (e == nullptr) return;
  const ChannelAffineAt all{e, 0};
  for_each_run(parallel, planes, std::min<int64_t>(planes, 4 * available_threads()),
               [&](int64_t p0, int64_t p1) { all.apply(y, p0, p1, 0, e->plane); });
}

// A(o, q) of the wide weight-gradient GEMM: q = image * cols + wide column; rows of dyw.
struct PackWideDyA {
  const float* dyw;  // n x m x cols, zero in the dropped columns
  int64_t m, cols;
  void operator()(float* dst, int64_t i0, int mr, int64_t q0, int64_t kc) const {
    const float* rows[kMaxTransposeRows];
    for (int64_t q = q0; q < q0 + kc;) {
      const int64_t img = q / cols, col = q % cols, len = std::min(q0 + kc - q, cols - col);
      for (int i = 0; i < mr; ++i) rows[i] = dyw + (img * m + i0 + i) * cols + col;
      transpose_rows(dst + (q - q0) * mr, mr, rows, mr, len);
      q += len;
    }
  }
};

// B(q, krow) of the wide weight-gradient GEMM: the padded input tap krow at wide column q.
struct PackWideXB {
  const float* xp;  // image 0 of this group, padded when g->padded()
  int64_t img_stride;
  const WideGeom* g;
  const int64_t* taps;
  void operator()(float* dst, int64_t j0, int nr, int w, int64_t q0, int64_t kc) const {
    const int64_t cols = g->cols();
    const float* rows[kMaxTransposeRows];
    for (int64_t q = q0; q < q0 + kc;) {
      const int64_t img = q / cols, col = q % cols, len = std::min(q0 + kc - q, cols - col);
      for (int j = 0; j < nr; ++j) rows[j] = xp + img * img_stride + taps[j0 + j] + col;
      transpose_rows(dst + (q - q0) * w, w, rows, nr, len);
      q += len;
    }
    if (nr < w)
      for (int64_t q = 0; q < kc; ++q)
        for (int j = nr; j < w; ++j) dst[q * w + j] = 0.0f;
  }
};

// ---------------------------------------------------------------- small-K weight gradient
// With few taps (MNIST conv1: 9, Neuron-Inverter conv1d: 16) the weight-gradient GEMM is
// packing-bound: every reduction element is packed and used by a handful of FMAs. Here each
// dW[o][t] is a dot product of dy's rows with the input rows tap t meets, vectorised along the
// row (the last vector of a row is a partial one, zero-filled): lane l sums the row elements
// l mod width of every row of every image in order, then the lanes add in order. The split
// over output channels never changes that order, so results hold across thread counts.
constexpr int kDotTaps = 9;  // taps per register tile

struct DotWgradArgs {
  const float* dy;  // this group's dy of image 0; rows of ow, planes of oh x ow
  const float* xs;  // this group's (padded) input of image 0; rows of wp
  int64_t n, m, oh, ow, wp, dy_img_stride, x_img_stride, k;
  const int64_t* taps;  // k offsets into a padded input image
  float* dw;            // m x k
};

// The x rows a tile reads: xr + off[t] for taps t, or, when the block's taps are rows of three
// adjacent columns (a 3x3 kernel's nine), xr + (t / 3) * wp + t % 3 with the column a constant,
// so that the loop needs three row pointers instead of nine (nine kept GCC spilling to the stack).
template <bool Rows3>
struct DotTapRows {
  const float* row[Rows3 ? 3 : kDotTaps];
  __attribute__((always_inline)) const float* at(int t) const {
    if constexpr (Rows3) return row[t / 3] + t % 3;
    return row[t];
  }
};

template <class Ops, int TO, bool Rows3>
__attribute__((always_inline)) inline void dot_wgrad_body(const DotWgradArgs& a, int64_t o0,
                                                          int64_t o1) {
  using V = typename Ops::V;
  constexpr int VW = Ops::width;
  const int64_t P = a.oh * a.ow, ow = a.ow, full_end = ow / VW * VW;
  // The last, partial vector of every row has the same lanes: its mask is made once.
  typename Ops::Mask tail;
  Ops::mask(tail, std::max<int64_t>(ow - full_end, 1));
  for (int64_t o = o0; o < o1; o += TO) {
    const int64_t no = std::min<int64_t>(TO, o1 - o);
    for (int64_t t0 = 0; t0 < a.k; t0 += kDotTaps) {
      const int64_t nt = std::min<int64_t>(kDotTaps, a.k - t0);
      int64_t off[kDotTaps];
      for (int t = 0; t < kDotTaps; ++t) off[t] = a.taps[t0 + std::min<int64_t>(t, nt - 1)];
      V acc[TO][kDotTaps];
      for (int r = 0; r < TO; ++r)
        for (int t = 0; t < kDotTaps; ++t) Ops::zero(acc[r][t]);
      for (int64_t img = 0; img < a.n; ++img) {
        const float* dimg = a.dy + img * a.dy_img_stride;
        const float* ximg = a.xs + img * a.x_img_stride;
        for (int64_t oy = 0; oy < a.oh; ++oy) {
          const float* d[TO];
          for (int r = 0; r < TO; ++r)
            d[r] = dimg + (o + std::min<int64_t>(r, no - 1)) * P + oy * ow;
          const float* xr = ximg + oy * a.wp;
          DotTapRows<Rows3> x;
          if constexpr (Rows3) {
            for (int i = 0; i < 3; ++i) x.row[i] = xr + off[3 * i];
          } else {
            for (int t = 0; t < kDotTaps; ++t) x.row[t] = xr + off[t];
          }
          // Whole vectors with plain loads, then the partial one masked (its lanes past the row
          // read as zero): the same terms in the same order as one masked loop.
          const auto step = [&](int64_t q, bool full) __attribute__((always_inline)) {
            V dv[TO];
#pragma GCC unroll 4
            for (int r = 0; r < TO; ++r) Ops::load(dv[r], d[r] + q, tail, full);
#pragma GCC unroll 9
            for (int t = 0; t < kDotTaps; ++t) {
              V xv;
              Ops::load(xv, x.at(t) + q, tail, full);
#pragma GCC unroll 4
              for (int r = 0; r < TO; ++r) Ops::fma(acc[r][t], dv[r], xv);
            }
          };
          for (int64_t q = 0; q < full_end; q += VW) step(q, true);
          if (full_end < ow) step(full_end, false);
        }
      }
      // Fixed bounds, unrolled: a variable index into acc would keep it in memory, not registers.
#pragma GCC unroll 4
      for (int r = 0; r < TO; ++r)
#pragma GCC unroll 9
        for (int t = 0; t < kDotTaps; ++t) {
          float lanes[VW];
          Ops::store(lanes, acc[r][t]);
          float sum = 0.0f;
          for (int l = 0; l < VW; ++l) sum += lanes[l];
          if (r < no && t < nt) a.dw[(o + r) * a.k + t0 + t] = sum;
        }
    }
  }
}

// The vector operations per ISA; vectors go by reference (returning AVX vectors from a function
// compiled without AVX would change the ABI).
struct DotOpsGeneric {
  typedef float V __attribute__((vector_size(16)));
  using Mask = int64_t;  // valid lanes
  static constexpr int width = 4;
  static void zero(V& v) { v = V{0, 0, 0, 0}; }
  static void mask(Mask& m, int64_t len) { m = len; }
  static void load(V& v, const float* p, Mask len, bool full) {
    if (full) {
      std::memcpy(&v, p, sizeof(v));
      return;
    }
    float tmp[width] = {};
    std::memcpy(tmp, p, sizeof(float) * size_t(len));
    std::memcpy(&v, tmp, sizeof(v));
  }
  static void store(float* p, const V& v) { std::memcpy(p, &v, sizeof(v)); }
  static void fma(V& acc, const V& x, const V& y) { acc += x * y; }
};
template <bool Rows3>
inline void dot_wgrad_generic(const DotWgradArgs& a, int64_t o0, int64_t o1) {
  dot_wgrad_body<DotOpsGeneric, 1, Rows3>(a, o0, o1);
}

#ifdef IPUML_CPU_X86
#define IPUML_AVX2 __attribute__((target("avx2,fma")))
struct DotOpsAvx2 {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int width = 8;
  IPUML_AVX2 static void zero(V& v) { v = _mm256_setzero_ps(); }
  IPUML_AVX2 static void mask(Mask& m, int64_t len) {
    m = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(len)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // A masked load costs more than a plain one (two operations on Intel): only where it must.
  IPUML_AVX2 static void load(V& v, const float* p, const Mask& m, bool full) {
    v = full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
  }
  IPUML_AVX2 static void store(float* p, const V& v) { _mm256_storeu_ps(p, v); }
  IPUML_AVX2 static void fma(V& acc, const V& x, const V& y) { acc = _mm256_fmadd_ps(x, y, acc); }
};
#undef IPUML_AVX2
template <bool Rows3>
__attribute__((target("avx2,fma"))) inline void dot_wgrad_avx2(const DotWgradArgs& a, int64_t o0,
                                                               int64_t o1) {
  dot_wgrad_body<DotOpsAvx2, 1, Rows3>(a, o0, o1);
}
#define IPUML_AVX512 __attribute__((target("avx512f")))
struct DotOpsAvx512 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int width = 16;
  IPUML_AVX512 static void zero(V& v) { v = _mm512_setzero_ps(); }
  IPUML_AVX512 static void mask(Mask& m, int64_t len) { m = __mmask16((1u << len) - 1u); }
  IPUML_AVX512 static void load(V& v, const float* p, Mask m, bool full) {
    v = full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
  }
  IPUML_AVX512 static void store(float* p, const V& v) { _mm512_storeu_ps(p, v); }
  IPUML_AVX512 static void fma(V& acc, const V& x, const V& y) { acc = _mm512_fmadd_ps(x, y, acc); }
};
#undef IPUML_AVX512
template <bool Rows3>
__attribute__((target("avx512f"))) inline void dot_wgrad_avx512(const DotWgradArgs& a, int64_t o0,
                                                                int64_t o1) {
  dot_wgrad_body<DotOpsAvx512, 2, Rows3>(a, o0, o1);
}
#endif

// dW (m x k) for one group, split over blocks of output channels.
inline void dot_wgrad(const DotWgradArgs& a, bool parallel) {
  bool rows3 = a.k == kDotTaps;
  for (int t = 0; t < kDotTaps && rows3; ++t) rows3 = a.taps[t] == a.taps[t / 3 * 3] + t % 3;
  void (*fn)(const DotWgradArgs&, int64_t, int64_t) =
      rows3 ? dot_wgrad_generic<true> : dot_wgrad_generic<false>;
#ifdef IPUML_CPU_X86
  if (active_isa() == Isa::avx512) fn = rows3 ? dot_wgrad_avx512<true> : dot_wgrad_avx512<false>;
  if (active_isa() == Isa::avx2) fn = rows3 ? dot_wgrad_avx2<true> : dot_wgrad_avx2<false>;
#endif
  constexpr int64_t kBlock = 4;  // output channels per task (a multiple of every TO)
  for_each_index(parallel, ceil_div(a.m, kBlock),
                 [&](int64_t b) { fn(a, b * kBlock, std::min(a.m, (b + 1) * kBlock)); });
}

// A(c, (o, ky, kx)) = w[o][c][kh - 1 - ky][kw - 1 - kx]: the input gradient of a stride-1
// convolution is a stride-1 convolution of dy with the flipped, transposed kernel.
struct PackFlippedA {
  const float* w;  // this group's weights: cog x cig x kh x kw
  int64_t cig, khw;
  void operator()(float* dst, int64_t i0, int mr, int64_t p0, int64_t kc) const {
    for (int64_t q = 0; q < kc; ++q) {
      const int64_t krow = p0 + q, o = krow / khw, r = khw - 1 - krow % khw;
      for (int i = 0; i < mr; ++i) dst[q * mr + i] = w[(o * cig + i0 + i) * khw + r];
    }
  }
};

// dst[p] = sum over t < ntaps, in order, of z[zoff[t] + p] for p < len: the gather that sums
// the taps of a wide column matrix back onto the input (see wide_col2im_image). Each element's
// sum runs in the same order on every path, so the results are the same bits on every ISA.
using TapSumFn = void (*)(float*, const float*, const int64_t*, int64_t, int64_t);
inline void tap_sum_generic(float* dst, const float* z, const int64_t* zoff, int64_t ntaps,
                            int64_t len) {
  for (int64_t p = 0; p < len; ++p) dst[p] = z[zoff[0] + p];
  for (int64_t t = 1; t < ntaps; ++t)
    for (int64_t p = 0; p < len; ++p) dst[p] += z[zoff[t] + p];
}
#ifdef IPUML_CPU_X86
__attribute__((target("avx2"))) inline void tap_sum_avx(float* dst, const float* z,
                                                        const int64_t* zoff, int64_t ntaps,
                                                        int64_t len) {
  int64_t p = 0;
  for (; p + 16 <= len; p += 16) {
    __m256 a0 = _mm256_loadu_ps(z + zoff[0] + p), a1 = _mm256_loadu_ps(z + zoff[0] + p + 8);
    for (int64_t t = 1; t < ntaps; ++t) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(z + zoff[t] + p));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(z + zoff[t] + p + 8));
    }
    _mm256_storeu_ps(dst + p, a0);
    _mm256_storeu_ps(dst + p + 8, a1);
  }
  for (; p + 8 <= len; p += 8) {
    __m256 a = _mm256_loadu_ps(z + zoff[0] + p);
    for (int64_t t = 1; t < ntaps; ++t) a = _mm256_add_ps(a, _mm256_loadu_ps(z + zoff[t] + p));
    _mm256_storeu_ps(dst + p, a);
  }
  if (p < len) tap_sum_generic(dst + p, z + p, zoff, ntaps, len - p);
}
#endif
inline TapSumFn tap_sum_for(Isa isa) {
#ifdef IPUML_CPU_X86
  if (isa != Isa::generic) return tap_sum_avx;
#else
  (void)isa;
#endif
  return tap_sum_generic;
}

// The input gradient of one image and group of a stride-1 convolution as a GEMM and a gather,
// both on the padded input's row pitch wp. With dy laid out wide (dyw[o][oy * wp + ox], zero for
// ox >= ow), Z = W^T dyw has a row per (channel c, tap t), and the padded dx at position p of
// channel c is the sum over taps of Z[(c, t)][p - offset of t]: contiguous runs, summed in
// registers. Z's rows carry zero margins as wide as the largest tap offset, so the runs need no
// bounds, and dyw's dropped columns are zero, so they add nothing. Unlike the flipped-kernel GEMM
// this multiplies nothing by dy's zero border, which an unpadded convolution's gradient is mostly
// made of (MNIST conv2: 11 x 11 outputs padded to 15 x 15).
// dy_rows[o] = o * g.cols(): B(o, q) = dyw[dy_rows[o] + q] for the tap kernels.
inline void wide_col2im_image(const GemmConfig& cfg, const WideGeom& g, const PrepackedA& a,
                              int64_t cog, const int64_t* dy_rows, const float* dy, float* dx,
                              bool inner) {
  const int64_t oh = g.oh(), ow = g.ow(), wp = g.wp(), cols = g.cols(), khw = g.kh * g.kw;
  ScratchLease dyw(kScratchConv, size_t(cog * cols));
  for (int64_t o = 0; o < cog; ++o) {
    float* d = dyw.get() + o * cols;
    for (int64_t oy = 0; oy < oh; ++oy) {
      copy_row(d + oy * wp, dy + (o * oh + oy) * ow, ow);
      if (oy + 1 < oh) std::fill(d + oy * wp + ow, d + (oy + 1) * wp, 0.0f);
    }
  }
  const int64_t m = g.c * khw, margin = g.tap(khw - 1), ldz = cols + 2 * margin;
  ScratchLease z(kScratchConvOut, size_t(m * ldz));
  for (int64_t r = 0; r < m; ++r) {
    std::fill(z.get() + r * ldz, z.get() + r * ldz + margin, 0.0f);
    std::fill(z.get() + r * ldz + margin + cols, z.get() + (r + 1) * ldz, 0.0f);
  }
  run_wide_gemm(cfg, m, cols, cog, a, dyw.get(), dy_rows, 0.0f, z.get() + margin, ldz, inner);
  int64_t zoff_stack[64];
  std::vector<int64_t> zoff_heap;
  int64_t* zoff = zoff_stack;
  if (khw > 64) {
    zoff_heap.resize(size_t(khw));
    zoff = zoff_heap.data();
  }
  for (int64_t t = 0; t < khw; ++t) zoff[t] = t * ldz + margin - g.tap(t);
  const TapSumFn sum = tap_sum_for(active_isa());
  for (int64_t c = 0; c < g.c; ++c) {
    const float* zc = z.get() + c * khw * ldz;
    if (!g.padded()) {
      sum(dx + c * g.plane(), zc, zoff, khw, g.plane());
      continue;
    }
    for (int64_t y = 0; y < g.h; ++y)
      sum(dx + (c * g.h + y) * g.w, zc + (g.ph + y) * wp + g.pw, zoff, khw, g.w);
  }
}

// Chunks of images that the weight gradient's reduction splits into: a power of two (threads
// come in even numbers), at most one per image and 16 in all, each at least 512 reduction columns
// deep. It depends on the shape only, never on the thread count.
inline int64_t wgrad_chunks(int64_t images, int64_t per_image) {
  constexpr int64_t kMinDepth = 512, kMaxChunks = 16;
  int64_t chunks = 1;
  while (2 * chunks <= std::min(images, kMaxChunks) && 2 * chunks * kMinDepth <= images * per_image)
    chunks *= 2;
  return chunks;
}

// dW (m x K) of one group over nimg images of a stride-1 convolution through the pixel kernels
// (conv_direct.hpp): images in order, each padded if needed and its dy transposed once.
// K, the reduction depth, is g.k() for a stride-1 convolution and c_in kh kw for a strided one
// over its phase images (whose split kernel g describes has zero taps that K leaves out).
inline void pixel_wgrad_chunk(const WideGeom& g, const int64_t* taps, int64_t K, int64_t nimg,
                              int64_t x_img_stride, int64_t m, int64_t dy_img_stride,
                              const float* x, const float* dy, float* dw, bool inner) {
  const int64_t P = g.oh() * g.ow();
  const size_t csize = pixel_packed_size(m, K);
  ScratchLease cbuf(kScratchA, csize);
  std::fill(cbuf.get(), cbuf.get() + csize, 0.0f);
  ScratchLease dyt(kScratchConvOut, pixel_packed_size(m, P));
  std::optional<ScratchLease> padded;
  for (int64_t img = 0; img < nimg; ++img) {
    const float* xp = padded_image(g, x + img * x_img_stride, padded);
    pixel_wgrad_image(m, K, g.oh(), g.ow(), g.wp(), taps, xp, dy + img * dy_img_stride, dyt.get(),
                      cbuf.get(), inner);
  }
  for_each_index(inner, m, [&](int64_t o) {
    const float* src = cbuf.get() + (o / kPixelWidth) * K * kPixelWidth + o % kPixelWidth;
    for (int64_t p = 0; p < K; ++p) dw[o * K + p] = src[p * kPixelWidth];
  });
}

// nimg images (img_stride apart) padded as g says into `lease` (img_stride becomes the padded
// images' stride), or x itself when g has no padding.
inline const float* padded_images(const WideGeom& g, int64_t nimg, const float* x,
                                  int64_t& img_stride, std::optional<ScratchLease>& lease) {
  if (!g.padded()) return x;
  lease.emplace(kScratchConv, size_t(nimg * g.c * g.plane()));
  for (int64_t img = 0; img < nimg; ++img)
    pad_image(g, g.c, x + img * img_stride, lease->get() + img * g.c * g.plane());
  img_stride = g.c * g.plane();
  return lease->get();
}

// dW (m x K) of one group over nimg images of a stride-1 convolution: the wide GEMM of dy (laid
// out wide, zero in the dropped columns, so they add nothing) with the (padded) input's taps.
inline void wide_wgrad_chunk(const GemmConfig& cfg, const WideGeom& g, const int64_t* taps,
                             int64_t nimg, int64_t x_img_stride, int64_t m, int64_t dy_img_stride,
                             const float* x, const float* dy, float* dw, bool inner) {
  const int64_t oh = g.oh(), ow = g.ow(), wp = g.wp(), cols = g.cols();
  std::optional<ScratchLease> xpad;
  int64_t img_stride = x_img_stride;
  const float* xs = padded_images(g, nimg, x, img_stride, xpad);
  ScratchLease dyw(kScratchConvOut, size_t(nimg * m * cols));
  for (int64_t row = 0; row < nimg * m; ++row) {
    const float* src = dy + (row / m) * dy_img_stride + (row % m) * oh * ow;
    float* d = dyw.get() + row * cols;
    for (int64_t oy = 0; oy < oh; ++oy) {
      copy_row(d + oy * wp, src + oy * ow, ow);
      if (oy + 1 < oh) std::fill(d + oy * wp + ow, d + (oy + 1) * wp, 0.0f);
    }
  }
  run_gemm(cfg, m, g.k(), nimg * cols, 1.0f, PackWideDyA{dyw.get(), m, cols},
           PackWideXB{xs, img_stride, &g, taps}, 0.0f, dw, g.k(), inner);
}

// dW (m x K) of one group over nimg images of a stride-1 convolution on AVX2 through the pixel
// kernels (wgrad_block_avx2), with the wide GEMM's bits: its k blocks (block_depth over the
// nimg x cols wide columns) each summed from zero and rounded into dW in order, over the real
// pixels only (a dropped column's zero product leaves a sum unchanged: a sum that starts at +0
// never becomes -0). Tiles of 6 reduction rows x 16 channels run every block, each in a task.
inline void pixel_wgrad_chunk_avx2(const GemmConfig& cfg, const WideGeom& g, const int64_t* taps,
                                   int64_t nimg, int64_t x_img_stride, int64_t m,
                                   int64_t dy_img_stride, const float* x, const float* dy,
                                   float* dw, bool inner) {
#ifdef IPUML_CPU_X86
  const int64_t oh = g.oh(), ow = g.ow(), wp = g.wp(), cols = g.cols(), K = g.k(), P = oh * ow;
  std::optional<ScratchLease> xpad;
  int64_t img_stride = x_img_stride;
  const float* xs = padded_images(g, nimg, x, img_stride, xpad);
  // dy of every image transposed, 32 channels a pixel, panel after panel (zero past m).
  const int64_t panels = ceil_div(m, kPixelWidth), image = panels * P * kPixelWidth;
  ScratchLease dyt(kScratchConvOut, size_t(nimg * image));
  for_each_index(inner, nimg * panels, [&](int64_t t) {
    const int64_t img = t / panels, o0 = (t % panels) * kPixelWidth;
    const int nr = int(std::min<int64_t>(kPixelWidth, m - o0));
    const float* rows[kPixelWidth];
    for (int j = 0; j < nr; ++j) rows[j] = dy + img * dy_img_stride + (o0 + j) * P;
    float* d = dyt.get() + img * image + o0 * P;
    transpose_rows(d, kPixelWidth, rows, nr, P);
    if (nr < kPixelWidth)
      for (int64_t q = 0; q < P; ++q)
        std::fill(d + q * kPixelWidth + nr, d + (q + 1) * kPixelWidth, 0.0f);
  });
  // The GEMM's k blocks as runs of real pixels.
  const int64_t depth = nimg * cols, kc = block_depth(cfg, depth), blocks = ceil_div(depth, kc);
  std::vector<WgradRun> runs;
  std::vector<size_t> first_run(size_t(blocks + 1));
  for (int64_t b = 0; b < blocks; ++b) {
    first_run[size_t(b)] = runs.size();
    for (int64_t q = b * kc, q1 = std::min(depth, q + kc); q < q1;) {
      const int64_t img = q / cols, oy = q % cols / wp, ox = q % cols % wp;
      if (ox >= ow) {  // a dropped column: on to the next row
        q += wp - ox;
        continue;
      }
      const int64_t len = std::min(ow - ox, q1 - q);
      runs.push_back(
          {img * img_stride + oy * wp + ox, img * image + (oy * ow + ox) * kPixelWidth, len});
      q += len;
    }
  }
  first_run[size_t(blocks)] = runs.size();
  ScratchLease cbuf(kScratchA, size_t(panels * K * kPixelWidth));  // [panel][krow][32]
  const WgradBlockKernel* kern = wgrad_block_kernels_avx2();
  // A task takes a half panel of channels and a range of tiles and runs them block by block, so
  // that a block's dy (up to 24 KiB for kc pixels) stays in L1 across its tiles: tile by tile,
  // each streamed all of dy (MB on the stem's maps) and ran 15 % slower than the wide GEMM.
  const int64_t ktiles = ceil_div(K, int64_t(kPixelMrAvx2));
  const int64_t parts =
      inner ? std::min(ktiles, ceil_div(4 * int64_t(available_threads()), 2 * panels)) : 1;
  for_each_index(inner, panels * 2 * parts, [&](int64_t t) {
    const int64_t pn = t / (2 * parts), half = t / parts % 2, part = t % parts;
    if (pn * kPixelWidth + 16 * half >= m) return;  // no channels in this half
    const float* d = dyt.get() + pn * P * kPixelWidth + 16 * half;
    float* c = cbuf.get() + pn * K * kPixelWidth + 16 * half;
    for (int64_t b = 0; b < blocks; ++b) {
      const WgradRun* r = runs.data() + first_run[size_t(b)];
      const int64_t nruns = int64_t(first_run[size_t(b + 1)] - first_run[size_t(b)]);
      for (int64_t kt = part * ktiles / parts; kt < (part + 1) * ktiles / parts; ++kt) {
        const int64_t p0 = kt * kPixelMrAvx2;
        const int rows = int(std::min<int64_t>(kPixelMrAvx2, K - p0));
        kern[rows](xs, taps + p0, r, nruns, d, c + p0 * kPixelWidth, b == 0);
      }
    }
  });
  for_each_index(inner, m, [&](int64_t o) {
    const float* src = cbuf.get() + (o / kPixelWidth) * K * kPixelWidth + o % kPixelWidth;
    for (int64_t p = 0; p < K; ++p) dw[o * K + p] = src[p * kPixelWidth];
  });
#else
  (void)cfg, (void)g, (void)taps, (void)nimg, (void)x_img_stride, (void)m, (void)dy_img_stride;
  (void)x, (void)dy, (void)dw, (void)inner;
#endif
}

// Bands of rows per task when there are too few images to go round (never with a sink: its
// images must be whole).
inline int64_t small_k_bands(const Conv2dParams& p, int threads) {
  const int64_t tasks = p.n * p.groups;
  return tasks < 2 * threads ? std::min(p.out_h(), ceil_div(int64_t(2) * threads, tasks)) : 1;
}

// Where a task writes image img of the forward's output: y's own place or, for a sink, one
// image in scratch that `lease` holds (the streaming paths have one group).
inline float* image_output(const Conv2dParams& p, float* y, int64_t img, const ConvImageSink* sink,
                           std::optional<ScratchLease>& lease) {
  const int64_t image = p.c_out * p.out_h() * p.out_w();
  if (sink == nullptr) return y + img * image;
  lease.emplace(kScratchImage, size_t(image));
  return lease->get();
}

// The forward of a stride-1 convolution with a few taps (MNIST conv1) on AVX2, each pixel
// vector's taps in registers (conv_small_k.hpp); whole images per task, and with few images
// bands of their rows too.
inline void small_k_conv(const Conv2dParams& p, const WideGeom& wg, const int64_t* taps,
                         const float* x, const float* w, const float* bias, float* y,
                         const ChannelAffine* epilogue, const ConvImageSink* sink) {
  const int64_t G = p.groups, cig = p.c_in / G, cog = p.c_out / G, K = wg.k();
  const int64_t oh = wg.oh(), ow = wg.ow(), P = oh * ow, tasks = p.n * G;
  const int threads = available_threads();
  const auto rows = small_k_rows(K);
  const int64_t bands = small_k_bands(p, threads);
  for_each_index(threads > 1 && tasks * bands > 1, tasks * bands, [&](int64_t i) {
    const int64_t t = i / bands, band = i % bands, img = t / G, g = t % G;
    std::optional<ScratchLease> lease, image;
    const float* xp = padded_image(wg, x + (img * p.c_in + g * cig) * p.h * p.w, lease);
    float* yg = image_output(p, y, img, sink, image) + g * cog * P;
    const int64_t oy0 = band * oh / bands, oy1 = (band + 1) * oh / bands;
    rows(cog, taps, w + g * cog * K, bias != nullptr ? bias + g * cog : nullptr, xp, oh, ow,
         wg.wp(), oy0, oy1, yg);
    const ChannelAffineAt at{epilogue, img * p.c_out + g * cog};
    if (at)
      for (int64_t o = 0; o < cog; ++o) at.apply(yg, o, oy0 * ow, oy1 * ow);
    if (sink != nullptr) sink->consume(img, yg);
  });
}

// The 16 transformed weight operands of a Winograd convolution (conv_winograd.hpp) with m
// output and c input channels, kernel(o, ch, g) filling the 3x3 kernel of each pair; `buf` holds
// winograd_weights_size(cfg, m, c) floats.
template <class Kernel>
std::array<PrepackedA, kWinoPos> winograd_weights(const GemmConfig& cfg, int64_t m, int64_t c,
                                                  const Kernel& kernel, ScratchLease& buf,
                                                  bool parallel) {
  std::array<PrepackedA, kWinoPos> u;
  wino_prepack_weights(cfg, m, c, kernel, buf.get(), u.data(), parallel);
  return u;
}
inline size_t winograd_weights_size(const GemmConfig& cfg, int64_t m, int64_t c) {
  return size_t(kWinoPos * wino_weights_stride(cfg, m, c));
}

}  // namespace detail

namespace detail {
IPUML_INLINE std::atomic<bool>& winograd_state() {
  static std::atomic<bool> enabled{[] {
    const char* env = std::getenv("IPUML_CONV_WINOGRAD");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }()};
  return enabled;
}
// Whether convolution p takes the Winograd path.
IPUML_INLINE bool use_winograd(const Conv2dParams& p) {
  return winograd_state().load(std::memory_order_relaxed) && winograd_applies(p);
}
}  // namespace detail

IPUML_INLINE void set_conv_winograd(bool enabled) { detail::winograd_state().store(enabled); }
IPUML_INLINE void set_conv_transposed(bool enabled) { detail::transposed_state().store(enabled); }
IPUML_INLINE void set_conv_avx2_pixels(bool enabled) { detail::avx2_pixels_state().store(enabled); }
IPUML_INLINE ConvPath conv_forward_path(const Conv2dParams& p) {
  const int64_t G = p.groups, K = p.c_in / G * p.kh * p.kw, taps = p.kh * p.kw;
  const bool inner = p.n * G < 2 * detail::available_threads();
  if (detail::use_winograd(p) && detail::winograd_pays(p)) return ConvPath::winograd;
  if (detail::space_to_depth_applies(p)) return ConvPath::space_to_depth;
  if (detail::phases_split(p) && detail::use_pixel_kernels(K, taps)) return ConvPath::phase_pixels;
  if (p.stride_h == 1 && p.stride_w == 1) {
    const bool flat = detail::flat_1x1(p, K);
    if (!flat && detail::small_k_forward(K)) return ConvPath::small_k;
    if (detail::transposed_conv(p, p.c_out / G, K, inner)) return ConvPath::transposed;
    if (flat || detail::pixel_kernels_convolve(K, taps)) return ConvPath::pixels;
    return ConvPath::wide;
  }
  if (detail::strided_1x1(p)) return ConvPath::gathered_1x1;
  if (detail::transposed_conv(p, p.c_out / G, K, inner)) return ConvPath::transposed;
  return ConvPath::im2col;
}
IPUML_INLINE bool conv_runs_transposed(const Conv2dParams& p) {
  return conv_forward_path(detail::strided_1x1(p) ? detail::compact_1x1(p) : p) ==
         ConvPath::transposed;
}
IPUML_INLINE bool conv_winograd_enabled() { return detail::winograd_state().load(); }

IPUML_INLINE void check_conv2d_params(const char* op, const Conv2dParams& p) {
  IPUML_CHECK(
      p.n >= 0 && p.c_in >= 1 && p.h >= 1 && p.w >= 1 && p.c_out >= 1 && p.kh >= 1 && p.kw >= 1, op,
      ": sizes must be positive, got n=", p.n, " c_in=", p.c_in, " h=", p.h, " w=", p.w,
      " c_out=", p.c_out, " kernel=", p.kh, "x", p.kw);
  IPUML_CHECK(p.stride_h >= 1 && p.stride_w >= 1 && p.dil_h >= 1 && p.dil_w >= 1, op,
              ": stride and dilation must be >= 1, got stride=", p.stride_h, "x", p.stride_w,
              " dilation=", p.dil_h, "x", p.dil_w);
  IPUML_CHECK(p.pad_h >= 0 && p.pad_w >= 0, op, ": padding must be >= 0, got ", p.pad_h, "x",
              p.pad_w);
  IPUML_CHECK(p.groups >= 1 && p.c_in % p.groups == 0 && p.c_out % p.groups == 0, op,
              ": groups=", p.groups, " must divide c_in=", p.c_in, " and c_out=", p.c_out);
  IPUML_CHECK(p.out_h() >= 1 && p.out_w() >= 1, op, ": the ", p.kh, "x", p.kw, " kernel (dilation ",
              p.dil_h, "x", p.dil_w, ") does not fit the padded ", p.h, "x", p.w,
              " input (padding ", p.pad_h, "x", p.pad_w, ")");
}

IPUML_INLINE void conv2d_forward(const Conv2dParams& p, const float* x, const float* w,
                                 const float* bias, float* y) {
  conv2d_forward(p, x, w, bias, y, nullptr);
}

IPUML_INLINE bool conv_forward_streams_images(const Conv2dParams& p) {
  if (p.groups != 1) return false;
  const ConvPath path = conv_forward_path(p);
  return path == ConvPath::pixels ||
         (path == ConvPath::small_k && detail::small_k_bands(p, detail::available_threads()) == 1);
}

namespace detail {
inline void conv2d_forward_to(const Conv2dParams& p, const float* x, const float* w,
                              const float* bias, float* y, const ChannelAffine* epilogue,
                              const ConvImageSink* sink);
}  // namespace detail

IPUML_INLINE void conv2d_forward(const Conv2dParams& p, const float* x, const float* w,
                                 const float* bias, float* y, const ChannelAffine* epilogue) {
  detail::conv2d_forward_to(p, x, w, bias, y, epilogue, nullptr);
}

IPUML_INLINE void conv2d_forward(const Conv2dParams& p, const float* x, const float* w,
                                 const float* bias, const ConvImageSink& sink) {
  check_conv2d_params("conv2d_forward", p);
  IPUML_CHECK(static_cast<bool>(sink.consume), "conv2d_forward: the image sink has no consumer");
  if (conv_forward_streams_images(p))
    return detail::conv2d_forward_to(p, x, w, bias, nullptr, nullptr, &sink);
  // The paths that finish the output at once (or in pieces smaller than an image): all of it,
  // then the images.
  // The image slot is free: these paths do not stream.
  const int64_t image = p.c_out * p.out_h() * p.out_w();
  const detail::ScratchLease y(detail::kScratchImage, size_t(std::max<int64_t>(1, p.n * image)));
  detail::conv2d_forward_to(p, x, w, bias, y.get(), nullptr, nullptr);
  detail::for_each_index(detail::available_threads() > 1 && p.n > 1, p.n,
                         [&](int64_t img) { sink.consume(img, y.get() + img * image); });
}

inline void detail::conv2d_forward_to(const Conv2dParams& p, const float* x, const float* w,
                                      const float* bias, float* y, const ChannelAffine* epilogue,
                                      const ConvImageSink* sink) {
  check_conv2d_params("conv2d_forward", p);
  IPUML_CHECK(epilogue == nullptr ||
                  (epilogue->channels == p.c_out && epilogue->plane == p.out_h() * p.out_w()),
              "conv2d_forward: an epilogue over ", epilogue->channels, " channels of ",
              epilogue->plane, " elements does not match the output's ", p.c_out, " of ",
              p.out_h() * p.out_w());
  const int64_t G = p.groups, cig = p.c_in / G, cog = p.c_out / G, oh = p.out_h(), ow = p.out_w();
  const int64_t P = oh * ow, K = cig * p.kh * p.kw;
  const detail::GemmConfig& cfg = detail::config_for(active_isa());
  const int threads = detail::available_threads();
  const int64_t tasks = p.n * G;
  // Whole images per task when there are enough of them; otherwise parallel inside the GEMM.
  const bool outer = threads > 1 && tasks > 1;
  const bool inner = tasks < 2 * threads;
  const ConvPath path = conv_forward_path(p);
  if (path == ConvPath::winograd) {
    detail::ScratchLease buf(detail::kScratchPrepack,
                             detail::winograd_weights_size(cfg, p.c_out, p.c_in));
    const auto u = detail::winograd_weights(
        cfg, p.c_out, p.c_in,
        [&](int64_t o, int64_t c, float* g) { std::copy_n(w + (o * p.c_in + c) * 9, 9, g); }, buf,
        threads > 1);
    detail::winograd_conv(cfg, {p.n, p.c_in, p.h, p.w, p.c_out, p.pad_h, p.pad_w}, u.data(), x,
                          bias, y, threads > 1);
    detail::apply_epilogue(epilogue, y, p.n * p.c_out, threads > 1);
    return;
  }
  if (path == ConvPath::space_to_depth) {
    const detail::SpaceToDepthInput in(p, x, threads > 1);
    const Conv2dParams& q = in.q;
    detail::ScratchLease ws(detail::kScratchPhaseW, size_t(q.c_out * q.c_in * q.kh * q.kw));
    detail::space_to_depth_weights(p, q, w, ws.get());
    conv2d_forward(q, in.xs.get(), ws.get(), bias, y, epilogue);
    return;
  }
  if (path == ConvPath::phase_pixels) {
    // Strided with many channels (ResNet's 3x3/2): the pixel kernels over the phase images,
    // with only the taps that exist, reading every input row in place where the strided GEMM
    // gathered its input tap by tap. The weights keep their order and packing.
    const detail::SpaceToDepthInput in(p, x, threads > 1);
    const Conv2dParams& q = in.q;
    const std::vector<int64_t> taps = detail::space_to_depth_tap_offsets(p, q);
    const detail::PixelPanels panels(p.c_out, K, w, 1, p.n, threads);
    const int64_t q_image = q.c_in * q.h * q.w;
    detail::for_each_index(outer, p.n, [&](int64_t img) {
      detail::pixel_conv_image(p.c_out, K, oh, ow, q.w, taps.data(), panels.group(0),
                               in.xs.get() + img * q_image, bias, y + img * p.c_out * P, inner,
                               {epilogue, img * p.c_out});
    });
    return;
  }
  if (p.stride_h == 1 && p.stride_w == 1) {
    // A flat 1x1 reads its image as one row of oh * ow pixels.
    const bool flat = detail::flat_1x1(p, K);
    const detail::WideGeom wg =
        flat ? detail::WideGeom{cig, 1, P, 0, 0, 1, 1, 1, 1}
             : detail::WideGeom{cig, p.h, p.w, p.pad_h, p.pad_w, p.kh, p.kw, p.dil_h, p.dil_w};
    const std::vector<int64_t> taps = wg.taps();
    if (path == ConvPath::small_k)
      return detail::small_k_conv(p, wg, taps.data(), x, w, bias, y, epilogue, sink);
    if (path == ConvPath::transposed)
      return detail::transposed_conv_forward(p, x, w, bias, y, epilogue, outer, inner);
    if (path == ConvPath::pixels) {
      const detail::PixelPanels panels(cog, K, w, G, tasks, threads);
      detail::for_each_index(outer, tasks, [&](int64_t t) {
        const int64_t img = t / G, g = t % G;
        std::optional<detail::ScratchLease> image;
        float* yt = detail::image_output(p, y, img, sink, image) + g * cog * P;
        detail::pixel_conv_padded(wg, taps.data(), panels.group(g), cog,
                                  x + (img * p.c_in + g * cig) * p.h * p.w,
                                  bias != nullptr ? bias + g * cog : nullptr, yt, inner,
                                  {epilogue, img * p.c_out + g * cog});
        if (sink != nullptr) sink->consume(img, yt);
      });
      return;
    }
    const size_t per_group = detail::prepacked_a_size(cfg, cog, K);
    detail::ScratchLease packed(detail::kScratchPrepack, per_group * size_t(G));
    std::vector<detail::PrepackedA> a;
    for (int64_t g = 0; g < G; ++g)
      a.push_back(detail::prepack_a(cfg, cog, K, detail::PackRowMajorA{w + g * cog * K, K},
                                    packed.get() + size_t(g) * per_group));
    detail::for_each_index(outer, tasks, [&](int64_t t) {
      const int64_t img = t / G, g = t % G;
      detail::wide_conv_image(
          cfg, wg, taps.data(), a[size_t(g)], cog, x + (img * p.c_in + g * cig) * p.h * p.w,
          bias != nullptr ? bias + g * cog : nullptr, y + (img * p.c_out + g * cog) * P, inner,
          {epilogue, img * p.c_out + g * cog});
    });
    return;
  }
  if (path == ConvPath::gathered_1x1) {
    // The stride-1 path on the gathered pixels, 10-25 % faster than the im2col GEMM below.
    detail::ScratchLease xs(detail::kScratchPhases, size_t(p.n * p.c_in * P));
    float* xc = xs.get();
    detail::for_strided_pixels(
        p, threads > 1, [](int64_t) {}, [&](int64_t f, int64_t c) { xc[c] = x[f]; });
    conv2d_forward(detail::compact_1x1(p), xs.get(), w, bias, y, epilogue);
    return;
  }
  if (path == ConvPath::transposed)
    return detail::transposed_conv_forward(p, x, w, bias, y, epilogue, outer, inner);
  // Strided: implicit im2col, packed from the image tap by tap.
  detail::for_each_index(outer, tasks, [&](int64_t t) {
    const int64_t img = t / G, g = t % G;
    const float* xg = x + (img * p.c_in + g * cig) * p.h * p.w;
    float* yg = y + (img * p.c_out + g * cog) * P;
    float beta = 0.0f;
    if (bias != nullptr) {
      for (int64_t o = 0; o < cog; ++o) std::fill(yg + o * P, yg + (o + 1) * P, bias[g * cog + o]);
      beta = 1.0f;
    }
    detail::run_gemm(cfg, cog, P, K, 1.0f, detail::PackRowMajorA{w + g * cog * K, K},
                     detail::PackIm2colB{xg, &p, ow}, beta, yg, P, inner);
  });
  detail::apply_epilogue(epilogue, y, p.n * p.c_out, threads > 1);
}

namespace detail {

// What the passes of p derive alike: the per-group shapes and the split over images and groups
// (whole images per task when there are enough of them, parallel inside each task otherwise).
struct ConvTasks {
  int64_t G, cig, cog, oh, ow, P, K, HW, khw;
  int threads;
  int64_t tasks;
  bool outer, inner;
  explicit ConvTasks(const Conv2dParams& p)
      : G(p.groups),
        cig(p.c_in / G),
        cog(p.c_out / G),
        oh(p.out_h()),
        ow(p.out_w()),
        P(oh * ow),
        K(cig * p.kh * p.kw),
        HW(p.h * p.w),
        khw(p.kh * p.kw),
        threads(available_threads()),
        tasks(p.n * G),
        outer(threads > 1 && tasks > 1),
        inner(tasks < 2 * threads) {}
};

#ifdef IPUML_CPU_X86
// The gather's geometry for one image and group of p.
inline GatherGeom gather_geom(const Conv2dParams& p) {
  return {p.c_in / p.groups, p.h,     p.w,     p.out_h(), p.out_w(), p.kh, p.kw,
          p.dil_h,           p.dil_w, p.pad_h, p.pad_w};
}
#endif
// {0, plane, 2 plane, ...}: the offsets of n channel planes, as the taps of a flat product.
inline std::vector<int64_t> plane_rows(int64_t n, int64_t plane) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[size_t(i)] = i * plane;
  return rows;
}

// The stride-1 input gradient as Z = W^T dy over the real outputs only, then a masked gather of
// each input pixel's taps (no wasted products): Z from the pixel kernels (AVX-512, W^T packed
// once) or from the GEMM on dy read in place (AVX2, a: W^T prepacked per group, the wide col2im
// form's bits). A flat 1x1's Z is dx itself: no gather.
inline void backward_input_gathered(const Conv2dParams& p, const float* dy, const float* w,
                                    float* dx, bool flat, const PrepackedA* a) {
#ifdef IPUML_CPU_X86
  const ConvTasks c(p);
  const int64_t kz = c.cig * c.khw;                                          // Z's rows
  const size_t per_group = a != nullptr ? 0 : pixel_packed_size(kz, c.cog);  // (a 1x1: kz = cig)
  std::optional<ScratchLease> packed;
  if (a == nullptr) {
    packed.emplace(kScratchPrepack, per_group * size_t(c.G));
    for (int64_t g = 0; g < c.G; ++g)
      pack_pixel_weights_t(kz, c.cog, w + g * c.cog * c.K, c.K,
                           packed->get() + size_t(g) * per_group, c.threads > 1);
  }
  const std::vector<int64_t> rows = plane_rows(c.cog, c.P);
  const GatherGeom gg = gather_geom(p);
  for_each_index(c.outer, c.tasks, [&](int64_t t) {
    const int64_t img = t / c.G, g = t % c.G;
    const float* dyg = dy + (img * p.c_out + g * c.cog) * c.P;
    float* dxg = dx + (img * p.c_in + g * c.cig) * c.HW;
    if (flat) {
      pixel_conv_image(c.cig, c.cog, 1, c.P, c.P, rows.data(),
                       packed->get() + size_t(g) * per_group, dyg, nullptr, dxg, c.inner);
      return;
    }
    ScratchLease z(kScratchConvOut, size_t(kz * c.P));
    if (a != nullptr) {
      run_wide_gemm(config_for(active_isa()), kz, c.P, c.cog, a[g], dyg, rows.data(), 0.0f, z.get(),
                    c.P, c.inner);
      tap_gather_avx2(gg, z.get(), dxg);
    } else {
      pixel_conv_image(kz, c.cog, 1, c.P, c.P, rows.data(), packed->get() + size_t(g) * per_group,
                       dyg, nullptr, z.get(), c.inner);
      tap_gather_avx512(gg, z.get(), dxg);
    }
  });
#else
  (void)p, (void)dy, (void)w, (void)dx, (void)flat, (void)a;
#endif
}

// conv2d_backward_input at stride 1 (after Winograd): the pixel kernels, the transposed product,
// or the wide GEMM in its flipped or col2im form, whichever applies.
IPUML_INLINE void conv2d_backward_input_stride1(const Conv2dParams& p, const float* dy,
                                                const float* w, float* dx) {
  const detail::ConvTasks c(p);
  const int64_t G = c.G, cig = c.cig, cog = c.cog, oh = c.oh, ow = c.ow, P = c.P, K = c.K;
  const int64_t HW = c.HW, khw = c.khw, tasks = c.tasks;
  const bool outer = c.outer, inner = c.inner;
  const detail::GemmConfig& cfg = detail::config_for(active_isa());
  // Two stride-1 forms (see wide_col2im_image): the flipped-kernel GEMM over dy padded by the
  // kernel extent less the padding, and a GEMM onto the input's taps plus a scatter-add. Both
  // compute wasted columns; the flipped form also multiplies the zero border of dy, and its
  // m = c_in / groups is too short for the micro-tiles under 8 channels. The cheaper runs, by
  // multiply-adds (the scatter-add and its copies counted as 8 per element).
  const detail::WideGeom wx{cig, p.h, p.w, p.pad_h, p.pad_w, p.kh, p.kw, p.dil_h, p.dil_w};
  const detail::WideGeom wf{
      cog,  oh,      ow,     (p.kh - 1) * p.dil_h - p.pad_h, (p.kw - 1) * p.dil_w - p.pad_w, p.kh,
      p.kw, p.dil_h, p.dil_w};
  const bool flipped_ok =
      p.pad_h <= (p.kh - 1) * p.dil_h && p.pad_w <= (p.kw - 1) * p.dil_w && cig >= 8;
  const double flipped_cost = double(cig) * double(cog * khw) * double(wf.cols());
  const double col2im_cost = double(cig * khw) * double(wx.cols()) * double(cog + 8);
  // With AVX-512 and a small enough column matrix, the GEMM onto the taps runs on the pixel
  // kernels over the real outputs only, and a masked gather sums the taps: no wasted products.
#ifdef IPUML_CPU_X86
  const bool flat = detail::flat_1x1(p, cog);
  if (flat || (detail::use_pixel_kernels(cog, khw) && cig * khw * P <= (int64_t(1) << 18) &&
               p.kw <= detail::kMaxGatherKw))
    return detail::backward_input_gathered(p, dy, w, dx, flat, nullptr);
#endif
  if (detail::plain_1x1(p) && detail::transposed_conv(p, cig, cog, inner)) {
    detail::for_each_index(outer, tasks, [&](int64_t t) {
      const int64_t img = t / G, g = t % G;
      detail::transposed_conv_image(cfg, cig, P, cog, dy + (img * p.c_out + g * cog) * P,
                                    detail::PackRowMajorB{w + g * cog * K, K}, nullptr,
                                    dx + (img * p.c_in + g * cig) * HW, inner);
    });
    return;
  }
  const detail::WideGeom& wg = flipped_ok && flipped_cost <= col2im_cost ? wf : wx;
  const bool flipped = &wg == &wf;
  if (flipped && detail::pixel_kernels_convolve(cog * khw, khw)) {
    const std::vector<int64_t> taps = wf.taps();
    const size_t per_group = detail::pixel_packed_size(cig, cog * khw);
    detail::ScratchLease packed(detail::kScratchPrepack, per_group * size_t(G));
    for (int64_t g = 0; g < G; ++g)
      detail::pack_pixel_weights_flipped(cog, cig, khw, w + g * cog * K,
                                         packed.get() + size_t(g) * per_group, c.threads > 1);
    detail::for_each_index(outer, tasks, [&](int64_t t) {
      const int64_t img = t / G, g = t % G;
      detail::pixel_conv_padded(
          wf, taps.data(), detail::PixelWeights{packed.get() + size_t(g) * per_group}, cig,
          dy + (img * p.c_out + g * cog) * P, nullptr, dx + (img * p.c_in + g * cig) * HW, inner);
    });
    return;
  }
  // A: the flipped, transposed kernel (cig x cog * khw) or W^T (cig * khw x cog).
  const int64_t am = flipped ? cig : cig * khw, ak = flipped ? cog * khw : cog;
  const size_t per_group = detail::prepacked_a_size(cfg, am, ak);
  detail::ScratchLease packed(detail::kScratchPrepack, per_group * size_t(G));
  std::vector<detail::PrepackedA> a;
  for (int64_t g = 0; g < G; ++g) {
    float* buf = packed.get() + size_t(g) * per_group;
    a.push_back(
        flipped
            ? detail::prepack_a(cfg, am, ak, detail::PackFlippedA{w + g * cog * K, cig, khw}, buf)
            : detail::prepack_a(cfg, am, ak, detail::PackColMajorA{w + g * cog * K, K}, buf));
  }
#ifdef IPUML_CPU_X86
  // With AVX2 the col2im form's Z covers the real outputs only (dy read in place, no wasted
  // columns) and a masked gather sums its taps: the wide form's bits (see tap_gather_avx2).
  if (!flipped && active_isa() == Isa::avx2 && detail::pixel_kernels_convolve(cog, khw) &&
      p.kw <= detail::kMaxGatherKw)
    return detail::backward_input_gathered(p, dy, w, dx, false, a.data());
#endif
  // The B rows: the flipped form's taps into padded dy, or the rows of the wide dy.
  std::vector<int64_t> taps = flipped ? wg.taps() : std::vector<int64_t>(size_t(cog));
  if (!flipped)
    for (int64_t o = 0; o < cog; ++o) taps[size_t(o)] = o * wx.cols();
  detail::for_each_index(outer, tasks, [&](int64_t t) {
    const int64_t img = t / G, g = t % G;
    const float* dyg = dy + (img * p.c_out + g * cog) * P;
    float* dxg = dx + (img * p.c_in + g * cig) * HW;
    if (flipped)
      detail::wide_conv_image(cfg, wg, taps.data(), a[size_t(g)], cig, dyg, nullptr, dxg, inner);
    else
      detail::wide_col2im_image(cfg, wg, a[size_t(g)], cog, taps.data(), dyg, dxg, inner);
  });
  return;
}

}  // namespace detail

IPUML_INLINE void conv2d_backward_input(const Conv2dParams& p, const float* dy, const float* w,
                                        float* dx) {
  check_conv2d_params("conv2d_backward_input", p);
  const detail::ConvTasks c(p);
  const int64_t G = c.G, cig = c.cig, cog = c.cog, oh = c.oh, ow = c.ow, P = c.P, K = c.K;
  const int64_t HW = c.HW, tasks = c.tasks;
  const int threads = c.threads;
  const bool outer = c.outer, inner = c.inner;
  const detail::GemmConfig& cfg = detail::config_for(active_isa());
  if (detail::use_winograd(p)) {
    // dx is the convolution of dy, padded by 2 less, with the flipped kernel w[o][c] as [c][o].
    detail::ScratchLease buf(detail::kScratchPrepack,
                             detail::winograd_weights_size(cfg, p.c_in, p.c_out));
    const auto u = detail::winograd_weights(
        cfg, p.c_in, p.c_out,
        [&](int64_t c, int64_t o, float* g) {
          const float* src = w + (o * p.c_in + c) * 9;
          for (int r = 0; r < 9; ++r) g[8 - r] = src[r];
        },
        buf, threads > 1);
    detail::winograd_conv(cfg, {p.n, p.c_out, oh, ow, p.c_in, 2 - p.pad_h, 2 - p.pad_w}, u.data(),
                          dy, nullptr, dx, threads > 1);
    return;
  }
  if (p.stride_h == 1 && p.stride_w == 1)
    return detail::conv2d_backward_input_stride1(p, dy, w, dx);
  if (detail::strided_1x1(p)) {
    // The stride-1 input gradient on the compact maps, spread onto every stride-th pixel: 1.5-2x
    // faster than the column matrix below, which packed W^T once per image.
    detail::ScratchLease dxs(detail::kScratchPhases, size_t(p.n * p.c_in * P));
    conv2d_backward_input(detail::compact_1x1(p), dy, w, dxs.get());
    const float* dxc = dxs.get();
    detail::for_strided_pixels(
        p, threads > 1, [&](int64_t plane) { std::fill_n(dx + plane * HW, HW, 0.0f); },
        [&](int64_t f, int64_t c) { dx[f] = dxc[c]; });
    return;
  }
  if (detail::phases_split(p)) {
    // Strided, split into phases: the column matrix's tap rows add onto the phase images' rows
    // (contiguous runs, where dx itself would take every stride-th element), which then fill dx.
    // Each element sums its taps in the same order as the scatter below.
    // With AVX-512 the column matrix of small maps comes from the pixel kernels, on W^T packed
    // once for all images (the GEMM packed it per image, and wasted columns on a 7x7 map's 49
    // pixels). On large maps the GEMM is faster: ResNet's stem (112x112 outputs, a 64-deep
    // reduction, whose short sums the pixel kernels' transposes outweigh) took 16.4-17.7 ms on
    // the pixel kernels against 8.1-8.4 on the GEMM (batch 4, 1 thread); at 28x28 the two are
    // within 7 % either way.
    const Conv2dParams q = detail::space_to_depth_params(p);
    const std::vector<int64_t> offsets = detail::space_to_depth_tap_offsets(p, q);
    const bool pixel = detail::use_pixel_kernels(p.c_out, p.kh * p.kw) && P <= 1024;
    std::optional<detail::ScratchLease> wt;
    std::vector<int64_t> rows;
    if (pixel) {
      wt.emplace(detail::kScratchPrepack, detail::pixel_packed_size(K, p.c_out));
      detail::pack_pixel_weights_t(K, p.c_out, w, K, wt->get(), threads > 1);
      for (int64_t o = 0; o < p.c_out; ++o) rows.push_back(o * P);
    }
    detail::for_each_index(outer, p.n, [&](int64_t img) {
      detail::ScratchLease col(detail::kScratchConv, size_t(K * P));
      const float* dyi = dy + img * p.c_out * P;
      if (pixel)
        detail::pixel_conv_image(K, p.c_out, 1, P, P, rows.data(), wt->get(), dyi, nullptr,
                                 col.get(), inner);
      else
        detail::run_gemm(cfg, K, P, p.c_out, 1.0f, detail::PackColMajorA{w, K},
                         detail::PackRowMajorB{dyi, P}, 0.0f, col.get(), P, inner);
      detail::ScratchLease dxs(detail::kScratchPhases, size_t(q.c_in * q.h * q.w));
      std::fill(dxs.get(), dxs.get() + q.c_in * q.h * q.w, 0.0f);
      for (int64_t t = 0; t < K; ++t)
        for (int64_t oy = 0; oy < oh; ++oy) {
          float* d = dxs.get() + offsets[size_t(t)] + oy * q.w;
          const float* s = col.get() + t * P + oy * ow;
          for (int64_t ox = 0; ox < ow; ++ox) d[ox] += s[ox];
        }
      detail::space_to_depth_input_grad(p, q, dxs.get(), dx + img * p.c_in * HW);
    });
    return;
  }
  // Strided: column matrix, scatter-added onto dx.
  detail::for_each_index(outer, tasks, [&](int64_t t) {
    const int64_t img = t / G, g = t % G;
    const float* dyg = dy + (img * p.c_out + g * cog) * P;
    float* dxg = dx + (img * p.c_in + g * cig) * HW;
    // dcol (K x P) = W_g^T (K x cog) * dy_g (cog x P)
    const detail::PackColMajorA pack_wt{w + g * cog * K, K};
    const detail::PackRowMajorB pack_dy{dyg, P};
    detail::ScratchLease col(detail::kScratchConv, size_t(K * P));
    detail::run_gemm(cfg, K, P, cog, 1.0f, pack_wt, pack_dy, 0.0f, col.get(), P, inner);
    std::fill(dxg, dxg + cig * HW, 0.0f);
    detail::col2im_add(p, oh, ow, col.get(), dxg);
  });
}

IPUML_INLINE void conv2d_backward_weight(const Conv2dParams& p, const float* x, const float* dy,
                                         float* dw) {
  check_conv2d_params("conv2d_backward_weight", p);
  const int64_t G = p.groups, cig = p.c_in / G, cog = p.c_out / G, oh = p.out_h(), ow = p.out_w();
  const int64_t P = oh * ow, K = cig * p.kh * p.kw, HW = p.h * p.w;
  const detail::GemmConfig& cfg = detail::config_for(active_isa());
  const int threads = detail::available_threads();
  const bool stride1 = p.stride_h == 1 && p.stride_w == 1;
  const detail::WideGeom wg{cig, p.h, p.w, p.pad_h, p.pad_w, p.kh, p.kw, p.dil_h, p.dil_w};
  if (detail::use_winograd(p)) {
    detail::winograd_conv_wgrad(cfg, {p.n, p.c_in, p.h, p.w, p.c_out, p.pad_h, p.pad_w}, x, dy, dw,
                                threads > 1);
    return;
  }
  if (detail::strided_1x1(p)) {
    // The stride-1 weight gradient over the gathered pixels.
    detail::ScratchLease xs(detail::kScratchPhases, size_t(p.n * p.c_in * P));
    float* xc = xs.get();
    detail::for_strided_pixels(
        p, threads > 1, [](int64_t) {}, [&](int64_t f, int64_t c) { xc[c] = x[f]; });
    conv2d_backward_weight(detail::compact_1x1(p), xs.get(), dy, dw);
    return;
  }
  if (detail::space_to_depth_applies(p)) {
    const detail::SpaceToDepthInput in(p, x, threads > 1);
    const Conv2dParams& q = in.q;
    detail::ScratchLease dws(detail::kScratchPhaseW, size_t(q.c_out * q.c_in * q.kh * q.kw));
    conv2d_backward_weight(q, in.xs.get(), dy, dws.get());
    detail::space_to_depth_weight_grad(p, q, dws.get(), dw);
    return;
  }
  // Strided with many channels (AVX-512): the pixel kernels over the phase images, as forward,
  // while their dW accumulator stays within 4 MiB (ResNet-50's layer2 and layer3 3x3/2; layer4's,
  // 9 MiB, ran 15 % slower than the strided GEMM below).
  std::optional<detail::SpaceToDepthInput> phases;
  if (!stride1 && detail::phases_split(p) && detail::use_pixel_kernels(K, p.kh * p.kw) &&
      detail::pixel_wgrad_fits(p.c_out, K))
    phases.emplace(p, x, threads > 1);
  // The images the stride-1 kernels read: the input (padded per image as needed) or its phases,
  // unpadded, whose oh x ow outputs lie on rows of q.w.
  const detail::WideGeom pg =
      phases ? detail::WideGeom{phases->q.c_in, phases->q.h,  phases->q.w, 0, 0,
                                phases->q.kh,   phases->q.kw, 1,           1}
             : wg;
  const float* xsrc = phases ? phases->xs.get() : x;
  const int64_t x_img_stride = phases ? phases->q.c_in * phases->q.h * phases->q.w : p.c_in * HW;
  const std::vector<int64_t> taps = phases    ? detail::space_to_depth_tap_offsets(p, phases->q)
                                    : stride1 ? wg.taps()
                                              : std::vector<int64_t>();
  if (stride1 && K <= 2 * detail::kDotTaps) {
    const bool outer = threads > 1 && G > 1, inner = G<2 * threads, par = threads> 1;
    detail::for_each_index(outer, G, [&](int64_t g) {
      const float* xs = x + g * cig * HW;
      int64_t img_stride = p.c_in * HW;
      std::optional<detail::ScratchLease> xpad;
      if (wg.padded()) {
        xpad.emplace(detail::kScratchConv, size_t(p.n * cig * wg.plane()));
        detail::for_each_index(par, p.n, [&](int64_t img) {
          detail::pad_image(wg, cig, xs + img * img_stride, xpad->get() + img * cig * wg.plane());
        });
        xs = xpad->get();
        img_stride = cig * wg.plane();
      }
      detail::dot_wgrad({dy + g * cog * P, xs, p.n, cog, oh, ow, wg.wp(), p.c_out * P, img_stride,
                         K, taps.data(), dw + g * cog * K},
                        inner && par);
    });
    return;
  }
  // The reduction over (image, pixel) runs in chunks of whole images fixed by the shape alone,
  // each a GEMM into its own partial dW, and the partials add up in chunk order: the split over
  // threads (chunks and groups) never changes the sum.
  const bool pointwise = stride1 && p.kh == 1 && p.kw == 1 && !wg.padded();
  const int64_t chunks = detail::wgrad_chunks(p.n, stride1 ? wg.cols() : P);  // phases: strided
  const int64_t tasks = G * chunks, wsize = cog * K;
  const bool outer = threads > 1 && tasks > 1, inner = tasks < 2 * threads;
  std::optional<detail::ScratchLease> partial;
  if (chunks > 1) partial.emplace(detail::kScratchWide, size_t(G * (chunks - 1) * wsize));
  detail::for_each_index(outer, tasks, [&](int64_t t) {
    const int64_t g = t / chunks, ch = t % chunks;
    const int64_t img0 = ch * p.n / chunks, nimg = (ch + 1) * p.n / chunks - img0;
    float* out = ch == 0 ? dw + g * wsize : partial->get() + (g * (chunks - 1) + ch - 1) * wsize;
    const float* xg = xsrc + img0 * x_img_stride + g * cig * HW;  // one group if phased
    const float* dyg = dy + (img0 * p.c_out + g * cog) * P;
    // An unpadded 1x1 reads its wider operand in place where the narrower fits (either ISA: with
    // AVX-512 the pixel kernels ran 64 -> 256 on 56x56 maps at 156-164 GFLOP/s against 198).
    if (pointwise && detail::direct_wgrad_1x1(cfg, nimg, cig, cog, P, p.c_in * HW, p.c_out * P, xg,
                                              dyg, out, inner))
      return;
    if (phases || (stride1 && detail::use_pixel_kernels(K) && detail::pixel_wgrad_fits(cog, K)))
      detail::pixel_wgrad_chunk(pg, taps.data(), K, nimg, x_img_stride, cog, p.c_out * P, xg, dyg,
                                out, inner);
    else if (stride1 && detail::pixel_kernels_convolve(K, p.kh * p.kw) && active_isa() == Isa::avx2)
      detail::pixel_wgrad_chunk_avx2(cfg, wg, taps.data(), nimg, p.c_in * HW, cog, p.c_out * P, xg,
                                     dyg, out, inner);
    else if (stride1)
      detail::wide_wgrad_chunk(cfg, wg, taps.data(), nimg, p.c_in * HW, cog, p.c_out * P, xg, dyg,
                               out, inner);
    else
      detail::run_gemm(cfg, cog, K, nimg * P, 1.0f, detail::PackDyA{dyg, p.c_out * P, P},
                       detail::PackIm2colTB{xg, &p, oh, ow}, 0.0f, out, K, inner);
  });
  if (chunks > 1) {
    // Each weight element adds its chunks' partials in chunk order, in parallel over blocks of
    // elements (a layer4 1x1 has 1 M of them and 15 partials).
    constexpr int64_t kAddBlock = 16384;
    const int64_t blocks = detail::ceil_div(wsize, kAddBlock);
    detail::for_each_index(threads > 1 && G * blocks > 1, G * blocks, [&](int64_t t) {
      const int64_t g = t / blocks, i0 = (t % blocks) * kAddBlock,
                    i1 = std::min(wsize, i0 + kAddBlock);
      float* d = dw + g * wsize;
      for (int64_t ch = 1; ch < chunks; ++ch) {
        const float* s = partial->get() + (g * (chunks - 1) + ch - 1) * wsize;
        for (int64_t i = i0; i < i1; ++i) d[i] += s[i];
      }
    });
  }
}

IPUML_INLINE void conv2d_backward_bias(const Conv2dParams& p, const float* dy, float* db) {
  check_conv2d_params("conv2d_backward_bias", p);
  const int64_t P = p.out_h() * p.out_w();
  const bool parallel = detail::available_threads() > 1 && double(p.n) * double(p.c_out * P) > 1e5;
  detail::for_each_index(parallel, p.c_out, [&](int64_t o) {
    double acc = 0.0;
    for (int64_t img = 0; img < p.n; ++img) {
      const float* s = dy + (img * p.c_out + o) * P;
      // Float partial per image keeps the loop vectorisable; its order is fixed.
      float part = 0.0f;
      for (int64_t i = 0; i < P; ++i) part += s[i];
      acc += part;
    }
    db[o] = float(acc);
  });
}

// ---------------------------------------------------------------- references
IPUML_INLINE void conv2d_forward_reference(const Conv2dParams& p, const float* x, const float* w,
                                           const float* bias, float* y) {
  check_conv2d_params("conv2d_forward_reference", p);
  const int64_t cig = p.c_in / p.groups, cog = p.c_out / p.groups, oh = p.out_h(), ow = p.out_w();
  for (int64_t img = 0; img < p.n; ++img)
    for (int64_t o = 0; o < p.c_out; ++o) {
      const int64_t g = o / cog;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = bias ? bias[o] : 0.0;
          for (int64_t c = 0; c < cig; ++c)
            for (int64_t ky = 0; ky < p.kh; ++ky)
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                const int64_t iy = oy * p.stride_h - p.pad_h + ky * p.dil_h;
                const int64_t ix = ox * p.stride_w - p.pad_w + kx * p.dil_w;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                acc += double(x[((img * p.c_in + g * cig + c) * p.h + iy) * p.w + ix]) *
                       double(w[((o * cig + c) * p.kh + ky) * p.kw + kx]);
              }
          y[((img * p.c_out + o) * oh + oy) * ow + ox] = float(acc);
        }
    }
}

IPUML_INLINE void conv2d_backward_input_reference(const Conv2dParams& p, const float* dy,
                                                  const float* w, float* dx) {
  check_conv2d_params("conv2d_backward_input_reference", p);
  const int64_t cig = p.c_in / p.groups, cog = p.c_out / p.groups, oh = p.out_h(), ow = p.out_w();
  std::vector<double> acc(size_t(p.n * p.c_in * p.h * p.w), 0.0);
  for (int64_t img = 0; img < p.n; ++img)
    for (int64_t o = 0; o < p.c_out; ++o) {
      const int64_t g = o / cog;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const double d = dy[((img * p.c_out + o) * oh + oy) * ow + ox];
          for (int64_t c = 0; c < cig; ++c)
            for (int64_t ky = 0; ky < p.kh; ++ky)
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                const int64_t iy = oy * p.stride_h - p.pad_h + ky * p.dil_h;
                const int64_t ix = ox * p.stride_w - p.pad_w + kx * p.dil_w;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                acc[size_t(((img * p.c_in + g * cig + c) * p.h + iy) * p.w + ix)] +=
                    d * double(w[((o * cig + c) * p.kh + ky) * p.kw + kx]);
              }
        }
    }
  for (size_t i = 0; i < acc.size(); ++i) dx[i] = float(acc[i]);
}

IPUML_INLINE void conv2d_backward_weight_reference(const Conv2dParams& p, const float* x,
                                                   const float* dy, float* dw) {
  check_conv2d_params("conv2d_backward_weight_reference", p);
  const int64_t cig = p.c_in / p.groups, cog = p.c_out / p.groups, oh = p.out_h(), ow = p.out_w();
  for (int64_t o = 0; o < p.c_out; ++o) {
    const int64_t g = o / cog;
    for (int64_t c = 0; c < cig; ++c)
      for (int64_t ky = 0; ky < p.kh; ++ky)
        for (int64_t kx = 0; kx < p.kw; ++kx) {
          double acc = 0.0;
          for (int64_t img = 0; img < p.n; ++img)
            for (int64_t oy = 0; oy < oh; ++oy)
              for (int64_t ox = 0; ox < ow; ++ox) {
                const int64_t iy = oy * p.stride_h - p.pad_h + ky * p.dil_h;
                const int64_t ix = ox * p.stride_w - p.pad_w + kx * p.dil_w;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                acc += double(x[((img * p.c_in + g * cig + c) * p.h + iy) * p.w + ix]) *
                       double(dy[((img * p.c_out + o) * oh + oy) * ow + ox]);
              }
          dw[((o * cig + c) * p.kh + ky) * p.kw + kx] = float(acc);
        }
  }
}

IPUML_INLINE void conv2d_backward_bias_reference(const Conv2dParams& p, const float* dy,
                                                 float* db) {
  check_conv2d_params("conv2d_backward_bias_reference", p);
  const int64_t P = p.out_h() * p.out_w();
  for (int64_t o = 0; o < p.c_out; ++o) {
    double acc = 0.0;
    for (int64_t img = 0; img < p.n; ++img)
      for (int64_t i = 0; i < P; ++i) acc += dy[(img * p.c_out + o) * P + i];
    db[o] = float(acc);
  }
}

}  // namespace ipuml::cpu
