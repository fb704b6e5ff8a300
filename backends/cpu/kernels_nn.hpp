// CPU kernels of the linear-algebra and nn ops: matmul and convolution dispatch onto gemm.hpp /
// conv.hpp, and the 2-d pooling family (max with indices, average, adaptive) with gradients.
#pragma once

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/kernels_common.hpp>

#include <atomic>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace ipuml::cpu::kdetail {

// ---- matmul ---------------------------------------------------------------------------------

inline void k_matmul(const ir::Attrs& at, const ConstBuffer& ia, const ConstBuffer& ib,
                     const MutableBuffer& o) {
  const Shape& sa = ia.meta.shape;
  const Shape& sb = ib.meta.shape;
  IPUML_CHECK(ia.meta.dtype == DType::Float32 && ib.meta.dtype == DType::Float32,
              "matmul: expected float32 operands");
  IPUML_CHECK(sa.size() >= 2 && sb.size() >= 2, "matmul: expected operands of rank >= 2, got ",
              shape_str(sa), " and ", shape_str(sb));
  const bool ta = at.flag, tb = at.flag2;
  const int64_t m = ta ? sa[sa.size() - 1] : sa[sa.size() - 2];
  const int64_t k = ta ? sa[sa.size() - 2] : sa[sa.size() - 1];
  const int64_t kb = tb ? sb[sb.size() - 1] : sb[sb.size() - 2];
  const int64_t n = tb ? sb[sb.size() - 2] : sb[sb.size() - 1];
  IPUML_CHECK(k == kb, "matmul: inner dimensions differ: ", shape_str(sa), " @ ", shape_str(sb));
  const Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const Shape bo = broadcast_shapes(ba, bb, "matmul (batch dims)");
  Shape expect = bo;
  expect.push_back(m);
  expect.push_back(n);
  IPUML_CHECK(o.meta.shape == expect, "matmul: output shape ", shape_str(o.meta.shape),
              ", expected ", shape_str(expect));
  const float* a = in_ptr<float>(ia);
  const float* b = in_ptr<float>(ib);
  float* c = out_ptr<float>(o);
  const int64_t lda = ta ? m : k, ldb = tb ? k : n;
  const int64_t batch = numel(bo);
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + batch * m * n, 0.0f);
    return;
  }
  // Batch dims coalesced, in units of whole matrices (stride 0 where an operand broadcasts).
  const auto plan = make_plan<2>(bo, {&ba, &bb});
  const int64_t sA = plan.inner_stride[0] * m * k, sB = plan.inner_stride[1] * k * n;
  // One shared B under a batch of untransposed, contiguous A: a single taller GEMM.
  if (plan.outer == 1 && !ta && sB == 0 && sA == m * k) {
    sgemm(false, tb, plan.inner * m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    return;
  }
  if (plan.outer == 1) {
    sgemm_batched(ta, tb, plan.inner, m, n, k, 1.0f, a, lda, sA, b, ldb, sB, 0.0f, c, n, m * n);
    return;
  }
  // Irregular broadcasting: one batched call per outer batch index (sequential; each call is
  // parallel inside).
  const size_t nd = plan.sizes.size();
  std::vector<int64_t> idx(nd, 0);
  for (int64_t r = 0; r < plan.outer; ++r) {
    int64_t oa = 0, ob = 0, rem = r;
    for (size_t d = nd; d-- > 0;) {
      const int64_t i = rem % plan.sizes[d];
      rem /= plan.sizes[d];
      oa += i * plan.strides[d][0];
      ob += i * plan.strides[d][1];
    }
    sgemm_batched(ta, tb, plan.inner, m, n, k, 1.0f, a + oa * m * k, lda, sA, b + ob * k * n, ldb,
                  sB, 0.0f, c + r * plan.inner * m * n, n, m * n);
  }
}

// ---- convolution ----------------------------------------------------------------------------

inline int64_t geom(const std::vector<int64_t>& v, size_t i, int64_t dflt) {
  return v.size() == 2 ? v[i] : dflt;
}

inline Conv2dParams conv_params(const char* op, const ir::Attrs& a, const Shape& x,
                                const Shape& w) {
  IPUML_CHECK(x.size() == 4 && w.size() == 4, op, ": expected 4-d input and weight, got ",
              shape_str(x), " and ", shape_str(w));
  Conv2dParams p;
  p.n = x[0];
  p.c_in = x[1];
  p.h = x[2];
  p.w = x[3];
  p.c_out = w[0];
  p.kh = w[2];
  p.kw = w[3];
  p.stride_h = geom(a.stride, 0, 1);
  p.stride_w = geom(a.stride, 1, 1);
  p.pad_h = geom(a.padding, 0, 0);
  p.pad_w = geom(a.padding, 1, 0);
  p.dil_h = geom(a.dilation, 0, 1);
  p.dil_w = geom(a.dilation, 1, 1);
  p.groups = a.groups;
  check_conv2d_params(op, p);
  IPUML_CHECK(w[1] * p.groups == p.c_in, op, ": weight of shape ", shape_str(w), " expects ",
              w[1] * p.groups, " input channels, got ", p.c_in);
  return p;
}

inline void expect_f32(const char* op, const ir::TensorMeta& t, const Shape& s, const char* what) {
  IPUML_CHECK(t.dtype == DType::Float32, op, ": expected a float32 ", what, ", got ",
              dtype_name(t.dtype));
  IPUML_CHECK(t.shape == s, op, ": ", what, " has shape ", shape_str(t.shape), ", expected ",
              shape_str(s));
}

// The forward convolution; `epilogue` (may be null) is a batch norm's output pass fused into it.
inline void k_conv(const ir::Attrs& a, const std::vector<ConstBuffer>& in, const MutableBuffer& o,
                   const ChannelAffine* epilogue = nullptr) {
  IPUML_CHECK(in.size() == 2 || in.size() == 3, "conv: expected 2 or 3 inputs, got ", in.size());
  const auto p = conv_params("conv", a, in[0].meta.shape, in[1].meta.shape);
  expect_f32("conv", in[0].meta, in[0].meta.shape, "input");
  expect_f32("conv", in[1].meta, in[1].meta.shape, "weight");
  if (in.size() == 3) expect_f32("conv", in[2].meta, Shape{p.c_out}, "bias");
  expect_f32("conv", o.meta, Shape{p.n, p.c_out, p.out_h(), p.out_w()}, "output");
  conv2d_forward(p, in_ptr<float>(in[0]), in_ptr<float>(in[1]),
                 in.size() == 3 ? in_ptr<float>(in[2]) : nullptr, out_ptr<float>(o), epilogue);
}

inline void k_conv_backward_input(const ir::Attrs& a, const ConstBuffer& dy, const ConstBuffer& w,
                                  const MutableBuffer& o) {
  const char* op = "conv_backward_input";
  const auto p = conv_params(op, a, a.shape, w.meta.shape);
  expect_f32(op, w.meta, w.meta.shape, "weight");
  expect_f32(op, dy.meta, Shape{p.n, p.c_out, p.out_h(), p.out_w()}, "output gradient");
  expect_f32(op, o.meta, a.shape, "input gradient");
  conv2d_backward_input(p, in_ptr<float>(dy), in_ptr<float>(w), out_ptr<float>(o));
}

inline void k_conv_backward_weight(const ir::Attrs& a, const ConstBuffer& x, const ConstBuffer& dy,
                                   const MutableBuffer& o) {
  const char* op = "conv_backward_weight";
  const auto p = conv_params(op, a, x.meta.shape, a.shape);
  expect_f32(op, x.meta, x.meta.shape, "input");
  expect_f32(op, dy.meta, Shape{p.n, p.c_out, p.out_h(), p.out_w()}, "output gradient");
  expect_f32(op, o.meta, a.shape, "weight gradient");
  conv2d_backward_weight(p, in_ptr<float>(x), in_ptr<float>(dy), out_ptr<float>(o));
}

// ---- pooling --------------------------------------------------------------------------------

struct PoolGeom {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
};

inline PoolGeom pool_geom(const char* op, const ir::Attrs& a, const Shape& x, const Shape& y) {
  IPUML_CHECK(x.size() == 4 && y.size() == 4 && x[0] == y[0] && x[1] == y[1], op, ": input shape ",
              shape_str(x), " and output shape ", shape_str(y),
              " are not matching 4-d NCHW shapes");
  IPUML_CHECK(a.kernel.size() == 2 && a.stride.size() == 2 && a.padding.size() == 2, op,
              ": expected 2-d kernel/stride/padding");
  PoolGeom g{x[0] * x[1], x[2],        x[3],        y[2],         y[3],        a.kernel[0],
             a.kernel[1], a.stride[0], a.stride[1], a.padding[0], a.padding[1]};
  IPUML_CHECK(g.kh > 0 && g.kw > 0 && g.sh > 0 && g.sw > 0 && g.ph >= 0 && g.pw >= 0, op,
              ": kernel and stride must be positive and padding non-negative");
  IPUML_CHECK(g.oh == ir::window_out_size(g.h, g.kh, g.sh, g.ph) &&
                  g.ow == ir::window_out_size(g.w, g.kw, g.sw, g.pw),
              op, ": output spatial size ", g.oh, "x", g.ow, " does not match input ", g.h, "x",
              g.w, " with kernel ", ipuml::detail::str(a.kernel), " stride ",
              ipuml::detail::str(a.stride), " padding ", ipuml::detail::str(a.padding));
  return g;
}

// ---- max pooling ----------------------------------------------------------------------------
// The rule for every output: the first NaN of its window in row-major order when there is one
// (NaN wins and sticks), else the first maximum (ties go to the earlier element); the index is
// r * w + c within the plane. A window of -inf values keeps -inf and its first element's index.
// Every path applies the one comparison `take = !(v <= best) & (best == best)` in row-major window
// order, so all of them (and every thread count: work is split over planes) give the same bits.

// One output, scalar: edge columns clipped by padding, short rows, planes too big for int32 lanes.
inline void maxpool_one(const PoolGeom& g, const float* xp, int64_t i, int64_t j, float* yp,
                        int64_t* ip) {
  const int64_t h0 = std::max<int64_t>(0, i * g.sh - g.ph);
  const int64_t h1 = std::min(g.h, i * g.sh - g.ph + g.kh);
  const int64_t w0 = std::max<int64_t>(0, j * g.sw - g.pw);
  const int64_t w1 = std::min(g.w, j * g.sw - g.pw + g.kw);
  float best = -std::numeric_limits<float>::infinity();
  int64_t bi = h0 * g.w + w0;
  for (int64_t r = h0; r < h1; ++r)
    for (int64_t c = w0; c < w1; ++c) {
      const float v = xp[r * g.w + c];
      const bool take = !(v <= best) & (best == best);
      best = take ? v : best;
      bi = take ? r * g.w + c : bi;
    }
  yp[i * g.ow + j] = best;
  ip[i * g.ow + j] = bi;
}

// GCC/Clang vector extensions: V floats, their int32 lane masks and in-plane indices, and the
// int64 indices written out.
template <int V>
struct PoolVec {
  typedef float F __attribute__((vector_size(4 * V)));
  typedef int32_t I __attribute__((vector_size(4 * V)));
  typedef int64_t L __attribute__((vector_size(8 * V)));
};

// U vectors of V outputs of one row, columns js[u] .. js[u] + V - 1, every window inside the row
// (rows h0 .. h1 - 1 of it). The window taps are the outer loops, the V columns one vector op:
// loads at stride SW (0: g.sw at run time), compare and select with no branch. U > 1 interleaves
// independent dependency chains.
template <int V, int U, int SW, int... Ls>
inline __attribute__((always_inline)) void maxpool_vectors(const PoolGeom& g, const float* xp,
                                                           int64_t h0, int64_t h1,
                                                           const int64_t* js, float* yr,
                                                           int64_t* ir,
                                                           std::integer_sequence<int, Ls...>) {
  using F = typename PoolVec<V>::F;
  using I = typename PoolVec<V>::I;
  using L = typename PoolVec<V>::L;
  const int64_t sw = SW > 0 ? SW : g.sw;
  const I lane = I{Ls...} * static_cast<int32_t>(sw);  // column offsets of the V windows
  F best[U];
  I bi[U];
  int64_t col0[U];
  for (int u = 0; u < U; ++u) {
    col0[u] = js[u] * sw - g.pw;
    best[u] = F{} - std::numeric_limits<float>::infinity();
    bi[u] = lane + static_cast<int32_t>(h0 * g.w + col0[u]);
  }
  for (int64_t r = h0; r < h1; ++r)
    for (int64_t c = 0; c < g.kw; ++c)
      for (int u = 0; u < U; ++u) {
        const int64_t at = r * g.w + col0[u] + c;
        const float* src = xp + at;
        F v;
        if constexpr (SW == 1) {
          std::memcpy(&v, src, sizeof v);
        } else if constexpr (SW == 2) {
          // src[0], src[2], .. src[2V - 2] from two loads, the second ending at src[2V - 2] so
          // that nothing past the last window is read.
          F lo, hi;
          std::memcpy(&lo, src, sizeof lo);
          std::memcpy(&hi, src + V - 1, sizeof hi);
#if defined(__clang__)
          v = __builtin_shufflevector(lo, hi, (Ls < V / 2 ? 2 * Ls : 2 * Ls + 1)...);
#else
          v = __builtin_shuffle(lo, hi, I{(Ls < V / 2 ? 2 * Ls : 2 * Ls + 1)...});
#endif
        } else {
          float t[V];
          for (int l = 0; l < V; ++l) t[l] = src[l * sw];
          std::memcpy(&v, t, sizeof v);
        }
        // keep == !take: best stays when v <= best or best is NaN.
        const I keep = (v <= best[u]) | (best[u] != best[u]);
        best[u] = keep ? best[u] : v;
        bi[u] = keep ? bi[u] : lane + static_cast<int32_t>(at);
      }
  for (int u = 0; u < U; ++u) {
    std::memcpy(yr + js[u], &best[u], sizeof(F));
    const L wide = __builtin_convertvector(bi[u], L);
    std::memcpy(ir + js[u], &wide, sizeof(L));
  }
}

// Output columns [jlo, jhi) of row i, all windows inside the row: pairs of V-wide vectors, the
// last vector ending at jhi (overlapping the one before it: those outputs are computed twice, the
// same way); rows narrower than V take V / 2, then scalar code below 4.
template <int V, int SW>
inline __attribute__((always_inline)) void maxpool_row(const PoolGeom& g, const float* xp,
                                                       int64_t i, int64_t h0, int64_t h1,
                                                       int64_t jlo, int64_t jhi, float* yp,
                                                       int64_t* ip) {
  if (jhi - jlo < V) {
    if constexpr (V > 4) {
      maxpool_row<V / 2, SW>(g, xp, i, h0, h1, jlo, jhi, yp, ip);
    } else {
      for (int64_t j = jlo; j < jhi; ++j) maxpool_one(g, xp, i, j, yp, ip);
    }
    return;
  }
  constexpr auto lanes = std::make_integer_sequence<int, V>{};
  float* yr = yp + i * g.ow;
  int64_t* ir = ip + i * g.ow;
  int64_t j = jlo;
  for (; jhi - j >= 2 * V; j += 2 * V) {
    const int64_t js[2] = {j, j + V};
    maxpool_vectors<V, 2, SW>(g, xp, h0, h1, js, yr, ir, lanes);
  }
  if (jhi - j > V) {
    const int64_t js[2] = {j, jhi - V};
    maxpool_vectors<V, 2, SW>(g, xp, h0, h1, js, yr, ir, lanes);
  } else if (j < jhi) {
    const int64_t js[1] = {jhi - V};
    maxpool_vectors<V, 1, SW>(g, xp, h0, h1, js, yr, ir, lanes);
  }
}

template <int V, int SW>
inline __attribute__((always_inline)) void maxpool_planes_sw(const PoolGeom& g, const float* x,
                                                             float* y, int64_t* ix, int64_t p0,
                                                             int64_t p1) {
  // Columns whose window is not clipped by padding: [jlo, jhi).
  const int64_t jlo = std::min(g.ow, (g.pw + g.sw - 1) / g.sw);
  const int64_t jhi =
      std::max(jlo, g.w + g.pw < g.kw ? 0 : std::min(g.ow, (g.w + g.pw - g.kw) / g.sw + 1));
  for (int64_t pl = p0; pl < p1; ++pl) {
    const float* xp = x + pl * g.h * g.w;
    float* yp = y + pl * g.oh * g.ow;
    int64_t* ip = ix + pl * g.oh * g.ow;
    for (int64_t i = 0; i < g.oh; ++i) {
      const int64_t h0 = std::max<int64_t>(0, i * g.sh - g.ph);
      const int64_t h1 = std::min(g.h, i * g.sh - g.ph + g.kh);
      for (int64_t j = 0; j < jlo; ++j) maxpool_one(g, xp, i, j, yp, ip);
      maxpool_row<V, SW>(g, xp, i, h0, h1, jlo, jhi, yp, ip);
      for (int64_t j = jhi; j < g.ow; ++j) maxpool_one(g, xp, i, j, yp, ip);
    }
  }
}

template <int V>
inline __attribute__((always_inline)) void maxpool_planes(const PoolGeom& g, const float* x,
                                                          float* y, int64_t* ix, int64_t p0,
                                                          int64_t p1) {
  if (g.sw == 1) return maxpool_planes_sw<V, 1>(g, x, y, ix, p0, p1);
  if (g.sw == 2) return maxpool_planes_sw<V, 2>(g, x, y, ix, p0, p1);
  maxpool_planes_sw<V, 0>(g, x, y, ix, p0, p1);
}

// One body per instruction set. g is taken by value: the int64 index stores could otherwise alias
// it and force the geometry to be reloaded in the loops. The AVX-512 path is 8 floats wide too:
// GCC scalarises 16-wide vector-extension compares in a body not itself compiled for AVX-512, and
// rows of pooled feature maps are short anyway.
using MaxPoolPlanesFn = void (*)(PoolGeom, const float*, float*, int64_t*, int64_t, int64_t);

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) inline void maxpool_planes_avx512(PoolGeom g, const float* x,
                                                                     float* y, int64_t* ix,
                                                                     int64_t p0, int64_t p1) {
  maxpool_planes<8>(g, x, y, ix, p0, p1);
}
__attribute__((target("avx2,fma"))) inline void maxpool_planes_avx2(PoolGeom g, const float* x,
                                                                    float* y, int64_t* ix,
                                                                    int64_t p0, int64_t p1) {
  maxpool_planes<8>(g, x, y, ix, p0, p1);
}
#endif
inline void maxpool_planes_generic(PoolGeom g, const float* x, float* y, int64_t* ix, int64_t p0,
                                   int64_t p1) {
  maxpool_planes<4>(g, x, y, ix, p0, p1);
}
inline void maxpool_planes_scalar(PoolGeom g, const float* x, float* y, int64_t* ix, int64_t p0,
                                  int64_t p1) {
  for (int64_t pl = p0; pl < p1; ++pl)
    for (int64_t i = 0; i < g.oh; ++i)
      for (int64_t j = 0; j < g.ow; ++j)
        maxpool_one(g, x + pl * g.h * g.w, i, j, y + pl * g.oh * g.ow, ix + pl * g.oh * g.ow);
}

// ---- 2x2 windows at stride 2, no padding (the MNIST CNN's pooling) ----
// Output row i reads input rows 2i and 2i + 1, columns 0 .. 2 ow - 1. The four taps of a vector of
// outputs are the even and odd columns of those two rows, deinterleaved from contiguous loads: a
// short output row is one vector op per tap instead of two loads and a shuffle per tap and vector.
// The first tap is taken as it is: `take` against the initial -inf takes every value but -inf, and
// keeping -inf with the first tap's index is the same bits.
inline bool maxpool_is_2x2s2(const PoolGeom& g) {
  return g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
}

#if defined(__x86_64__) || defined(__i386__)
// GCC 12 flags the undefined pass-through operand inside the AVX-512 intrinsics.
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// The rule's comparison on 16 lanes; idx holds the tap's in-plane indices.
__attribute__((target("avx512f"))) inline void maxpool_take_avx512(__m512& best, __m512i& bi,
                                                                   __m512 v, __m512i idx) {
  const __mmask16 ord = _mm512_cmp_ps_mask(best, best, _CMP_ORD_Q);
  const __mmask16 take = _mm512_mask_cmp_ps_mask(ord, v, best, _CMP_NLE_UQ);
  best = _mm512_mask_mov_ps(best, take, v);
  bi = _mm512_mask_mov_epi32(bi, take, idx);
}

// Up to 16 outputs (lanes set in mout), stored contiguously at y and ix. Their top taps are the
// elements `even` and `odd` pick from the 32 of lo[0..15] (mask mlo) and hi[0..15] (mask mhi), the
// bottom taps the same w elements further on; idx holds each lane's top-left in-plane index.
// Masked loads never touch elements past the last window.
__attribute__((target("avx512f"))) inline void maxpool2x2_vector_avx512(
    const float* lo, __mmask16 mlo, const float* hi, __mmask16 mhi, int64_t w, __m512i even,
    __m512i odd, __m512i idx, __mmask16 mout, float* y, int64_t* ix) {
  const __m512 tl = _mm512_maskz_loadu_ps(mlo, lo), th = _mm512_maskz_loadu_ps(mhi, hi);
  const __m512 bl = _mm512_maskz_loadu_ps(mlo, lo + w), bh = _mm512_maskz_loadu_ps(mhi, hi + w);
  const __m512i right = _mm512_set1_epi32(1), down = _mm512_set1_epi32(static_cast<int32_t>(w));
  __m512 best = _mm512_permutex2var_ps(tl, even, th);
  __m512i bi = idx;
  maxpool_take_avx512(best, bi, _mm512_permutex2var_ps(tl, odd, th), _mm512_add_epi32(idx, right));
  const __m512i below = _mm512_add_epi32(idx, down);
  maxpool_take_avx512(best, bi, _mm512_permutex2var_ps(bl, even, bh), below);
  maxpool_take_avx512(best, bi, _mm512_permutex2var_ps(bl, odd, bh),
                      _mm512_add_epi32(below, right));
  const __m512i ilo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(bi));
  const __m512i ihi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(bi, 1));
  if (mout == 0xffff) {
    _mm512_storeu_ps(y, best);
    _mm512_storeu_si512(ix, ilo);
    _mm512_storeu_si512(ix + 8, ihi);
    return;
  }
  _mm512_mask_storeu_ps(y, mout, best);
  _mm512_mask_storeu_epi64(ix, static_cast<__mmask8>(mout), ilo);
  _mm512_mask_storeu_epi64(ix + 8, static_cast<__mmask8>(mout >> 8), ihi);
}

// Rows of up to 8 outputs go two to a vector (lanes [0, ow) row i, [ow, 2 ow) row i + 1: contiguous
// in y), so a plane of 5x5 outputs takes 3 vectors instead of 10 half-empty ones; longer rows take
// 16 outputs a vector, the last one masked.
__attribute__((target("avx512f"))) inline void maxpool2x2_planes_avx512(PoolGeom g, const float* x,
                                                                        float* y, int64_t* ix,
                                                                        int64_t p0, int64_t p1) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i twice = _mm512_add_epi32(lane, lane);
  const __m512i one = _mm512_set1_epi32(1);
  const int64_t w = g.w, ow = g.ow;
  if (ow <= 8) {
    const int32_t ow32 = static_cast<int32_t>(ow);
    const __mmask16 first = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(ow32));
    const __m512i second = _mm512_sub_epi32(twice, _mm512_set1_epi32(2 * ow32));  // 2 (l - ow)
    const __m512i even =
        _mm512_mask_blend_epi32(first, _mm512_add_epi32(second, _mm512_set1_epi32(16)), twice);
    const __m512i odd = _mm512_add_epi32(even, one);
    const __m512i col = _mm512_mask_blend_epi32(
        first, _mm512_add_epi32(second, _mm512_set1_epi32(static_cast<int32_t>(2 * w))), twice);
    // 2 ow bits: the elements an input row's windows cover, and the outputs of two rows.
    const auto row = static_cast<__mmask16>((1u << (2 * ow)) - 1);
    const auto one_row = static_cast<__mmask16>((1u << ow) - 1);
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float* xp = x + pl * g.h * w;
      float* yp = y + pl * g.oh * ow;
      int64_t* ip = ix + pl * g.oh * ow;
      const int64_t room = (p1 - pl) * g.oh * ow;  // outputs from yp to the end of the range
      for (int64_t i = 0; i < g.oh; i += 2) {
        const float* top = xp + 2 * i * w;
        const bool two = i + 1 < g.oh;
        const __m512i idx =
            _mm512_add_epi32(col, _mm512_set1_epi32(static_cast<int32_t>(2 * i * w)));
        const __mmask16 out = two ? row : one_row;
        maxpool2x2_vector_avx512(top, row, two ? top + 2 * w : top, two ? row : 0, w, even, odd,
                                 idx, i * ow + 16 <= room ? __mmask16(0xffff) : out, yp + i * ow,
                                 ip + i * ow);
      }
    }
    return;
  }
  const __m512i odd = _mm512_add_epi32(twice, one);
  for (int64_t pl = p0; pl < p1; ++pl) {
    const float* xp = x + pl * g.h * w;
    float* yp = y + pl * g.oh * ow;
    int64_t* ip = ix + pl * g.oh * ow;
    const int64_t room = (p1 - pl) * g.oh * ow;  // outputs from yp to the end of the range
    for (int64_t i = 0; i < g.oh; ++i)
      for (int64_t j = 0; j < ow; j += 16) {
        const int64_t n = std::min<int64_t>(16, ow - j);
        const auto mlo = static_cast<__mmask16>(n >= 8 ? 0xffffu : (1u << (2 * n)) - 1);
        const auto mhi = static_cast<__mmask16>(n > 8 ? (1u << (2 * n - 16)) - 1 : 0u);
        const float* top = xp + 2 * i * w + 2 * j;
        const __m512i idx =
            _mm512_add_epi32(twice, _mm512_set1_epi32(static_cast<int32_t>(2 * i * w + 2 * j)));
        maxpool2x2_vector_avx512(
            top, mlo, n > 8 ? top + 16 : top, mhi, w, twice, odd, idx,
            i * ow + j + 16 <= room ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1),
            yp + i * ow + j, ip + i * ow + j);
      }
  }
}

// The rule's comparison on 8 lanes.
__attribute__((target("avx2,fma"))) inline void maxpool_take_avx2(__m256& best, __m256i& bi,
                                                                  __m256 v, __m256i idx) {
  // keep == !take: best stays when v <= best or best is NaN.
  const __m256 keep =
      _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_LE_OQ), _mm256_cmp_ps(best, best, _CMP_UNORD_Q));
  best = _mm256_blendv_ps(v, best, keep);
  bi = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(idx), _mm256_castsi256_ps(bi), keep));
}

// 8 outputs of one row from top[0..15] and the 16 elements w further on (Masked: the first n
// outputs, loads and stores masked to them). shuffle_ps deinterleaves within 128-bit halves, so
// the lanes hold outputs 0 1 4 5 2 3 6 7 (idx too) until one permute of the results at the end.
template <bool Masked>
__attribute__((target("avx2,fma"))) inline void maxpool2x2_vector_avx2(const float* top, int64_t w,
                                                                       int64_t n, __m256i idx,
                                                                       float* y, int64_t* ix) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 tl, th, bl, bh;
  if constexpr (Masked) {
    const __m256i mlo = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(2 * n)), lane);
    const __m256i mhi =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(2 * n - 8)), lane);
    tl = _mm256_maskload_ps(top, mlo);
    th = _mm256_maskload_ps(top + 8, mhi);
    bl = _mm256_maskload_ps(top + w, mlo);
    bh = _mm256_maskload_ps(top + w + 8, mhi);
  } else {
    tl = _mm256_loadu_ps(top);
    th = _mm256_loadu_ps(top + 8);
    bl = _mm256_loadu_ps(top + w);
    bh = _mm256_loadu_ps(top + w + 8);
  }
  const __m256i right = _mm256_set1_epi32(1), down = _mm256_set1_epi32(static_cast<int32_t>(w));
  __m256 best = _mm256_shuffle_ps(tl, th, _MM_SHUFFLE(2, 0, 2, 0));
  __m256i bi = idx;
  maxpool_take_avx2(best, bi, _mm256_shuffle_ps(tl, th, _MM_SHUFFLE(3, 1, 3, 1)),
                    _mm256_add_epi32(idx, right));
  const __m256i below = _mm256_add_epi32(idx, down);
  maxpool_take_avx2(best, bi, _mm256_shuffle_ps(bl, bh, _MM_SHUFFLE(2, 0, 2, 0)), below);
  maxpool_take_avx2(best, bi, _mm256_shuffle_ps(bl, bh, _MM_SHUFFLE(3, 1, 3, 1)),
                    _mm256_add_epi32(below, right));
  best = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(best), _MM_SHUFFLE(3, 1, 2, 0)));
  bi = _mm256_permute4x64_epi64(bi, _MM_SHUFFLE(3, 1, 2, 0));
  const __m256i ilo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(bi));
  const __m256i ihi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(bi, 1));
  auto* il = reinterpret_cast<long long*>(ix);
  if constexpr (Masked) {
    const __m256i mout = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)), lane);
    _mm256_maskstore_ps(y, mout, best);
    _mm256_maskstore_epi64(il, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(mout)), ilo);
    _mm256_maskstore_epi64(il + 4, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(mout, 1)), ihi);
  } else {
    _mm256_storeu_ps(y, best);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(il), ilo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(il + 4), ihi);
  }
}

// Rows of 8 outputs or more: 8-wide vectors, the last one ending at ow (overlapping the one before
// it: those outputs are computed twice, the same way); shorter rows: one masked vector.
__attribute__((target("avx2,fma"))) inline void maxpool2x2_planes_avx2(PoolGeom g, const float* x,
                                                                       float* y, int64_t* ix,
                                                                       int64_t p0, int64_t p1) {
  const __m256i col = _mm256_setr_epi32(0, 2, 8, 10, 4, 6, 12, 14);  // 2j in the lane order above
  const int64_t w = g.w, ow = g.ow;
  for (int64_t pl = p0; pl < p1; ++pl) {
    const float* xp = x + pl * g.h * w;
    float* yp = y + pl * g.oh * ow;
    int64_t* ip = ix + pl * g.oh * ow;
    for (int64_t i = 0; i < g.oh; ++i) {
      const __m256i row = _mm256_add_epi32(col, _mm256_set1_epi32(static_cast<int32_t>(2 * i * w)));
      const float* top = xp + 2 * i * w;
      float* yr = yp + i * ow;
      int64_t* ir = ip + i * ow;
      if (ow < 8) {
        maxpool2x2_vector_avx2<true>(top, w, ow, row, yr, ir);
        continue;
      }
      for (int64_t j0 = 0; j0 < ow; j0 += 8) {
        const int64_t j = std::min(j0, ow - 8);
        const __m256i idx = _mm256_add_epi32(row, _mm256_set1_epi32(static_cast<int32_t>(2 * j)));
        maxpool2x2_vector_avx2<false>(top + 2 * j, w, 8, idx, yr + j, ir + j);
      }
    }
  }
}
#pragma GCC diagnostic pop
#endif

inline MaxPoolPlanesFn maxpool_planes_for(const PoolGeom& g, Isa isa) {
  // The vector paths keep indices in int32 lanes: every window start must fit.
  const int64_t rows = std::max(g.h, (g.oh - 1) * g.sh + 1);
  if (rows * g.w > std::numeric_limits<int32_t>::max()) return maxpool_planes_scalar;
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::avx512)
    return maxpool_is_2x2s2(g) ? maxpool2x2_planes_avx512 : maxpool_planes_avx512;
  if (isa == Isa::avx2 && maxpool_is_2x2s2(g)) return maxpool2x2_planes_avx2;
  if (isa == Isa::avx2) return maxpool_planes_avx2;
#else
  (void)isa;
#endif
  return maxpool_planes_generic;
}

inline void k_maxpool(const ir::Attrs& a, const ConstBuffer& in,
                      const std::vector<MutableBuffer>& out) {
  IPUML_CHECK(
      out.size() == 2 && in.meta.dtype == DType::Float32 && out[1].meta.dtype == DType::Int64,
      "max_pool2d: expected a float32 input and (float32, int64) outputs");
  const auto g = pool_geom("max_pool2d", a, in.meta.shape, out[0].meta.shape);
  const float* x = in_ptr<float>(in);
  float* y = out_ptr<float>(out[0]);
  int64_t* ix = out_ptr<int64_t>(out[1]);
  const MaxPoolPlanesFn fn = maxpool_planes_for(g, active_isa());
  parallel_items(g.planes, g.oh * g.ow * g.kh * g.kw,
                 [=](int64_t p0, int64_t p1) { fn(g, x, y, ix, p0, p1); });
}

// ---- max pooling backward ----
// dx is dy scatter-added at the indices, plane by plane. When every index of a plane lies in its
// own 2x2 block (rows 2i, 2i + 1, columns 2j, 2j + 1 of output (i, j), as 2x2 windows at stride 2
// give), each element of dx gets at most one term: dx is written once, row by row, from dy and
// the index, instead of being filled and then added to. An element's value is still 0 + dy (the
// add turns -0 into +0 as the scatter does) or 0, so the bits are the scatter's. Whether the
// indices fit is checked while writing: a plane where one does not is redone the general way.
using MaxPoolBlocksFn = bool (*)(const float* gp, const int64_t* ip, float* d, int64_t h, int64_t w,
                                 int64_t oh, int64_t ow);

#if defined(__x86_64__) || defined(__i386__)
// GCC 12 flags the undefined pass-through operand inside the AVX-512 intrinsics.
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// 8 outputs a step, i.e. 16 columns of dx rows 2i and 2i + 1; column chunks outside, rows inside,
// so that the chunk's masks are set up once. The offsets of the indices from their blocks are
// narrowed to int32 with saturation (one far out of range stays outside {0, 1, w, w + 1}) and
// spread to the two columns of each output. The patterns compared against are distinct, so an
// output whose index is in its block sets exactly one bit of kt | kb and any other none: counting
// the bits checks the whole plane with no branch in the loop.
__attribute__((target("avx512f"))) inline bool maxpool2x2_backward_avx512(
    const float* gp, const int64_t* ip, float* d, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  const __m512i spread = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i top = _mm512_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1);
  const __m512i bottom = _mm512_add_epi32(top, _mm512_set1_epi32(static_cast<int32_t>(w)));
  const __m512i block = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  const __m512i down2 = _mm512_set1_epi64(2 * w), one = _mm512_set1_epi32(1);
  const __m512 zero = _mm512_setzero_ps();
  __m512i hits = _mm512_setzero_si512();
  // Chunks from the last: a chunk that ends past the row is stored whole, its extra lanes (zeros)
  // landing on the first columns of the next row, which the first chunk stores later, unless
  // they would leave the plane. (Partial masked stores to lines not in cache cost Zen 5 a read
  // of each line: [64, 32, 26, 26] took twice as long with them.)
  const float* end = d + h * w;
  for (int64_t c = (w - 1) / 16 * 16; c >= 0; c -= 16) {
    const int64_t j = c / 2, n = std::clamp<int64_t>(ow - j, 0, 8);
    const auto outs = static_cast<__mmask8>((1u << n) - 1);
    const auto cols = static_cast<__mmask16>((1u << (2 * n)) - 1);
    const auto row = static_cast<__mmask16>(w - c >= 16 ? 0xffffu : (1u << (w - c)) - 1);
    __m512i at = _mm512_add_epi64(block, _mm512_set1_epi64(2 * j));  // blocks' top left, row i
    for (int64_t i = 0; i < oh; ++i, at = _mm512_add_epi64(at, down2)) {
      const __m512i off = _mm512_sub_epi64(_mm512_maskz_loadu_epi64(outs, ip + i * ow + j), at);
      const __m512i off2 =
          _mm512_permutexvar_epi32(spread, _mm512_castsi256_si512(_mm512_cvtsepi64_epi32(off)));
      const __mmask16 kt = _mm512_mask_cmpeq_epi32_mask(cols, off2, top);
      const __mmask16 kb = _mm512_mask_cmpeq_epi32_mask(cols, off2, bottom);
      hits = _mm512_mask_add_epi32(hits, kt | kb, hits, one);
      const __m512 g = _mm512_permutexvar_ps(spread, _mm512_maskz_loadu_ps(outs, gp + i * ow + j));
      float* dt = d + 2 * i * w + c;
      _mm512_storeu_ps(dt, _mm512_add_ps(zero, _mm512_maskz_mov_ps(kt, g)));  // w >= 16
      const __m512 vb = _mm512_add_ps(zero, _mm512_maskz_mov_ps(kb, g));
      if (dt + w + 16 <= end)
        _mm512_storeu_ps(dt + w, vb);
      else
        _mm512_mask_storeu_ps(dt + w, row, vb);
    }
  }
  std::fill(d + 2 * oh * w, d + h * w, 0.0f);
  alignas(64) int32_t count[16];
  _mm512_store_si512(count, hits);
  int64_t total = 0;
  for (int32_t k : count) total += k;
  return total == oh * ow;
}

// 4 outputs a step, 8 columns of dx rows 2i and 2i + 1, in the same order, from int64 compares: an
// output's lane covers both its columns, and blend_epi32 keeps the even one's from the first
// compare and the odd one's from the second. AVX2's masked stores are slow, so the last chunk of
// a row overlaps the one before it instead (rewriting the same values; needs ow >= 4), and the
// columns past the blocks are zeroed apart. Every output in its block sets one compare's lane:
// the AND of those over the plane checks it with no branch in the loop.
__attribute__((target("avx2,fma"))) inline bool maxpool2x2_backward_avx2(
    const float* gp, const int64_t* ip, float* d, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  const __m256i spread = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256i block = _mm256_setr_epi64x(0, 2, 4, 6);
  const __m256i one = _mm256_set1_epi64x(1), down = _mm256_set1_epi64x(w);
  const __m256i down1 = _mm256_set1_epi64x(w + 1), down2 = _mm256_set1_epi64x(2 * w);
  const __m256 zero = _mm256_setzero_ps();
  __m256i in_block = _mm256_set1_epi64x(-1);
  for (int64_t c0 = 0; c0 < 2 * ow; c0 += 8) {
    const int64_t c = std::min(c0, 2 * ow - 8), j = c / 2;
    __m256i at = _mm256_add_epi64(block, _mm256_set1_epi64x(2 * j));  // blocks' top left, row i
    for (int64_t i = 0; i < oh; ++i, at = _mm256_add_epi64(at, down2)) {
      const __m256i off = _mm256_sub_epi64(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ip + i * ow + j)), at);
      const __m256i e0 = _mm256_cmpeq_epi64(off, _mm256_setzero_si256());
      const __m256i e1 = _mm256_cmpeq_epi64(off, one);
      const __m256i ew = _mm256_cmpeq_epi64(off, down);
      const __m256i ew1 = _mm256_cmpeq_epi64(off, down1);
      in_block = _mm256_and_si256(
          in_block, _mm256_or_si256(_mm256_or_si256(e0, e1), _mm256_or_si256(ew, ew1)));
      const __m256 g =
          _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(gp + i * ow + j)), spread);
      const __m256 kt = _mm256_castsi256_ps(_mm256_blend_epi32(e0, e1, 0xaa));
      const __m256 kb = _mm256_castsi256_ps(_mm256_blend_epi32(ew, ew1, 0xaa));
      float* dt = d + 2 * i * w + c;
      _mm256_storeu_ps(dt, _mm256_add_ps(zero, _mm256_and_ps(kt, g)));
      _mm256_storeu_ps(dt + w, _mm256_add_ps(zero, _mm256_and_ps(kb, g)));
    }
  }
  for (int64_t r = 0; r < 2 * oh; ++r) std::fill(d + r * w + 2 * ow, d + (r + 1) * w, 0.0f);
  std::fill(d + 2 * oh * w, d + h * w, 0.0f);
  return _mm256_movemask_pd(_mm256_castsi256_pd(in_block)) == 0xf;
}
#pragma GCC diagnostic pop
#endif

inline MaxPoolBlocksFn maxpool_blocks_for(int64_t h, int64_t w, int64_t oh, int64_t ow, Isa isa) {
  // The blocks must fit in the plane. With h * w in int32 (and h >= 2 once there is an output
  // row), w + 1 stays below the saturated int32 offsets of the AVX-512 path. Rows of fewer than 8
  // outputs keep fill and scatter: for [64, 64, 11, 11] (rows of 5) on the 2-core AVX-512 Xeon it
  // took 0.13 ms, writing once 0.13-0.14 ms (AVX-512) and 0.24 ms (AVX2), for reasons not found.
  if (2 * oh > h || 2 * ow > w || ow < 8 || h * w >= std::numeric_limits<int32_t>::max())
    return nullptr;
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::avx512) return maxpool2x2_backward_avx512;
  if (isa == Isa::avx2) return maxpool2x2_backward_avx2;
#else
  (void)isa;
#endif
  return nullptr;
}

inline void k_maxpool_backward(const ir::Attrs&, const ConstBuffer& dy, const ConstBuffer& idx,
                               const MutableBuffer& o) {
  const char* op = "max_pool2d_backward";
  IPUML_CHECK(dy.meta.dtype == DType::Float32 && idx.meta.dtype == DType::Int64 &&
                  dy.meta.shape == idx.meta.shape,
              op, ": expected float32 gradient and int64 indices of the same shape, got ",
              shape_str(dy.meta.shape), " and ", shape_str(idx.meta.shape));
  const Shape& xs = o.meta.shape;
  const Shape& ys = dy.meta.shape;
  IPUML_CHECK(xs.size() == 4 && ys.size() == 4 && xs[0] == ys[0] && xs[1] == ys[1], op,
              ": gradient shape ", shape_str(ys), " does not match input shape ", shape_str(xs));
  const int64_t planes = xs[0] * xs[1], hw = xs[2] * xs[3], ohw = ys[2] * ys[3];
  const float* g = in_ptr<float>(dy);
  const int64_t* ix = in_ptr<int64_t>(idx);
  float* dx = out_ptr<float>(o);
  const MaxPoolBlocksFn blocks = maxpool_blocks_for(xs[2], xs[3], ys[2], ys[3], active_isa());
  // Each plane's indices are checked (one branch-free pass over data the scatter then reads from
  // cache) before the general path writes that plane: a bad index never writes out of bounds (the
  // block path writes only inside the plane, whatever the indices). The error is raised after the
  // loop, naming the first bad index, whatever the thread count.
  std::atomic<bool> bad{false};
  parallel_items(planes, hw + ohw, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float* gp = g + pl * ohw;
      const int64_t* ip = ix + pl * ohw;
      float* d = dx + pl * hw;
      if (blocks && blocks(gp, ip, d, xs[2], xs[3], ys[2], ys[3])) continue;
      bool out_of_range = false;
      for (int64_t j = 0; j < ohw; ++j)
        out_of_range |= static_cast<uint64_t>(ip[j]) >= static_cast<uint64_t>(hw);
      if (out_of_range) {
        bad.store(true, std::memory_order_relaxed);
        continue;
      }
      std::fill(d, d + hw, 0.0f);
      for (int64_t j = 0; j < ohw; ++j) d[ip[j]] += gp[j];
    }
  });
  if (bad.load())
    for (int64_t i = 0; i < planes * ohw; ++i)
      IPUML_CHECK(ix[i] >= 0 && ix[i] < hw, op, ": index ", ix[i],
                  " is out of range for a plane of ", hw, " elements");
}

// PyTorch's avg_pool2d window and divisor for output (i, j).
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  float inv;
};
inline AvgWindow avg_window(const PoolGeom& g, bool include_pad, int64_t i, int64_t j) {
  int64_t h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
  int64_t h1 = std::min(h0 + g.kh, g.h + g.ph), w1 = std::min(w0 + g.kw, g.w + g.pw);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, g.h);
  w1 = std::min(w1, g.w);
  const int64_t div = include_pad ? padded : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, div > 0 ? 1.0f / static_cast<float>(div) : 0.0f};
}

inline void k_avgpool(const ir::Attrs& a, const ConstBuffer& in, const MutableBuffer& o) {
  IPUML_CHECK(in.meta.dtype == DType::Float32, "avg_pool2d: expected float32 input");
  const auto g = pool_geom("avg_pool2d", a, in.meta.shape, o.meta.shape);
  const float* x = in_ptr<float>(in);
  float* y = out_ptr<float>(o);
  parallel_items(g.planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float* xp = x + pl * g.h * g.w;
      float* yp = y + pl * g.oh * g.ow;
      for (int64_t i = 0; i < g.oh; ++i)
        for (int64_t j = 0; j < g.ow; ++j) {
          const auto wdw = avg_window(g, a.flag, i, j);
          float s = 0.0f;
          for (int64_t r = wdw.h0; r < wdw.h1; ++r)
            for (int64_t c = wdw.w0; c < wdw.w1; ++c) s += xp[r * g.w + c];
          yp[i * g.ow + j] = s * wdw.inv;
        }
    }
  });
}

inline void k_avgpool_backward(const ir::Attrs& a, const ConstBuffer& dy, const MutableBuffer& o) {
  IPUML_CHECK(dy.meta.dtype == DType::Float32, "avg_pool2d_backward: expected float32 gradient");
  const auto g = pool_geom("avg_pool2d_backward", a, o.meta.shape, dy.meta.shape);
  const float* gy = in_ptr<float>(dy);
  float* dx = out_ptr<float>(o);
  parallel_items(g.planes, g.oh * g.ow * g.kh * g.kw, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      float* d = dx + pl * g.h * g.w;
      std::fill(d, d + g.h * g.w, 0.0f);
      const float* gp = gy + pl * g.oh * g.ow;
      for (int64_t i = 0; i < g.oh; ++i)
        for (int64_t j = 0; j < g.ow; ++j) {
          const auto wdw = avg_window(g, a.flag, i, j);
          const float v = gp[i * g.ow + j] * wdw.inv;
          for (int64_t r = wdw.h0; r < wdw.h1; ++r)
            for (int64_t c = wdw.w0; c < wdw.w1; ++c) d[r * g.w + c] += v;
        }
    }
  });
}

inline int64_t adaptive_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
inline int64_t adaptive_end(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// Adaptive average pooling forward (backward = false: x -> y) or backward (dy -> dx).
inline void k_adaptive(bool backward, const ConstBuffer& in, const MutableBuffer& o) {
  const char* op = backward ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool2d";
  const Shape& xs = backward ? o.meta.shape : in.meta.shape;
  const Shape& ys = backward ? in.meta.shape : o.meta.shape;
  IPUML_CHECK(in.meta.dtype == DType::Float32, op, ": expected float32");
  IPUML_CHECK(xs.size() == 4 && ys.size() == 4 && xs[0] == ys[0] && xs[1] == ys[1] && ys[2] > 0 &&
                  ys[3] > 0,
              op, ": shapes ", shape_str(xs), " and ", shape_str(ys),
              " are not matching NCHW shapes");
  const int64_t planes = xs[0] * xs[1], H = xs[2], W = xs[3], OH = ys[2], OW = ys[3];
  const float* src = in_ptr<float>(in);
  float* dst = out_ptr<float>(o);
  parallel_items(planes, H * W + OH * OW, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      if (backward) std::fill(dst + pl * H * W, dst + (pl + 1) * H * W, 0.0f);
      for (int64_t i = 0; i < OH; ++i) {
        const int64_t h0 = adaptive_start(i, H, OH), h1 = adaptive_end(i, H, OH);
        for (int64_t j = 0; j < OW; ++j) {
          const int64_t w0 = adaptive_start(j, W, OW), w1 = adaptive_end(j, W, OW);
          const int64_t cnt = (h1 - h0) * (w1 - w0);
          if (!backward) {
            const float* xp = src + pl * H * W;
            float s = 0.0f;
            for (int64_t r = h0; r < h1; ++r)
              for (int64_t c = w0; c < w1; ++c) s += xp[r * W + c];
            dst[pl * OH * OW + i * OW + j] = cnt > 0 ? s / static_cast<float>(cnt) : 0.0f;
          } else {
            float* d = dst + pl * H * W;
            const float v =
                cnt > 0 ? src[pl * OH * OW + i * OW + j] / static_cast<float>(cnt) : 0.0f;
            for (int64_t r = h0; r < h1; ++r)
              for (int64_t c = w0; c < w1; ++c) d[r * W + c] += v;
          }
        }
      }
    }
  });
}

}  // namespace ipuml::cpu::kdetail
