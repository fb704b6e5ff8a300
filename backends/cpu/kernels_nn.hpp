// CPU kernels of the linear-algebra and nn ops: matmul and convolution dispatch onto gemm.hpp /
// conv.hpp, and the 2-d pooling family (max with indices, average, adaptive) with gradients.
#pragma once

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/kernels_common.hpp>

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

inline void k_conv(const ir::Attrs& a, const std::vector<ConstBuffer>& in, const MutableBuffer& o) {
  IPUML_CHECK(in.size() == 2 || in.size() == 3, "conv: expected 2 or 3 inputs, got ", in.size());
  const auto p = conv_params("conv", a, in[0].meta.shape, in[1].meta.shape);
  expect_f32("conv", in[0].meta, in[0].meta.shape, "input");
  expect_f32("conv", in[1].meta, in[1].meta.shape, "weight");
  if (in.size() == 3) expect_f32("conv", in[2].meta, Shape{p.c_out}, "bias");
  expect_f32("conv", o.meta, Shape{p.n, p.c_out, p.out_h(), p.out_w()}, "output");
  conv2d_forward(p, in_ptr<float>(in[0]), in_ptr<float>(in[1]),
                 in.size() == 3 ? in_ptr<float>(in[2]) : nullptr, out_ptr<float>(o));
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

inline void k_maxpool(const ir::Attrs& a, const ConstBuffer& in,
                      const std::vector<MutableBuffer>& out) {
  IPUML_CHECK(
      out.size() == 2 && in.meta.dtype == DType::Float32 && out[1].meta.dtype == DType::Int64,
      "max_pool2d: expected a float32 input and (float32, int64) outputs");
  const auto g = pool_geom("max_pool2d", a, in.meta.shape, out[0].meta.shape);
  const float* x = in_ptr<float>(in);
  float* y = out_ptr<float>(out[0]);
  int64_t* ix = out_ptr<int64_t>(out[1]);
  parallel_items(g.planes, g.oh * g.ow * g.kh * g.kw, [&, g](int64_t p0, int64_t p1) {
    // g is copied into the lambda: the int64 index stores could alias a captured reference and
    // force every geometry field to be reloaded in the inner loop.
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float* xp = x + pl * g.h * g.w;
      float* yp = y + pl * g.oh * g.ow;
      int64_t* ip = ix + pl * g.oh * g.ow;
      for (int64_t i = 0; i < g.oh; ++i) {
        const int64_t h0 = std::max<int64_t>(0, i * g.sh - g.ph);
        const int64_t h1 = std::min(g.h, i * g.sh - g.ph + g.kh);
        for (int64_t j = 0; j < g.ow; ++j) {
          const int64_t w0 = std::max<int64_t>(0, j * g.sw - g.pw);
          const int64_t w1 = std::min(g.w, j * g.sw - g.pw + g.kw);
          float best = -std::numeric_limits<float>::infinity();
          int64_t bi = h0 * g.w + w0;
          for (int64_t r = h0; r < h1; ++r)
            for (int64_t c = w0; c < w1; ++c) {
              const float v = xp[r * g.w + c];
              // NaN wins and sticks (later values never beat a NaN), first max wins ties:
              // take v when it is greater or NaN, unless best is already NaN. Two comparisons
              // and selects, no branch: on real data the comparison is a coin toss, and the
              // three-comparison form was compiled into byte spills that stalled the loop.
              const bool take = !(v <= best) & (best == best);
              best = take ? v : best;
              bi = take ? r * g.w + c : bi;
            }
          yp[i * g.ow + j] = best;
          ip[i * g.ow + j] = bi;
        }
      }
    }
  });
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
  for (int64_t i = 0; i < planes * ohw; ++i)
    IPUML_CHECK(ix[i] >= 0 && ix[i] < hw, op, ": index ", ix[i], " is out of range for a plane of ",
                hw, " elements");
  float* dx = out_ptr<float>(o);
  parallel_items(planes, hw + ohw, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      float* d = dx + pl * hw;
      std::fill(d, d + hw, 0.0f);
      const float* gp = g + pl * ohw;
      const int64_t* ip = ix + pl * ohw;
      for (int64_t j = 0; j < ohw; ++j) d[ip[j]] += gp[j];
    }
  });
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
