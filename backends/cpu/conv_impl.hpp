// Bodies of the convolutions declared in conv.hpp.
// Header-only mode includes this from conv.hpp; compiled mode compiles it once in src/lib.
#pragma once

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/gemm_kernels.hpp>
#include <ipuml/core/error.hpp>

#include <algorithm>
#include <cstring>
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

inline bool is_pointwise(const Conv2dParams& p) {
  return p.kh == 1 && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 &&
         p.pad_w == 0;
}

}  // namespace detail

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
  check_conv2d_params("conv2d_forward", p);
  const int64_t G = p.groups, cig = p.c_in / G, cog = p.c_out / G, oh = p.out_h(), ow = p.out_w();
  const int64_t P = oh * ow, K = cig * p.kh * p.kw;
  const detail::GemmConfig& cfg = detail::config_for(active_isa());
  const int threads = detail::available_threads();
  const int64_t tasks = p.n * G;
  // Whole images per task when there are enough of them; otherwise parallel inside the GEMM.
  const bool outer = threads > 1 && tasks > 1;
  const bool inner = tasks < 2 * threads;
  detail::for_each_index(outer, tasks, [&](int64_t t) {
    const int64_t img = t / G, g = t % G;
    const float* xg = x + (img * p.c_in + g * cig) * p.h * p.w;
    float* yg = y + (img * p.c_out + g * cog) * P;
    float beta = 0.0f;
    if (bias != nullptr) {
      for (int64_t o = 0; o < cog; ++o) std::fill(yg + o * P, yg + (o + 1) * P, bias[g * cog + o]);
      beta = 1.0f;
    }
    const detail::PackRowMajorA pack_w{w + g * cog * K, K};
    if (detail::is_pointwise(p))
      detail::run_gemm(cfg, cog, P, K, 1.0f, pack_w, detail::PackRowMajorB{xg, P}, beta, yg, P,
                       inner);
    else
      detail::run_gemm(cfg, cog, P, K, 1.0f, pack_w, detail::PackIm2colB{xg, &p, ow}, beta, yg, P,
                       inner);
  });
}

IPUML_INLINE void conv2d_backward_input(const Conv2dParams& p, const float* dy, const float* w,
                                        float* dx) {
  check_conv2d_params("conv2d_backward_input", p);
  const int64_t G = p.groups, cig = p.c_in / G, cog = p.c_out / G, oh = p.out_h(), ow = p.out_w();
  const int64_t P = oh * ow, K = cig * p.kh * p.kw, HW = p.h * p.w;
  const detail::GemmConfig& cfg = detail::config_for(active_isa());
  const int threads = detail::available_threads();
  const int64_t tasks = p.n * G;
  const bool outer = threads > 1 && tasks > 1;
  const bool inner = tasks < 2 * threads;
  const bool pointwise = detail::is_pointwise(p);
  detail::for_each_index(outer, tasks, [&](int64_t t) {
    const int64_t img = t / G, g = t % G;
    const float* dyg = dy + (img * p.c_out + g * cog) * P;
    float* dxg = dx + (img * p.c_in + g * cig) * HW;
    // dcol (K x P) = W_g^T (K x cog) * dy_g (cog x P)
    const detail::PackColMajorA pack_wt{w + g * cog * K, K};
    const detail::PackRowMajorB pack_dy{dyg, P};
    if (pointwise) {
      detail::run_gemm(cfg, K, P, cog, 1.0f, pack_wt, pack_dy, 0.0f, dxg, P, inner);
      return;
    }
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
  const int64_t P = oh * ow, K = cig * p.kh * p.kw;
  const detail::GemmConfig& cfg = detail::config_for(active_isa());
  const int threads = detail::available_threads();
  // One GEMM per group whose reduction runs over every (image, pixel): the driver never splits
  // the reduction, so the summation order is fixed.
  const bool outer = threads > 1 && G > 1;
  const bool inner = G < 2 * threads;
  detail::for_each_index(outer, G, [&](int64_t g) {
    const detail::PackDyA pack_dy{dy + g * cog * P, p.c_out * P, P};
    const detail::PackIm2colTB pack_x{x + g * cig * p.h * p.w, &p, oh, ow};
    detail::run_gemm(cfg, cog, K, p.n * P, 1.0f, pack_dy, pack_x, 0.0f, dw + g * cog * K, K, inner);
  });
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
