// Fused layer-norm kernels: the forward computes each row's mean, reciprocal standard deviation
// and normalised, scaled output in one task per row block; the backward gives dx per row and
// dweight/dbias per column block, in orders that depend on shapes only (never on threads).
#pragma once

#include <ipuml/backends/cpu/kernels_common.hpp>

namespace ipuml::cpu::kdetail {

// Rows x columns of a layer norm whose normalised dims start at attrs.dims[0].
struct NormGeometry {
  int64_t rows = 0, cols = 0;
};

inline NormGeometry norm_geometry(const char* name, const ir::Attrs& a, const Shape& x) {
  IPUML_CHECK(a.dims.size() == 1 && a.dims[0] >= 0 && a.dims[0] < static_cast<int64_t>(x.size()),
              name, ": invalid first normalised dim ", ipuml::detail::str(a.dims), " for shape ",
              shape_str(x));
  NormGeometry g;
  g.rows = numel(Shape(x.begin(), x.begin() + a.dims[0]));
  g.cols = numel(Shape(x.begin() + a.dims[0], x.end()));
  return g;
}

// A scratch row per thread (reused, so steady-state calls allocate nothing).
inline float* norm_scratch(int64_t n) {
  thread_local std::vector<float> buf;
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// in: x, [weight], [bias]; out: y, mean, rstd.
inline void k_layer_norm(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                         const std::vector<MutableBuffer>& out) {
  const char* name = "layer_norm";
  IPUML_CHECK(in[0].meta.dtype == DType::Float32, name, ": expected float32, got ",
              dtype_name(in[0].meta.dtype));
  const auto g = norm_geometry(name, a, in[0].meta.shape);
  const size_t nw = a.flag ? 1 : 0;
  IPUML_CHECK(in.size() == 1 + nw + (a.flag2 ? 1 : 0), name, ": expected ",
              1 + nw + (a.flag2 ? 1 : 0), " inputs, got ", in.size());
  const float* x = in_ptr<float>(in[0]);
  const float* w = a.flag ? in_ptr<float>(in[1]) : nullptr;
  const float* b = a.flag2 ? in_ptr<float>(in[1 + nw]) : nullptr;
  float* y = out_ptr<float>(out[0]);
  float* mean = out_ptr<float>(out[1]);
  float* rstd = out_ptr<float>(out[2]);
  const int64_t M = g.cols;
  const float eps = static_cast<float>(a.scalar);
  if (M == 0) return;
  const float inv_m = 1.0f / static_cast<float>(M);
  parallel_items(g.rows, M * 3, [&](int64_t r0, int64_t r1) {
    float* d = norm_scratch(M);
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * M;
      float* yr = y + r * M;
      const float mu = pairwise_sum(xr, M) * inv_m;
      for (int64_t j = 0; j < M; ++j) {
        const float c = xr[j] - mu;
        d[j] = c * c;
      }
      const float rs = 1.0f / std::sqrt(pairwise_sum(d, M) * inv_m + eps);
      mean[r] = mu;
      rstd[r] = rs;
      if (w && b)
        for (int64_t j = 0; j < M; ++j) yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
      else if (w)
        for (int64_t j = 0; j < M; ++j) yr[j] = (xr[j] - mu) * rs * w[j];
      else if (b)
        for (int64_t j = 0; j < M; ++j) yr[j] = (xr[j] - mu) * rs + b[j];
      else
        for (int64_t j = 0; j < M; ++j) yr[j] = (xr[j] - mu) * rs;
    }
  });
}

// in: dy, x, mean, rstd, [weight]; out: dx.
inline void k_layer_norm_backward(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                                  const MutableBuffer& o) {
  const char* name = "layer_norm_backward";
  IPUML_CHECK(in.size() == (a.flag ? 5u : 4u), name, ": expected ", a.flag ? 5 : 4, " inputs, got ",
              in.size());
  const auto g = norm_geometry(name, a, in[1].meta.shape);
  const float* dy = in_ptr<float>(in[0]);
  const float* x = in_ptr<float>(in[1]);
  const float* mean = in_ptr<float>(in[2]);
  const float* rstd = in_ptr<float>(in[3]);
  const float* w = a.flag ? in_ptr<float>(in[4]) : nullptr;
  float* dx = out_ptr<float>(o);
  const int64_t M = g.cols;
  if (M == 0) return;
  const float inv_m = 1.0f / static_cast<float>(M);
  parallel_items(g.rows, M * 5, [&](int64_t r0, int64_t r1) {
    float* s = norm_scratch(2 * M);
    float* gx = s + M;  // g * xhat
    for (int64_t r = r0; r < r1; ++r) {
      const float* dyr = dy + r * M;
      const float* xr = x + r * M;
      float* dxr = dx + r * M;
      const float mu = mean[r], rs = rstd[r];
      for (int64_t j = 0; j < M; ++j) {
        const float gj = w ? dyr[j] * w[j] : dyr[j];
        s[j] = gj;
        gx[j] = gj * ((xr[j] - mu) * rs);
      }
      const float c1 = pairwise_sum(gx, M) * inv_m;
      const float c2 = pairwise_sum(s, M) * inv_m;
      for (int64_t j = 0; j < M; ++j) dxr[j] = rs * (s[j] - (xr[j] - mu) * rs * c1 - c2);
    }
  });
}

// in: dy, x, mean, rstd; out: dweight, dbias (sums over rows, in row order per column).
inline void k_layer_norm_param_backward(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                                        const std::vector<MutableBuffer>& out) {
  const char* name = "layer_norm_param_backward";
  IPUML_CHECK(in.size() == 4, name, ": expected 4 inputs, got ", in.size());
  const auto g = norm_geometry(name, a, in[1].meta.shape);
  const float* dy = in_ptr<float>(in[0]);
  const float* x = in_ptr<float>(in[1]);
  const float* mean = in_ptr<float>(in[2]);
  const float* rstd = in_ptr<float>(in[3]);
  float* dw = out_ptr<float>(out[0]);
  float* db = out_ptr<float>(out[1]);
  const int64_t M = g.cols, R = g.rows;
  constexpr int64_t kCols = 128;
  const int64_t blocks = (M + kCols - 1) / kCols;
  parallel_items(blocks, R * kCols * 2, [&](int64_t b0, int64_t b1) {
    double sw[kCols], sb[kCols];
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t c0 = blk * kCols, n = std::min(kCols, M - c0);
      for (int64_t j = 0; j < n; ++j) sw[j] = sb[j] = 0.0;
      for (int64_t r = 0; r < R; ++r) {
        const float* dyr = dy + r * M + c0;
        const float* xr = x + r * M + c0;
        const float mu = mean[r], rs = rstd[r];
        for (int64_t j = 0; j < n; ++j) {
          sw[j] += static_cast<double>(dyr[j] * ((xr[j] - mu) * rs));
          sb[j] += static_cast<double>(dyr[j]);
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        dw[c0 + j] = static_cast<float>(sw[j]);
        db[c0 + j] = static_cast<float>(sb[j]);
      }
    }
  });
}

}  // namespace ipuml::cpu::kdetail
