// Internal to the CPU backend: Winograd F(2x2, 3x3) for stride-1, undilated 3x3 convolutions
// with many channels (ResNet's 3x3 layers). Each 2x2 block of outputs comes from a 4x4 input tile:
//   Y = A^T [ (G g G^T) . (B^T d B) ] A
// so the products become 16 GEMMs (one per position of the 4x4 transformed tile) over channels,
// with 16 multiplies per 4 outputs per channel pair instead of 36. The input gradient is the same
// transform run on dy with the flipped, transposed kernel; the weight gradient is its adjoint,
//   dg = G^T [ sum over tiles of (A dy A^T) . (B^T d B) ] G,
// whose sum over tiles is again 16 GEMMs. Transforms only add and halve, and every output's
// arithmetic is fixed by the shape (tile blocks, GEMM blocking), never by the thread count.
// Not a public API.
#pragma once

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/gemm_kernels.hpp>
#include <ipuml/backends/cpu/vec16_avx2.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ipuml::cpu::detail {

constexpr int kWinoPos = 16;  // positions of the 4x4 transformed tile

// A stride-1 3x3 convolution of n images, c input channels (h x w) to m output channels, zero
// padding py x px (at most 2). Tiles of 2x2 outputs, numbered t = (img * th + ty) * tw + tx.
struct WinoShape {
  int64_t n, c, h, w, m, py, px;
  int64_t oh() const { return h + 2 * py - 2; }
  int64_t ow() const { return w + 2 * px - 2; }
  int64_t th() const { return (oh() + 1) / 2; }
  int64_t tw() const { return (ow() + 1) / 2; }
  int64_t tiles() const { return n * th() * tw(); }
  // Tiles per block: the block's transformed input and output (16 x (c + m) floats per tile) stay
  // near 1 MiB, half a core's L2 (4 MiB blocks ran 4-10 % slower on one thread), but a block has
  // at least 128 tiles so that the GEMMs over it keep a useful width.
  int64_t block() const {
    const int64_t cap = std::max<int64_t>(128, (int64_t(1) << 18) / (kWinoPos * (c + m)));
    const int64_t blocks = ceil_div(tiles(), cap);
    return round_up(ceil_div(tiles(), blocks), 16);
  }
};

// Whether a convolution takes the Winograd path: 3x3, stride 1, no dilation, one group, padding
// at most 2 (the input gradient pads dy by 2 less), and enough channels both ways that the GEMMs
// over channels run at speed (MNIST's 32 -> 64 stays on the direct kernels).
inline bool winograd_applies(const Conv2dParams& p) {
  // The tiles' offset tables are 32-bit: every image tensor the transforms index must fit.
  constexpr int64_t kMaxIndex = (int64_t(1) << 31) - 1;
  return p.kh == 3 && p.kw == 3 && p.stride_h == 1 && p.stride_w == 1 && p.dil_h == 1 &&
         p.dil_w == 1 && p.groups == 1 && p.pad_h <= 2 && p.pad_w <= 2 &&
         std::min(p.c_in, p.c_out) >= 48 && p.n * p.c_in * p.h * p.w <= kMaxIndex &&
         p.n * p.c_out * p.out_h() * p.out_w() <= kMaxIndex;
}

// Whether Winograd pays for a forward convolution it applies to. Its transformed weights are
// 16/9 the size of the kernel and are formed on every call; once the kernel no longer fits in a
// core's L2 (1 MiB of weights and more: ResNet-50's layer3 and layer4), those passes through
// memory cost more than the multiplies Winograd saves unless there are enough tiles to spread
// them over. At batch 1 a 7x7 map has 16 tiles and a 14x14 one 49: there the direct kernels ran
// 1.9x and 1.1x faster (512 and 256 channels); from 64 tiles Winograd was as fast or faster.
inline bool winograd_pays(const Conv2dParams& p) {
  const int64_t tiles = p.n * ((p.out_h() + 1) / 2) * ((p.out_w() + 1) / 2);
  const int64_t kernel_floats = p.c_out * p.c_in * 9;
  return tiles >= 64 || kernel_floats * int64_t(sizeof(float)) < (int64_t(1) << 20);
}

// u[0..15] = G g G^T for the 3x3 kernel g (row-major), G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1].
inline void wino_kernel_transform(const float* g, float* u) {
  float t[4][3];
  for (int j = 0; j < 3; ++j) {
    t[0][j] = g[j];
    t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
    t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
    t[3][j] = g[6 + j];
  }
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = t[i][0];
    u[4 * i + 1] = 0.5f * (t[i][0] + t[i][1] + t[i][2]);
    u[4 * i + 2] = 0.5f * (t[i][0] - t[i][1] + t[i][2]);
    u[4 * i + 3] = t[i][2];
  }
}

// Floats between the prepacked operands of two positions: a prepacked operand and one cache line,
// so that the 16 streams the transform writes do not all fall in one cache set.
inline int64_t wino_weights_stride(const GemmConfig& cfg, int64_t m, int64_t c) {
  return int64_t(prepacked_a_size(cfg, m, c)) + 16;
}

// Transformed weights, prepacked as the A operand of the 16 GEMMs: U_q (m x c) holds position q
// of G g G^T for g = kernel(o, ch) (9 floats, row-major), written straight into the layout of
// prepack_a. `buf` holds 16 * wino_weights_stride(cfg, m, c) floats.
template <class Kernel>
void wino_prepack_weights(const GemmConfig& cfg, int64_t m, int64_t c, const Kernel& kernel,
                          float* buf, PrepackedA* u, bool parallel) {
  const int mr = tile_rows(cfg, m);
  const int64_t m_pad = round_up(m, mr), kc_blk = block_depth(cfg, c);
  const int64_t stride = wino_weights_stride(cfg, m, c);
  for_each_index(parallel, ceil_div(m, mr), [&](int64_t tile) {
    const int64_t i0 = tile * mr;
    const int rows = int(std::min<int64_t>(mr, m - i0));
    float g[9], t[kWinoPos];
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t pc = ch / kc_blk * kc_blk, kc = std::min(kc_blk, c - pc);
      const int64_t base = pc * m_pad + i0 * kc + (ch - pc) * rows;
      for (int i = 0; i < rows; ++i) {
        kernel(i0 + i, ch, g);
        wino_kernel_transform(g, t);
        for (int q = 0; q < kWinoPos; ++q) buf[q * stride + base + i] = t[q];
      }
    }
  });
  for (int q = 0; q < kWinoPos; ++q) u[q] = PrepackedA{buf + q * stride, m_pad, c, kc_blk};
}

// Where the tiles of a block [t0, t1) read and write, 16 tiles (lanes) to a group: for each of a
// tile's 16 input positions (r, s), the offset of that input from channel 0 of image 0 (-1 in
// the padding); for each of its 4 outputs, the offset of that output (-1 past the edge).
struct WinoTable {
  int64_t nt = 0, groups = 0;
  std::vector<int32_t> in, out;  // [group][position][lane]: 16 x 16 and 4 x 16 per group
  // Per group: whether its 16 tiles lie side by side in one row of tiles, all inside the output,
  // so that each of their two output rows is 32 consecutive floats (stores without scatter).
  std::vector<uint8_t> row_run;
  // Per half group (8 tiles): whether those tiles lie side by side in one row of tiles with all
  // their inputs inside the image, so that each of their 4 input rows is 18 consecutive floats
  // (loads and shuffles instead of a gather).
  std::vector<uint8_t> in_run;
  const int32_t* in_at(int64_t g, int pos) const { return in.data() + (g * 16 + pos) * 16; }
  const int32_t* out_at(int64_t g, int pos) const { return out.data() + (g * 4 + pos) * 16; }
  int lanes(int64_t g) const { return int(std::min<int64_t>(16, nt - 16 * g)); }
};

// Where a transform writes value (row, column j) of one position's matrix (rows x nt columns): in
// panels of nr columns (the last one vw-rounded), row after row inside each, as the GEMM reads its
// B operand. The forward's columns are tiles (rows: channels); the weight gradient's, channels.
struct WinoPanels {
  int64_t rows, nt, nr, vw;
  int64_t width(int64_t jp) const { return std::min(nr, round_up(nt - jp * nr, vw)); }
  int64_t at(int64_t row, int64_t j) const {
    const int64_t jp = j / nr;
    return jp * nr * rows + row * width(jp) + j % nr;
  }
  int64_t size() const { return round_up(nt, nr) * rows; }  // floats per position (enough)
  int64_t padded() const {  // tiles including the last panel's padding
    const int64_t jp = (nt - 1) / nr;
    return jp * nr + width(jp);
  }
};

inline void wino_table(const WinoShape& s, int64_t t0, int64_t t1, WinoTable& tab) {
  const int64_t th = s.th(), tw = s.tw(), oh = s.oh(), ow = s.ow();
  tab.nt = t1 - t0;
  tab.groups = ceil_div(tab.nt, 16);
  tab.in.assign(size_t(tab.groups * 256), -1);
  tab.out.assign(size_t(tab.groups * 64), -1);
  tab.row_run.assign(size_t(tab.groups), 0);
  tab.in_run.assign(size_t(2 * tab.groups), 0);
  for (int64_t j = 0; j < tab.nt; ++j) {
    const int64_t t = t0 + j, img = t / (th * tw), ty = t % (th * tw) / tw, tx = t % tw;
    const int64_t g = j / 16, lane = j % 16;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) {
        const int64_t iy = 2 * ty - s.py + r, ix = 2 * tx - s.px + c;
        if (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w)
          tab.in[size_t((g * 16 + 4 * r + c) * 16 + lane)] =
              int32_t((img * s.c * s.h + iy) * s.w + ix);
      }
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 2; ++c) {
        const int64_t oy = 2 * ty + r, ox = 2 * tx + c;
        if (oy < oh && ox < ow)
          tab.out[size_t((g * 4 + 2 * r + c) * 16 + lane)] =
              int32_t((img * s.m * oh + oy) * ow + ox);
      }
  }
  for (int64_t g = 0; g < tab.groups; ++g) {
    const int32_t *p0 = tab.out_at(g, 0), *p1 = tab.out_at(g, 1), *p2 = tab.out_at(g, 2),
                  *p3 = tab.out_at(g, 3);
    bool run = tab.lanes(g) == 16 && p0[0] >= 0;
    for (int l = 0; run && l < 16; ++l)
      run =
          p0[l] == p0[0] + 2 * l && p1[l] == p0[l] + 1 && p2[l] == p0[l] + ow && p3[l] == p2[l] + 1;
    tab.row_run[size_t(g)] = run ? 1 : 0;
    for (int h = 0; h < 2; ++h) {
      const int32_t first = tab.in_at(g, 0)[8 * h];
      bool in = 16 * g + 8 * h + 8 <= tab.nt && first >= 0;
      for (int pos = 0; in && pos < 16; ++pos)
        for (int l = 0; in && l < 8; ++l)
          in = tab.in_at(g, pos)[8 * h + l] == first + (pos / 4) * s.w + 2 * l + pos % 4;
      tab.in_run[size_t(2 * g + h)] = in ? 1 : 0;
    }
  }
}

// 16 tiles at once, one per lane.
typedef float WinoVec __attribute__((vector_size(64)));

// v = B^T d B for the 16 input positions d (row-major 4 x 4), B^T = [1 0 -1 0; 0 1 1 0;
// 0 -1 1 0; 0 1 0 -1].
__attribute__((always_inline)) inline void wino_in16(const WinoVec* d, WinoVec* v) {
  WinoVec b[16];
  for (int c = 0; c < 4; ++c) {
    b[c] = d[c] - d[8 + c];
    b[4 + c] = d[4 + c] + d[8 + c];
    b[8 + c] = d[8 + c] - d[4 + c];
    b[12 + c] = d[4 + c] - d[12 + c];
  }
  for (int i = 0; i < 4; ++i) {
    v[4 * i] = b[4 * i] - b[4 * i + 2];
    v[4 * i + 1] = b[4 * i + 1] + b[4 * i + 2];
    v[4 * i + 2] = b[4 * i + 2] - b[4 * i + 1];
    v[4 * i + 3] = b[4 * i + 1] - b[4 * i + 3];
  }
}

// y (2 x 2) = A^T m A + bias, A^T = [1 1 1 0; 0 1 -1 -1].
__attribute__((always_inline)) inline void wino_out16(const WinoVec* m, const WinoVec& bias,
                                                      WinoVec* y) {
  WinoVec a[8];
  for (int j = 0; j < 4; ++j) {
    a[j] = m[j] + m[4 + j] + m[8 + j];
    a[4 + j] = m[4 + j] - m[8 + j] - m[12 + j];
  }
  for (int r = 0; r < 2; ++r) {
    y[2 * r] = a[4 * r] + a[4 * r + 1] + a[4 * r + 2] + bias;
    y[2 * r + 1] = a[4 * r + 1] - a[4 * r + 2] - a[4 * r + 3] + bias;
  }
}

// The two transforms over a block, channel after channel and group after group: the input
// (V[q][ch][j] into the GEMM's panels) and the output (M[q][o][j] to y, plus bias). Portable:
// element loads and stores through the table.
// d[l] = base[idx[l]], or zero where idx[l] < 0.
inline void wino_gather_generic(const int32_t* idx, const float* base, WinoVec& d) {
  for (int l = 0; l < 16; ++l) d[l] = idx[l] >= 0 ? base[idx[l]] : 0.0f;
}
// Stores group g (16 tiles) of row `row` of the 16 positions' matrices r into their panels; the
// last panel's padding gets zeros (the GEMM multiplies it into columns it drops).
inline void wino_store_generic(const WinoVec* r, const WinoTable& tab, int64_t g, int64_t row,
                               const WinoPanels& lay, float* dst) {
  const int lanes = tab.lanes(g);
  const int fill = int(std::min<int64_t>(16, lay.padded() - 16 * g));
  for (int q = 0; q < kWinoPos; ++q)
    for (int l = 0; l < fill; ++l)
      dst[q * lay.size() + lay.at(row, 16 * g + l)] = l < lanes ? r[q][l] : 0.0f;
}

inline void wino_input_generic(const WinoShape& s, const WinoTable& tab, const float* x, int64_t c0,
                               int64_t c1, float* v, const WinoPanels& lay) {
  for (int64_t ch = c0; ch < c1; ++ch) {
    const float* xc = x + ch * s.h * s.w;
    for (int64_t g = 0; g < tab.groups; ++g) {
      WinoVec d[16], r[16];
      for (int pos = 0; pos < 16; ++pos) wino_gather_generic(tab.in_at(g, pos), xc, d[pos]);
      wino_in16(d, r);
      wino_store_generic(r, tab, g, ch, lay, v);
    }
  }
}
inline void wino_output_generic(const WinoShape& s, const WinoTable& tab, const float* mq,
                                int64_t ld, int64_t o0, int64_t o1, const float* bias, float* y) {
  const int64_t qs = s.m * ld;
  const int64_t plane = s.oh() * s.ow();
  for (int64_t o = o0; o < o1; ++o) {
    WinoVec b;
    for (int l = 0; l < 16; ++l) b[l] = bias != nullptr ? bias[o] : 0.0f;
    for (int64_t g = 0; g < tab.groups; ++g) {
      WinoVec m[16], r[4];
      const int lanes = tab.lanes(g);
      for (int q = 0; q < kWinoPos; ++q)
        for (int l = 0; l < 16; ++l) m[q][l] = l < lanes ? mq[q * qs + o * ld + 16 * g + l] : 0;
      wino_out16(m, b, r);
      for (int pos = 0; pos < 4; ++pos) {
        const int32_t* idx = tab.out_at(g, pos);
        for (int l = 0; l < 16; ++l)
          if (idx[l] >= 0) y[o * plane + idx[l]] = r[pos][l];
      }
    }
  }
}
#ifdef IPUML_CPU_X86
// The same with AVX-512 masked gathers, loads, stores and scatters; the arithmetic is the same
// sequence of vector adds, so the results are the same bits.
__attribute__((target("avx512f"))) inline __m512 wino_gather(const int32_t* idx,
                                                             const float* base) {
  const __m512i i = _mm512_loadu_si512(idx);
  const __mmask16 in = _mm512_cmpge_epi32_mask(i, _mm512_setzero_si512());
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, i, base, 4);
}
__attribute__((target("avx512f"))) inline void wino_input_avx512(const WinoShape& s,
                                                                 const WinoTable& tab,
                                                                 const float* x, int64_t c0,
                                                                 int64_t c1, float* v,
                                                                 const WinoPanels& lay) {
  const int64_t qs = lay.size();
  for (int64_t ch = c0; ch < c1; ++ch) {
    const float* xc = x + ch * s.h * s.w;
    for (int64_t g = 0; g < tab.groups; ++g) {
      WinoVec d[16], r[16];
      for (int pos = 0; pos < 16; ++pos) d[pos] = WinoVec(wino_gather(tab.in_at(g, pos), xc));
      wino_in16(d, r);
      // Lanes past the block's tiles gathered nothing, so they store zeros (panel padding).
      float* dst = v + lay.at(ch, 16 * g);
      for (int q = 0; q < kWinoPos; ++q) _mm512_storeu_ps(dst + q * qs, __m512(r[q]));
    }
  }
}
__attribute__((target("avx512f"))) inline void wino_output_avx512(const WinoShape& s,
                                                                  const WinoTable& tab,
                                                                  const float* mq, int64_t ld,
                                                                  int64_t o0, int64_t o1,
                                                                  const float* bias, float* y) {
  const int64_t plane = s.oh() * s.ow(), qs = s.m * ld;
  for (int64_t o = o0; o < o1; ++o) {
    const WinoVec b = WinoVec(_mm512_set1_ps(bias != nullptr ? bias[o] : 0.0f));
    for (int64_t g = 0; g < tab.groups; ++g) {
      WinoVec m[16], r[4];
      const __mmask16 keep = __mmask16((1u << tab.lanes(g)) - 1u);
      for (int q = 0; q < kWinoPos; ++q)
        m[q] = WinoVec(_mm512_maskz_loadu_ps(keep, mq + q * qs + o * ld + 16 * g));
      wino_out16(m, b, r);
      for (int pos = 0; pos < 4; ++pos) {
        const __m512i i = _mm512_loadu_si512(tab.out_at(g, pos));
        const __mmask16 in = _mm512_cmpge_epi32_mask(i, _mm512_setzero_si512());
        _mm512_mask_i32scatter_ps(y + o * plane, in, i, __m512(r[pos]), 4);
      }
    }
  }
}
#endif

#ifdef IPUML_CPU_X86
// The same with AVX2: two 8-lane masked gathers per position; the output, which AVX2 cannot
// scatter, as two runs of 32 floats when the group's tiles sit side by side in one row of tiles,
// else as pairs of neighbouring outputs. The same arithmetic again, so the same bits.
// Stores the first `fill` (16 or 8) lanes of r.
__attribute__((target("avx2"))) inline void store_lanes_avx2(float* dst, const Vec16& r,
                                                             int64_t fill) {
  _mm256_storeu_ps(dst, vec16_lo(r));
  if (fill > 8) _mm256_storeu_ps(dst + 8, vec16_hi(r));
}
// out[c][l] = row[2 l + c] for 8 lanes l and the 4 columns c of a tile row: 18 floats read.
__attribute__((target("avx2"))) inline void deinterleave_row_avx2(const float* row, __m256* out) {
  const __m256 a0 = _mm256_loadu_ps(row), a1 = _mm256_loadu_ps(row + 8);
  const __m256 b0 = _mm256_loadu_ps(row + 2), b1 = _mm256_loadu_ps(row + 10);
  out[0] = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a0, a1, 0x88)), 0xD8));
  out[1] = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a0, a1, 0xDD)), 0xD8));
  out[2] = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(b0, b1, 0x88)), 0xD8));
  out[3] = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(b0, b1, 0xDD)), 0xD8));
}
__attribute__((target("avx2"))) inline void wino_input_avx2(const WinoShape& s,
                                                            const WinoTable& tab, const float* x,
                                                            int64_t c0, int64_t c1, float* v,
                                                            const WinoPanels& lay) {
  const int64_t qs = lay.size();
  for (int64_t ch = c0; ch < c1; ++ch) {
    const float* xc = x + ch * s.h * s.w;
    for (int64_t g = 0; g < tab.groups; ++g) {
      WinoVec d[16], r[16];
      __m256 half[2][16];
      for (int h = 0; h < 2; ++h) {
        if (tab.in_run[size_t(2 * g + h)]) {
          for (int rr = 0; rr < 4; ++rr)
            deinterleave_row_avx2(xc + tab.in_at(g, 0)[8 * h] + rr * s.w, half[h] + 4 * rr);
        } else {
          for (int pos = 0; pos < 16; ++pos)
            half[h][pos] = gather8_avx2(tab.in_at(g, pos) + 8 * h, xc);
        }
      }
      for (int pos = 0; pos < 16; ++pos) vec16_join(half[0][pos], half[1][pos], d[pos]);
      wino_in16(d, r);
      // Panels are vw = 8 wide at the end: the last one may hold only 8 of the group's lanes.
      const int64_t j0 = 16 * g, fill = lay.width(j0 / lay.nr) - j0 % lay.nr;
      float* dst = v + lay.at(ch, j0);
      for (int q = 0; q < kWinoPos; ++q) store_lanes_avx2(dst + q * qs, r[q], fill);
    }
  }
}
// [a0 b0 a1 b1 ... a7 b7] of two 8-lane halves, as two vectors.
__attribute__((target("avx2"))) inline void interleave_avx2(__m256 a, __m256 b, float* dst) {
  const __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
  _mm256_storeu_ps(dst, _mm256_permute2f128_ps(lo, hi, 0x20));
  _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}
__attribute__((target("avx2"))) inline void wino_output_avx2(const WinoShape& s,
                                                             const WinoTable& tab, const float* mq,
                                                             int64_t ld, int64_t o0, int64_t o1,
                                                             const float* bias, float* y) {
  const int64_t plane = s.oh() * s.ow(), qs = s.m * ld, ow = s.ow();
  for (int64_t o = o0; o < o1; ++o) {
    WinoVec b;
    const float bo = bias != nullptr ? bias[o] : 0.0f;
    for (int l = 0; l < 16; ++l) b[l] = bo;
    float* yo = y + o * plane;
    for (int64_t g = 0; g < tab.groups; ++g) {
      WinoVec m[16], r[4];
      const Lanes16 keep = lanes16_first(tab.lanes(g));
      for (int q = 0; q < kWinoPos; ++q) load16_avx2(keep, mq + q * qs + o * ld + 16 * g, m[q]);
      wino_out16(m, b, r);
      if (tab.row_run[size_t(g)]) {
        float* row = yo + tab.out_at(g, 0)[0];
        for (int rr = 0; rr < 2; ++rr, row += ow) {
          interleave_avx2(vec16_lo(r[2 * rr]), vec16_lo(r[2 * rr + 1]), row);
          interleave_avx2(vec16_hi(r[2 * rr]), vec16_hi(r[2 * rr + 1]), row + 16);
        }
        continue;
      }
      for (int pos = 0; pos < 4; ++pos) {
        const int32_t* idx = tab.out_at(g, pos);
        for (int l = 0; l < 16; ++l)
          if (idx[l] >= 0) yo[idx[l]] = r[pos][l];
      }
    }
  }
}
#endif

// The AVX-512 forms store whole runs of 16 (tiles here, channels in the weight gradient), so they
// need panels in multiples of 16; the AVX2 forms store runs of 16 or, at a panel's end, 8.
inline bool wino_groups_fit(const WinoPanels& lay) {
  return active_isa() == Isa::avx512 && lay.nr % 16 == 0 && lay.vw % 16 == 0;
}
inline bool wino_groups_fit_avx2(const WinoPanels& lay) {
  return active_isa() == Isa::avx2 && lay.nr % 16 == 0 && lay.vw == 8;
}
inline void wino_input_transform(const WinoShape& s, const WinoTable& tab, const float* x,
                                 int64_t c0, int64_t c1, float* v, const WinoPanels& lay) {
#ifdef IPUML_CPU_X86
  if (wino_groups_fit(lay)) return wino_input_avx512(s, tab, x, c0, c1, v, lay);
  if (wino_groups_fit_avx2(lay)) return wino_input_avx2(s, tab, x, c0, c1, v, lay);
#endif
  wino_input_generic(s, tab, x, c0, c1, v, lay);
}
inline void wino_output_transform(const WinoShape& s, const WinoTable& tab, const float* mq,
                                  int64_t ld, int64_t o0, int64_t o1, const float* bias, float* y) {
#ifdef IPUML_CPU_X86
  if (active_isa() == Isa::avx512) return wino_output_avx512(s, tab, mq, ld, o0, o1, bias, y);
  if (active_isa() == Isa::avx2) return wino_output_avx2(s, tab, mq, ld, o0, o1, bias, y);
#endif
  wino_output_generic(s, tab, mq, ld, o0, o1, bias, y);
}
// C (m x n, row stride ldc) = A (prepacked m x k) x B (+ C when `accumulate`) on the calling
// thread, B already in the GEMM's panels (WinoPanels with the config's nr and vw): the same
// micro-kernels and k blocks as run_gemm, with nothing to pack.
inline void run_panel_gemm(const GemmConfig& cfg, int64_t m, int64_t k, const PrepackedA& a,
                           const float* b, const WinoPanels& lay, float* c, int64_t ldc,
                           bool accumulate = false) {
  const int mr = tile_rows(cfg, m);
  const int64_t kc_blk = block_depth(cfg, k);
  for (int64_t pc = 0; pc < k; pc += kc_blk) {
    const int64_t kc = std::min(kc_blk, k - pc);
    const float beta = pc == 0 && !accumulate ? 0.0f : 1.0f;
    for (int64_t jp = 0; jp * lay.nr < lay.nt; ++jp) {
      const int64_t j0 = jp * lay.nr, w = lay.width(jp);
      const int nr = int(std::min(lay.nr, lay.nt - j0)), nv = int(w / cfg.vw);
      const float* pb = b + jp * lay.nr * k + pc * w;
      for (int64_t ir = 0; ir < m; ir += mr) {
        const int rows = int(std::min<int64_t>(mr, m - ir));
        cfg.kern[rows][nv](kc, a.block(ir, pc), pb, c + ir * ldc + j0, ldc, nr, 1.0f, beta);
      }
    }
  }
}

// Splits [0, count) into `parts` even runs and runs body(begin, end) for each (in parallel when
// asked): the transforms' work split, which never changes their results.
template <class F>
void for_each_run(bool parallel, int64_t count, int64_t parts, const F& body) {
  parts = std::max<int64_t>(1, std::min(count, parts));
  for_each_index(parallel, parts,
                 [&](int64_t i) { body(i * count / parts, (i + 1) * count / parts); });
}

// One block of tiles [t0, t1) of winograd_conv: the input transform into v, 16 GEMMs into mq,
// the output transform into y; split over threads (runs of channels, positions) when `parallel`.
inline void winograd_block(const GemmConfig& cfg, const WinoShape& s, const PrepackedA* u,
                           const float* x, const float* bias, float* y, int64_t t0, int64_t t1,
                           float* v, float* mq, int64_t ld, WinoTable& tab, bool parallel) {
  const int parts = 4 * (parallel ? available_threads() : 1);
  const WinoPanels lay{s.c, t1 - t0, cfg.nr(), cfg.vw};
  wino_table(s, t0, t1, tab);
  for_each_run(parallel, s.c, parts,
               [&](int64_t c0, int64_t c1) { wino_input_transform(s, tab, x, c0, c1, v, lay); });
  for_each_index(parallel, kWinoPos, [&](int64_t q) {
    run_panel_gemm(cfg, s.m, s.c, u[q], v + q * lay.size(), lay, mq + q * s.m * ld, ld);
  });
  for_each_run(parallel, s.m, parts, [&](int64_t o0, int64_t o1) {
    wino_output_transform(s, tab, mq, ld, o0, o1, bias, y);
  });
}

// y (n x m x oh x ow) = the convolution of x (n x c x h x w) with the weights prepacked by
// wino_prepack_weights, plus bias (may be null).
inline void winograd_conv(const GemmConfig& cfg, const WinoShape& s, const PrepackedA* u,
                          const float* x, const float* bias, float* y, bool parallel) {
  const int64_t T = s.tiles(), blk = s.block(), ld = round_up(blk, 16);
  const int64_t blocks = ceil_div(T, blk);
  const size_t v_size = size_t(kWinoPos * WinoPanels{s.c, blk, cfg.nr(), cfg.vw}.size());
  const size_t mq_size = size_t(kWinoPos * s.m * ld);
  // With blocks to spare, each task runs whole blocks, whose data stays in its core's L2, with no
  // fork inside a block. A block forks three times (transforms, GEMMs): on small blocks (under
  // 1e8 FLOPs of GEMMs) one block per thread pays even when they split unevenly (ResNet-50's 3x3s
  // at batch 1, 2 threads: 56x56 in 7 blocks 0.91 -> 0.63 ms, 28x28 in 2 blocks 0.77 -> 0.64 ms),
  // on larger ones an uneven split costs more (14x14 x 256 at batch 4 in 2 blocks: 2.2 -> 2.5 ms).
  // Every output tile's arithmetic is the same whichever block or thread computes it, so the
  // results do not change.
  const int threads = parallel ? available_threads() : 1;
  const bool small = 2.0 * kWinoPos * double(s.m) * double(s.c) * double(blk) < 1e8;
  if (parallel && (blocks >= 4 * threads || (small && blocks >= threads))) {
    for_each_run(true, blocks, 4 * threads, [&](int64_t b0, int64_t b1) {
      ScratchLease v(kScratchConv, v_size), mq(kScratchConvOut, mq_size);
      WinoTable tab;  // one table per run of blocks, not per block
      for (int64_t b = b0; b < b1; ++b)
        winograd_block(cfg, s, u, x, bias, y, b * blk, std::min(T, (b + 1) * blk), v.get(),
                       mq.get(), ld, tab, false);
    });
    return;
  }
  ScratchLease v(kScratchConv, v_size), mq(kScratchConvOut, mq_size);
  WinoTable tab;
  for (int64_t t0 = 0; t0 < T; t0 += blk)
    winograd_block(cfg, s, u, x, bias, y, t0, std::min(T, t0 + blk), v.get(), mq.get(), ld, tab,
                   parallel);
}

}  // namespace ipuml::cpu::detail
