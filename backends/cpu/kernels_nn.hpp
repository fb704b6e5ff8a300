// CPU kernels of the linear-algebra and nn ops: matmul and convolution dispatch onto gemm.hpp /
// conv.hpp, and the 2-d pooling family (max with indices, average, adaptive) with gradients.
#pragma once

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/kernels_common.hpp>

#include <atomic>
#include <utility>

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

inline MaxPoolPlanesFn maxpool_planes_for(const PoolGeom& g, Isa isa) {
  // The vector paths keep indices in int32 lanes: every window start must fit.
  const int64_t rows = std::max(g.h, (g.oh - 1) * g.sh + 1);
  if (rows * g.w > std::numeric_limits<int32_t>::max()) return maxpool_planes_scalar;
#if defined(__x86_64__) || defined(__i386__)
  if (isa == Isa::avx512) return maxpool_planes_avx512;
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
  // Each plane's indices are checked (one branch-free pass over data the scatter then reads from
  // cache) before that plane is written: a bad index never writes out of bounds. The error is
  // raised after the loop, naming the first bad index, whatever the thread count.
  std::atomic<bool> bad{false};
  parallel_items(planes, hw + ohw, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float* gp = g + pl * ohw;
      const int64_t* ip = ix + pl * ohw;
      bool out_of_range = false;
      for (int64_t j = 0; j < ohw; ++j)
        out_of_range |= static_cast<uint64_t>(ip[j]) >= static_cast<uint64_t>(hw);
      if (out_of_range) {
        bad.store(true, std::memory_order_relaxed);
        continue;
      }
      float* d = dx + pl * hw;
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
