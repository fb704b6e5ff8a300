// Internal to the CPU backend: the weight gradient of the Winograd F(2x2, 3x3) convolution of
// conv_winograd.hpp, the adjoint of its forward pass,
//   dg = G^T [ sum over tiles of (A dy A^T) . (B^T d B) ] G.
// The sum over tiles is 16 GEMMs S_q = D_q V_q^T, one per transformed position q, whose operands
// the transforms write straight into the GEMM's packed layouts, 16 channels at a time (one per
// lane): D_q (output channels x tiles) as prepack_a lays out A, V_q^T (tiles x input channels)
// as the GEMM's B panels, so that nothing is transposed or packed in between. Every sum's order
// is fixed by the shape (tile blocks, groups of blocks, GEMM blocking), never by the thread count.
// Not a public API.
#pragma once

#include <ipuml/backends/cpu/conv_winograd.hpp>

#include <algorithm>
#include <cstdint>

namespace ipuml::cpu::detail {

// g[0..8] = G^T s G for a 4x4 s: the adjoint of wino_kernel_transform. V is float, or a vector
// of floats for many kernels at once (the same arithmetic in every lane).
template <class V>
inline void wino_kernel_adjoint(const V* s, V* g) {
  V t[3][4];
  for (int j = 0; j < 4; ++j) {
    t[0][j] = s[j] + 0.5f * (s[4 + j] + s[8 + j]);
    t[1][j] = 0.5f * (s[4 + j] - s[8 + j]);
    t[2][j] = 0.5f * (s[4 + j] + s[8 + j]) + s[12 + j];
  }
  for (int i = 0; i < 3; ++i) {
    g[3 * i] = t[i][0] + 0.5f * (t[i][1] + t[i][2]);
    g[3 * i + 1] = 0.5f * (t[i][1] - t[i][2]);
    g[3 * i + 2] = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
  }
}

// d (4 x 4) = A e A^T for a 2 x 2 block e of dy: the adjoint of wino_out16.
__attribute__((always_inline)) inline void wino_grad16(const WinoVec* e, WinoVec* d) {
  const WinoVec f[8] = {e[0],        e[1],        e[0] + e[2], e[1] + e[3],
                        e[0] - e[2], e[1] - e[3], -e[2],       -e[3]};
  for (int i = 0; i < 4; ++i) {
    d[4 * i] = f[2 * i];
    d[4 * i + 1] = f[2 * i] + f[2 * i + 1];
    d[4 * i + 2] = f[2 * i] - f[2 * i + 1];
    d[4 * i + 3] = -f[2 * i + 1];
  }
}

// Where the transforms write D_q (m output channels x k tiles): prepack_a's layout, k blocks of
// the config's depth, row tiles of tile_rows() rows, a row tile's values contiguous per column.
struct WinoRowsA {
  int64_t m, k, mr, m_pad, kc_blk;
  WinoRowsA(const GemmConfig& cfg, int64_t rows, int64_t cols)
      : m(rows),
        k(cols),
        mr(tile_rows(cfg, rows)),
        m_pad(round_up(rows, mr)),
        kc_blk(block_depth(cfg, cols)) {}
  // Where column j of the row tile starting at row i0 begins (row i0 + i is i further on).
  int64_t at(int64_t i0, int64_t j) const {
    const int64_t pc = j / kc_blk * kc_blk;
    return pc * m_pad + i0 * std::min(kc_blk, k - pc) + (j - pc) * std::min(mr, m - i0);
  }
  int64_t size() const { return m_pad * k; }
  PrepackedA operand(const float* data) const { return PrepackedA{data, m_pad, k, kc_blk}; }
};

// Tile t's image and the corners of its 4 x 4 input (may reach into the padding) and 2 x 2 output.
struct WinoTileCorner {
  int64_t img, iy, ix, oy, ox;
};
inline WinoTileCorner wino_tile_corner(const WinoShape& s, int64_t t) {
  const int64_t per_image = s.th() * s.tw(), r = t % per_image;
  const int64_t oy = 2 * (r / s.tw()), ox = 2 * (r % s.tw());
  return {t / per_image, oy - s.py, ox - s.px, oy, ox};
}

// The transforms of the tiles [t0, t0 + lay.rows), in runs of 16 channels [16 k0, 16 k1): B^T d B
// of x into V_q^T's panels (lay: tiles x input channels, positions qs floats apart), and A e A^T of
// dy into D_q (rows: output channels x tiles). Portable: element loads and stores.
// d[l] = at[l * stride] for the first `lanes` lanes when `inside`, else zero.
inline void wgrad_gather_generic(const float* at, int64_t stride, int lanes, bool inside,
                                 WinoVec& d) {
  for (int l = 0; l < 16; ++l) d[l] = inside && l < lanes ? at[l * stride] : 0.0f;
}
inline void wgrad_input_generic(const WinoShape& s, int64_t t0, const float* x, int64_t k0,
                                int64_t k1, float* v, int64_t qs, const WinoPanels& lay) {
  const int64_t hw = s.h * s.w;
  for (int64_t kq = k0; kq < k1; ++kq) {
    const int64_t ch0 = 16 * kq;
    const int lanes = int(std::min<int64_t>(16, s.c - ch0));
    const int fill = int(std::min<int64_t>(16, lay.padded() - ch0));
    for (int64_t j = 0; j < lay.rows; ++j) {
      const WinoTileCorner at = wino_tile_corner(s, t0 + j);
      const float* base = x + (at.img * s.c + ch0) * hw;
      WinoVec d[16], r[16];
      for (int pos = 0; pos < 16; ++pos) {
        const int64_t iy = at.iy + pos / 4, ix = at.ix + pos % 4;
        const bool inside = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w;
        wgrad_gather_generic(base + (inside ? iy * s.w + ix : 0), hw, lanes, inside, d[pos]);
      }
      wino_in16(d, r);
      for (int q = 0; q < kWinoPos; ++q)
        for (int l = 0; l < fill; ++l) v[q * qs + lay.at(j, ch0 + l)] = r[q][l];
    }
  }
}
inline void wgrad_dy_generic(const WinoShape& s, int64_t t0, const float* dy, int64_t k0,
                             int64_t k1, float* d, int64_t qs, const WinoRowsA& rows) {
  const int64_t plane = s.oh() * s.ow();
  for (int64_t kq = k0; kq < k1; ++kq) {
    const int64_t o0 = 16 * kq;
    const int lanes = int(std::min<int64_t>(16, s.m - o0));
    for (int64_t j = 0; j < rows.k; ++j) {
      const WinoTileCorner at = wino_tile_corner(s, t0 + j);
      const float* base = dy + (at.img * s.m + o0) * plane;
      WinoVec e[4], r[16];
      for (int pos = 0; pos < 4; ++pos) {
        const int64_t oy = at.oy + pos / 2, ox = at.ox + pos % 2;
        const bool inside = oy < s.oh() && ox < s.ow();
        wgrad_gather_generic(base + (inside ? oy * s.ow() + ox : 0), plane, lanes, inside, e[pos]);
      }
      wino_grad16(e, r);
      for (int l = 0; l < lanes; ++l) {
        const int64_t o = o0 + l, i0 = o / rows.mr * rows.mr, off = rows.at(i0, j) + o - i0;
        for (int q = 0; q < kWinoPos; ++q) d[q * qs + off] = r[q][l];
      }
    }
  }
}

// The row tiles of D_q that output channels [o0, o1) (at most 16) fall in: tile_row[i] is the
// first row of tile i, bits[i] the lanes (bit l: channel o0 + l) that go to it; returns how many.
inline int wgrad_row_tiles(const WinoRowsA& rows, int64_t o0, int64_t o1, int64_t* tile_row,
                           uint32_t* bits) {
  int tiles = 0;
  for (int64_t o = o0; o < o1; ++tiles) {
    const int64_t i0 = o / rows.mr * rows.mr, end = std::min(o1, i0 + rows.mr);
    tile_row[tiles] = i0;
    bits[tiles] = ((1u << (end - o0)) - 1u) & ~((1u << (o - o0)) - 1u);
    o = end;
  }
  return tiles;
}

#ifdef IPUML_CPU_X86
// The same with AVX-512: a masked gather per position (lane l reads channel ch0 + l), whole
// vector stores into the panels, and masked stores into D_q's row tiles. The arithmetic is the
// same sequence of vector adds, so the results are the same bits.
__attribute__((target("avx512f"))) inline __m512i wgrad_lane_offsets(int64_t stride) {
  return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(int32_t(stride)));
}
__attribute__((target("avx512f"))) inline void wgrad_input_avx512(const WinoShape& s, int64_t t0,
                                                                  const float* x, int64_t k0,
                                                                  int64_t k1, float* v, int64_t qs,
                                                                  const WinoPanels& lay) {
  const int64_t hw = s.h * s.w;
  const __m512i lane = wgrad_lane_offsets(hw);
  for (int64_t kq = k0; kq < k1; ++kq) {
    const int64_t ch0 = 16 * kq;
    const __mmask16 keep = __mmask16((1u << std::min<int64_t>(16, s.c - ch0)) - 1u);
    for (int64_t j = 0; j < lay.rows; ++j) {
      const WinoTileCorner at = wino_tile_corner(s, t0 + j);
      const float* base = x + (at.img * s.c + ch0) * hw;
      WinoVec d[16], r[16];
      for (int pos = 0; pos < 16; ++pos) {
        const int64_t iy = at.iy + pos / 4, ix = at.ix + pos % 4;
        d[pos] = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w
                     ? WinoVec(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), keep, lane,
                                                        base + iy * s.w + ix, 4))
                     : WinoVec(_mm512_setzero_ps());
      }
      wino_in16(d, r);
      // Lanes past the last channel gathered nothing, so they store zeros (panel padding).
      float* dst = v + lay.at(j, ch0);
      for (int q = 0; q < kWinoPos; ++q) _mm512_storeu_ps(dst + q * qs, __m512(r[q]));
    }
  }
}
__attribute__((target("avx512f"))) inline void wgrad_dy_avx512(const WinoShape& s, int64_t t0,
                                                               const float* dy, int64_t k0,
                                                               int64_t k1, float* d, int64_t qs,
                                                               const WinoRowsA& rows) {
  const int64_t plane = s.oh() * s.ow();
  const __m512i lane = wgrad_lane_offsets(plane);
  for (int64_t kq = k0; kq < k1; ++kq) {
    const int64_t o0 = 16 * kq, o1 = std::min(s.m, o0 + 16);
    const __mmask16 keep = __mmask16((1u << (o1 - o0)) - 1u);
    // The row tiles that channels [o0, o1) fall in, and which lanes go to each.
    int64_t tile_row[16];
    uint32_t bits[16];
    __mmask16 tile_lanes[16];
    const int tiles = wgrad_row_tiles(rows, o0, o1, tile_row, bits);
    for (int i = 0; i < tiles; ++i) tile_lanes[i] = __mmask16(bits[i]);
    for (int64_t j = 0; j < rows.k; ++j) {
      const WinoTileCorner at = wino_tile_corner(s, t0 + j);
      const float* base = dy + (at.img * s.m + o0) * plane;
      WinoVec e[4], r[16];
      for (int pos = 0; pos < 4; ++pos) {
        const int64_t oy = at.oy + pos / 2, ox = at.ox + pos % 2;
        e[pos] = oy < s.oh() && ox < s.ow()
                     ? WinoVec(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), keep, lane,
                                                        base + oy * s.ow() + ox, 4))
                     : WinoVec(_mm512_setzero_ps());
      }
      wino_grad16(e, r);
      for (int i = 0; i < tiles; ++i) {
        // Lane l lands at row o0 + l of the tile starting at row tile_row[i].
        float* dst = d + rows.at(tile_row[i], j) + (o0 - tile_row[i]);
        for (int q = 0; q < kWinoPos; ++q)
          _mm512_mask_storeu_ps(dst + q * qs, tile_lanes[i], __m512(r[q]));
      }
    }
  }
}
// The same with AVX2: two 8-lane masked gathers per position, runs of 16 (or, at a panel's end,
// 8) into the panels, masked stores into D_q's row tiles; the same arithmetic, so the same bits.
__attribute__((target("avx2"))) inline void wgrad_input_avx2(const WinoShape& s, int64_t t0,
                                                             const float* x, int64_t k0, int64_t k1,
                                                             float* v, int64_t qs,
                                                             const WinoPanels& lay) {
  const int64_t hw = s.h * s.w;
  for (int64_t kq = k0; kq < k1; ++kq) {
    const int64_t ch0 = 16 * kq, fill = lay.width(ch0 / lay.nr) - ch0 % lay.nr;
    const Lanes16 keep = lanes16_first(std::min<int64_t>(16, s.c - ch0));
    for (int64_t j = 0; j < lay.rows; ++j) {
      const WinoTileCorner at = wino_tile_corner(s, t0 + j);
      const float* base = x + (at.img * s.c + ch0) * hw;
      WinoVec d[16], r[16];
      for (int pos = 0; pos < 16; ++pos) {
        const int64_t iy = at.iy + pos / 4, ix = at.ix + pos % 4;
        if (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w)
          gather16_strided_avx2(keep, base + iy * s.w + ix, hw, d[pos]);
        else
          d[pos] = WinoVec{};
      }
      wino_in16(d, r);
      float* dst = v + lay.at(j, ch0);
      for (int q = 0; q < kWinoPos; ++q) store_lanes_avx2(dst + q * qs, r[q], fill);
    }
  }
}
__attribute__((target("avx2"))) inline void wgrad_dy_avx2(const WinoShape& s, int64_t t0,
                                                          const float* dy, int64_t k0, int64_t k1,
                                                          float* d, int64_t qs,
                                                          const WinoRowsA& rows) {
  const int64_t plane = s.oh() * s.ow();
  for (int64_t kq = k0; kq < k1; ++kq) {
    const int64_t o0 = 16 * kq, o1 = std::min(s.m, o0 + 16);
    const Lanes16 keep = lanes16_first(o1 - o0);
    int64_t tile_row[16];
    uint32_t bits[16];
    Lanes16 tile_lanes[16];
    const int tiles = wgrad_row_tiles(rows, o0, o1, tile_row, bits);
    for (int i = 0; i < tiles; ++i) tile_lanes[i] = lanes16_from_bits(bits[i]);
    for (int64_t j = 0; j < rows.k; ++j) {
      const WinoTileCorner at = wino_tile_corner(s, t0 + j);
      const float* base = dy + (at.img * s.m + o0) * plane;
      WinoVec e[4], r[16];
      for (int pos = 0; pos < 4; ++pos) {
        const int64_t oy = at.oy + pos / 2, ox = at.ox + pos % 2;
        if (oy < s.oh() && ox < s.ow())
          gather16_strided_avx2(keep, base + oy * s.ow() + ox, plane, e[pos]);
        else
          e[pos] = WinoVec{};
      }
      wino_grad16(e, r);
      for (int i = 0; i < tiles; ++i) {
        float* dst = d + rows.at(tile_row[i], j) + (o0 - tile_row[i]);
        for (int q = 0; q < kWinoPos; ++q) store16_avx2(tile_lanes[i], dst + q * qs, r[q]);
      }
    }
  }
}
#endif

inline void wgrad_input_transform(const WinoShape& s, int64_t t0, const float* x, int64_t k0,
                                  int64_t k1, float* v, int64_t qs, const WinoPanels& lay) {
#ifdef IPUML_CPU_X86
  if (wino_groups_fit(lay)) return wgrad_input_avx512(s, t0, x, k0, k1, v, qs, lay);
  if (wino_groups_fit_avx2(lay)) return wgrad_input_avx2(s, t0, x, k0, k1, v, qs, lay);
#endif
  wgrad_input_generic(s, t0, x, k0, k1, v, qs, lay);
}
inline void wgrad_dy_transform(const WinoShape& s, int64_t t0, const float* dy, int64_t k0,
                               int64_t k1, float* d, int64_t qs, const WinoRowsA& rows) {
#ifdef IPUML_CPU_X86
  if (active_isa() == Isa::avx512) return wgrad_dy_avx512(s, t0, dy, k0, k1, d, qs, rows);
  if (active_isa() == Isa::avx2) return wgrad_dy_avx2(s, t0, dy, k0, k1, d, qs, rows);
#endif
  wgrad_dy_generic(s, t0, dy, k0, k1, d, qs, rows);
}

// The weight gradient's sum over tile blocks runs in groups of consecutive blocks, each into its
// own partial sum (16 x m x c floats), and the groups' sums are added in order at the end. The
// grouping depends on the shape only, so the bits never depend on the thread count: at most 4
// groups (each more costs a partial sum to write and read; 8 ran 3-4 % slower on one thread) whose
// partial sums fit in 2 MiB (ResNet's 3x3x64 takes 4, its 256-channel layers 1). With at least two
// groups per thread, each thread runs whole groups in its core's L2, with no fork inside.
inline int64_t wino_wgrad_groups(const WinoShape& s, int64_t blocks) {
  const int64_t per = kWinoPos * s.m * s.c;
  const int64_t cap = std::max<int64_t>(1, (int64_t(2) << 20) / int64_t(sizeof(float)) / per);
  return std::min({blocks, int64_t(4), cap});
}

// The layouts of one block of nt tiles: V_q^T's panels and D_q's row tiles, each position's
// matrix a cache line after the last one's end (16 streams 2^k apart would share cache sets).
struct WinoWgradBlock {
  WinoPanels v;
  WinoRowsA d;
  WinoWgradBlock(const GemmConfig& cfg, const WinoShape& s, int64_t nt)
      : v{nt, s.c, cfg.nr(), cfg.vw}, d(cfg, s.m, nt) {}
  int64_t v_stride() const { return v.size() + 16; }
  int64_t d_stride() const { return d.size() + 16; }
};

// sum (16 x m x c) = the products S_q = D_q V_q^T summed over the tile blocks [b0, b1), block
// after block: both transforms, then the 16 GEMMs; split over threads (runs of 16 channels,
// positions) when `parallel`.
inline void wino_wgrad_blocks(const GemmConfig& cfg, const WinoShape& s, const float* x,
                              const float* dy, int64_t b0, int64_t b1, float* sum, float* v,
                              float* d, bool parallel) {
  const int64_t T = s.tiles(), blk = s.block();
  const int parts = 4 * (parallel ? available_threads() : 1);
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t t0 = b * blk;
    const WinoWgradBlock lay(cfg, s, std::min(T, t0 + blk) - t0);
    const int64_t vs = lay.v_stride(), ds = lay.d_stride();
    for_each_run(parallel, ceil_div(s.c, 16), parts, [&](int64_t k0, int64_t k1) {
      wgrad_input_transform(s, t0, x, k0, k1, v, vs, lay.v);
    });
    for_each_run(parallel, ceil_div(s.m, 16), parts, [&](int64_t k0, int64_t k1) {
      wgrad_dy_transform(s, t0, dy, k0, k1, d, ds, lay.d);
    });
    for_each_index(parallel, kWinoPos, [&](int64_t q) {
      run_panel_gemm(cfg, s.m, lay.d.k, lay.d.operand(d + q * ds), v + q * vs, lay.v,
                     sum + q * s.m * s.c, s.c, b != b0);
    });
  }
}

// dw[o0..o1) = G^T S G, S = the groups' partial sums (each 16 x m x c) added in order. Portable:
// one kernel at a time.
inline void wino_wgrad_adjoint_generic(const WinoShape& s, const float* sums, int64_t groups,
                                       int64_t o0, int64_t o1, float* dw) {
  const int64_t per = kWinoPos * s.m * s.c;
  float t[kWinoPos];
  for (int64_t o = o0; o < o1; ++o)
    for (int64_t ch = 0; ch < s.c; ++ch) {
      for (int q = 0; q < kWinoPos; ++q) {
        const float* at = sums + (q * s.m + o) * s.c + ch;
        t[q] = at[0];
        for (int64_t grp = 1; grp < groups; ++grp) t[q] += at[grp * per];
      }
      wino_kernel_adjoint(t, dw + (o * s.c + ch) * 9);
    }
}
#ifdef IPUML_CPU_X86
// The same for 16 input channels at a time, one per lane (the same arithmetic in each lane).
__attribute__((target("avx512f"))) inline void wino_wgrad_adjoint_avx512(const WinoShape& s,
                                                                         const float* sums,
                                                                         int64_t groups, int64_t o0,
                                                                         int64_t o1, float* dw) {
  const int64_t per = kWinoPos * s.m * s.c;
  const __m512i nine =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(9));
  for (int64_t o = o0; o < o1; ++o)
    for (int64_t ch0 = 0; ch0 < s.c; ch0 += 16) {
      const __mmask16 keep = __mmask16((1u << std::min<int64_t>(16, s.c - ch0)) - 1u);
      WinoVec t[kWinoPos], g[9];
      for (int q = 0; q < kWinoPos; ++q) {
        const float* at = sums + (q * s.m + o) * s.c + ch0;
        t[q] = WinoVec(_mm512_maskz_loadu_ps(keep, at));
        for (int64_t grp = 1; grp < groups; ++grp)
          t[q] += WinoVec(_mm512_maskz_loadu_ps(keep, at + grp * per));
      }
      wino_kernel_adjoint(t, g);
      float* out = dw + (o * s.c + ch0) * 9;
      for (int k = 0; k < 9; ++k) _mm512_mask_i32scatter_ps(out + k, keep, nine, __m512(g[k]), 4);
    }
}
// With AVX2: 16 input channels at a time as two 8-lane halves; the nine results per kernel are
// stored lane by lane (AVX2 has no scatter).
__attribute__((target("avx2"))) inline void wino_wgrad_adjoint_avx2(const WinoShape& s,
                                                                    const float* sums,
                                                                    int64_t groups, int64_t o0,
                                                                    int64_t o1, float* dw) {
  const int64_t per = kWinoPos * s.m * s.c;
  for (int64_t o = o0; o < o1; ++o)
    for (int64_t ch0 = 0; ch0 < s.c; ch0 += 16) {
      const int64_t lanes = std::min<int64_t>(16, s.c - ch0);
      const Lanes16 keep = lanes16_first(lanes);
      WinoVec t[kWinoPos], g[9];
      for (int q = 0; q < kWinoPos; ++q) {
        const float* at = sums + (q * s.m + o) * s.c + ch0;
        load16_avx2(keep, at, t[q]);
        for (int64_t grp = 1; grp < groups; ++grp) {
          WinoVec more;
          load16_avx2(keep, at + grp * per, more);
          t[q] += more;
        }
      }
      wino_kernel_adjoint(t, g);
      float* out = dw + (o * s.c + ch0) * 9;
      for (int64_t l = 0; l < lanes; ++l)
        for (int k = 0; k < 9; ++k) out[l * 9 + k] = g[k][l];
    }
}
#endif
inline void wino_wgrad_adjoint(const WinoShape& s, const float* sums, int64_t groups, int64_t o0,
                               int64_t o1, float* dw) {
#ifdef IPUML_CPU_X86
  if (active_isa() == Isa::avx512) return wino_wgrad_adjoint_avx512(s, sums, groups, o0, o1, dw);
  if (active_isa() == Isa::avx2) return wino_wgrad_adjoint_avx2(s, sums, groups, o0, o1, dw);
#endif
  wino_wgrad_adjoint_generic(s, sums, groups, o0, o1, dw);
}

// dw (m x c x 3 x 3) = the weight gradient of the convolution from x and dy (n x m x oh x ow):
// the 16 sums S_q of D_q V_q^T over all tiles, in the groups of wino_wgrad_groups, then G^T S G.
inline void winograd_conv_wgrad(const GemmConfig& cfg, const WinoShape& s, const float* x,
                                const float* dy, float* dw, bool parallel) {
  const int64_t T = s.tiles(), blk = s.block();
  if (T == 0) {
    std::fill(dw, dw + s.m * s.c * 9, 0.0f);
    return;
  }
  const int64_t blocks = ceil_div(T, blk), groups = wino_wgrad_groups(s, blocks);
  const int64_t per = kWinoPos * s.m * s.c;
  const WinoWgradBlock full(cfg, s, blk);
  const size_t v_size = size_t(kWinoPos * full.v_stride());
  const size_t d_size = size_t(kWinoPos * full.d_stride());
  ScratchLease sums(kScratchWide, size_t(groups * per));
  const auto group = [&](int64_t g, bool inner) {
    ScratchLease v(kScratchConv, v_size), d(kScratchConvOut, d_size);
    wino_wgrad_blocks(cfg, s, x, dy, g * blocks / groups, (g + 1) * blocks / groups,
                      sums.get() + g * per, v.get(), d.get(), inner);
  };
  const int threads = parallel ? available_threads() : 1;
  if (parallel && groups >= 2 * threads) {
    for_each_index(true, groups, [&](int64_t g) { group(g, false); });
  } else {
    for (int64_t g = 0; g < groups; ++g) group(g, parallel);
  }
  for_each_run(parallel, s.m, 4 * threads, [&](int64_t o0, int64_t o1) {
    wino_wgrad_adjoint(s, sums.get(), groups, o0, o1, dw);
  });
}

}  // namespace ipuml::cpu::detail
