// Fused batch-norm kernels over [N, C, ...] float32: statistics, normalised output, optional
// residual add and ReLU in one task per channel (the channel's planes stay in L2 between the
// passes, so x comes from memory once), and the backward's two per-channel sums and dx likewise.
// Sums run in an order fixed by the shape (pairwise within a plane, planes in order in double),
// never by the thread count.
#pragma once

#include <ipuml/backends/cpu/channel_affine.hpp>
#include <ipuml/backends/cpu/kernels_common.hpp>

namespace ipuml::cpu::kdetail {

// Planes of one channel: x[(n * C + c) * S + j] for n < N, j < S.
struct BnGeometry {
  int64_t n = 0, c = 0, s = 1;
  int64_t count() const { return n * s; }
};

inline BnGeometry bn_geometry(const Shape& x) {
  BnGeometry g;
  g.n = x[0];
  g.c = x[1];
  for (size_t i = 2; i < x.size(); ++i) g.s *= x[i];
  return g;
}

// Pairwise sum of f(i) for i < n, with pairwise_sum's tree and leaves (vectorisable, no
// reassociation), so it depends only on n.
template <typename F>
inline float pairwise_sum_of(int64_t n, const F& f, int64_t off = 0) {
  if (n < 8) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += f(off + i);
    return s;
  }
  if (n <= 256) {
    float r[8];
    for (int j = 0; j < 8; ++j) r[j] = f(off + j);
    int64_t i = 8;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += f(off + i + j);
    float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += f(off + i);
    return s;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return pairwise_sum_of(half, f, off) + pairwise_sum_of(n - half, f, off + half);
}

// in: x, [weight, bias], [residual]; out: y, mean, var (biased).
inline void k_batch_norm(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                         const std::vector<MutableBuffer>& out) {
  const auto g = bn_geometry(in[0].meta.shape);
  const float* x = in_ptr<float>(in[0]);
  const float* w = a.flag2 ? in_ptr<float>(in[1]) : nullptr;
  const float* b = a.flag2 ? in_ptr<float>(in[2]) : nullptr;
  const float* r = a.flag ? in_ptr<float>(in[a.flag2 ? 3 : 1]) : nullptr;
  float* y = out_ptr<float>(out[0]);
  float* mean = out_ptr<float>(out[1]);
  float* var = out_ptr<float>(out[2]);
  const float eps = static_cast<float>(a.scalar);
  const bool relu = a.mode == 1;
  const int64_t S = g.s, C = g.c;
  const double inv_m = 1.0 / static_cast<double>(std::max<int64_t>(g.count(), 1));
  parallel_items(C, g.count() * 4, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double sum = 0;
      for (int64_t n = 0; n < g.n; ++n) sum += pairwise_sum(x + (n * C + c) * S, S);
      const float mu = static_cast<float>(sum * inv_m);
      double sq = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        const float* xp = x + (n * C + c) * S;
        sq += pairwise_sum_of(S, [xp, mu](int64_t j) {
          const float d = xp[j] - mu;
          return d * d;
        });
      }
      const float v = static_cast<float>(sq * inv_m);
      mean[c] = mu;
      var[c] = v;
      float scale, shift;
      batch_norm_affine(mu, v, w, b, c, eps, scale, shift);
      for (int64_t n = 0; n < g.n; ++n) {
        const int64_t o = (n * C + c) * S;
        affine_act(x + o, r ? r + o : nullptr, y + o, S, scale, shift, relu);
      }
    }
  });
}

// in: x, mean [C], var [C], [weight, bias], [residual]; out: y.
inline void k_batch_norm_inference(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                                   const MutableBuffer& o) {
  const auto g = bn_geometry(in[0].meta.shape);
  const float* x = in_ptr<float>(in[0]);
  const float* mean = in_ptr<float>(in[1]);
  const float* var = in_ptr<float>(in[2]);
  const float* w = a.flag2 ? in_ptr<float>(in[3]) : nullptr;
  const float* b = a.flag2 ? in_ptr<float>(in[4]) : nullptr;
  const float* r = a.flag ? in_ptr<float>(in[a.flag2 ? 5 : 3]) : nullptr;
  float* y = out_ptr<float>(o);
  const float eps = static_cast<float>(a.scalar);
  const int64_t S = g.s, C = g.c;
  parallel_items(g.n * C, S * 2, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % C;
      float scale, shift;
      batch_norm_affine(mean[c], var[c], w, b, c, eps, scale, shift);
      affine_act(x + p * S, r ? r + p * S : nullptr, y + p * S, S, scale, shift, a.mode == 1);
    }
  });
}

// in: dy, x, mean, var, [weight], [y when mode 1]; out: dx, dweight, dbias.
inline void k_batch_norm_backward(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                                  const std::vector<MutableBuffer>& out) {
  const auto g = bn_geometry(in[1].meta.shape);
  const float* dy = in_ptr<float>(in[0]);
  const float* x = in_ptr<float>(in[1]);
  const float* mean = in_ptr<float>(in[2]);
  const float* var = in_ptr<float>(in[3]);
  const float* w = a.flag2 ? in_ptr<float>(in[4]) : nullptr;
  const float* yv = a.mode == 1 ? in_ptr<float>(in[a.flag2 ? 5 : 4]) : nullptr;
  float* dx = out_ptr<float>(out[0]);
  float* dw = out_ptr<float>(out[1]);
  float* db = out_ptr<float>(out[2]);
  const float eps = static_cast<float>(a.scalar);
  const int64_t S = g.s, C = g.c;
  const double inv_m = 1.0 / static_cast<double>(std::max<int64_t>(g.count(), 1));
  parallel_items(C, g.count() * 6, [&](int64_t c0, int64_t c1) {
    // With the ReLU, the channel's masked gradient is formed once (a select on loaded values,
    // so it vectorises) and stays in this scratch, in L2, for the second pass.
    thread_local std::vector<float> masked;
    if (yv && static_cast<int64_t>(masked.size()) < g.count())
      masked.resize(static_cast<size_t>(g.count()));
    for (int64_t c = c0; c < c1; ++c) {
      const float mu = mean[c];
      const float rs = 1.0f / std::sqrt(var[c] + eps);
      auto grad = [&](int64_t n) { return yv ? masked.data() + n * S : dy + (n * C + c) * S; };
      double sg = 0, sgx = 0;
      for (int64_t n = 0; n < g.n; ++n) {
        const int64_t o = (n * C + c) * S;
        const float* xp = x + o;
        if (yv) {
          const float *dyp = dy + o, *yp = yv + o;
          float* gp = masked.data() + n * S;
          for (int64_t j = 0; j < S; ++j) {
            const float d = dyp[j];
            gp[j] = yp[j] > 0.0f ? d : 0.0f;
          }
        }
        const float* gp = grad(n);
        sg += pairwise_sum(gp, S);
        sgx += pairwise_sum_of(S, [gp, xp, mu](int64_t j) { return gp[j] * (xp[j] - mu); });
      }
      db[c] = static_cast<float>(sg);
      dw[c] = static_cast<float>(sgx) * rs;
      // dx = w rstd (g - mean(g) - xhat mean(g xhat)), xhat = (x - mu) rstd
      const float k = (w ? w[c] : 1.0f) * rs;
      const float mg = static_cast<float>(sg * inv_m);
      const float c2 = static_cast<float>(sgx * inv_m) * rs * rs;
      for (int64_t n = 0; n < g.n; ++n) {
        const int64_t o = (n * C + c) * S;
        const float *gp = grad(n), *xp = x + o;
        float* dxp = dx + o;
        for (int64_t j = 0; j < S; ++j) dxp[j] = k * (gp[j] - mg - (xp[j] - mu) * c2);
      }
    }
  });
}

}  // namespace ipuml::cpu::kdetail
