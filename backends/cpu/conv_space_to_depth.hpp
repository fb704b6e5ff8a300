// Internal to the CPU backend: strided convolutions with few input channels (ResNet's 7x7/2 stem
// on RGB) as stride-1 convolutions of their space-to-depth input. With stride s (sh x sw), the
// padded input splits into its sh * sw phases, x'[(c, py, px)][i][j] = xpad[c][sh i + py][sw j +
// px], and the kernel into the matching taps, w'[o][(c, py, px)][a][b] = w[o][c][sh a + py][sw b +
// px] (zero past the kernel), so that
//   y[o][oy][ox] = sum over c, ky, kx of w[o][c][ky][kx] xpad[c][sh oy + ky][sw ox + kx]
//                = sum over (c, py, px), a, b of w'[o][(c, py, px)][a][b] x'[(c, py, px)][oy +
//                a][ox + b],
// a stride-1, unpadded convolution with c sh sw channels and a ceil(kh / sh) x ceil(kw / sw)
// kernel. Strided products gather their input tap by tap through scalar packers; the stride-1
// kernels read rows in place, which pays for the zero taps (64 for 49 on the stem) many times over.
// Not a public API.
#pragma once

#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/gemm_kernels.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ipuml::cpu::detail {

// Whether a strided convolution can be split into phases: undilated, one group, a kernel at
// least as big as the stride, and phase images within 32-bit offsets.
inline bool phases_split(const Conv2dParams& p) {
  constexpr int64_t kMaxIndex = (int64_t(1) << 31) - 1;
  return (p.stride_h > 1 || p.stride_w > 1) && p.dil_h == 1 && p.dil_w == 1 && p.groups == 1 &&
         p.kh >= p.stride_h && p.kw >= p.stride_w &&
         p.n * p.c_in * (p.h + 2 * p.pad_h + p.stride_h) * (p.w + 2 * p.pad_w + p.stride_w) <=
             kMaxIndex;
}

// Whether a convolution runs through its space-to-depth form: it splits into phases, with at
// most 16 channels after the split (more channels feed the strided GEMM well enough, and the zero
// taps would cost more than the packing they save).
inline bool space_to_depth_applies(const Conv2dParams& p) {
  return phases_split(p) && p.c_in * p.stride_h * p.stride_w <= 16;
}

// The stride-1 convolution that p becomes: c_in sh sw channels of (oh + kh' - 1) x (ow + kw' - 1)
// phase pixels, a kh' x kw' kernel, no padding; its output is p's, element for element.
inline Conv2dParams space_to_depth_params(const Conv2dParams& p) {
  Conv2dParams q;
  q.n = p.n;
  q.c_in = p.c_in * p.stride_h * p.stride_w;
  q.c_out = p.c_out;
  q.kh = ceil_div(p.kh, p.stride_h);
  q.kw = ceil_div(p.kw, p.stride_w);
  q.h = p.out_h() + q.kh - 1;
  q.w = p.out_w() + q.kw - 1;
  return q;
}

// xs (q.n x q.c_in x q.h x q.w) = the phases of x, zero where they fall in the padding or past it.
inline void space_to_depth_input(const Conv2dParams& p, const Conv2dParams& q, const float* x,
                                 float* xs, bool parallel) {
  const int64_t sh = p.stride_h, sw = p.stride_w;
  for_each_index(parallel, q.n * q.c_in, [&](int64_t plane) {
    const int64_t img = plane / q.c_in, cq = plane % q.c_in;
    const int64_t c = cq / (sh * sw), py = cq / sw % sh, px = cq % sw;
    const float* src = x + (img * p.c_in + c) * p.h * p.w;
    float* dst = xs + plane * q.h * q.w;
    // Phase column j reads input column sw j + px - pad_w: inside for j in [j0, j1).
    const int64_t j0 = std::min(q.w, ceil_div(std::max<int64_t>(0, p.pad_w - px), sw));
    const int64_t j1 = std::max(j0, std::min(q.w, ceil_div(p.w + p.pad_w - px, sw)));
    for (int64_t i = 0; i < q.h; ++i) {
      const int64_t iy = sh * i + py - p.pad_h;
      float* row = dst + i * q.w;
      if (iy < 0 || iy >= p.h) {
        std::fill(row, row + q.w, 0.0f);
        continue;
      }
      const int64_t at = iy * p.w + px - p.pad_w;  // + sw j: the input column of phase column j
      std::fill(row, row + j0, 0.0f);
      for (int64_t j = j0; j < j1; ++j) row[j] = src[at + sw * j];
      std::fill(row + j1, row + q.w, 0.0f);
    }
  });
}

// dx (one image, c_in x h x w) from the gradient of its phase images dxs (q.c_in x q.h x q.w):
// each input pixel takes its phase pixel's, zero where no phase pixel holds it (rows and columns
// past the last one the convolution reads).
inline void space_to_depth_input_grad(const Conv2dParams& p, const Conv2dParams& q,
                                      const float* dxs, float* dx) {
  const int64_t sh = p.stride_h, sw = p.stride_w;
  for (int64_t c = 0; c < p.c_in; ++c)
    for (int64_t iy = 0; iy < p.h; ++iy) {
      float* row = dx + (c * p.h + iy) * p.w;
      std::fill(row, row + p.w, 0.0f);
      const int64_t i = (iy + p.pad_h) / sh, py = (iy + p.pad_h) % sh;
      if (i >= q.h) continue;
      for (int64_t px = 0; px < sw; ++px) {
        const float* src = dxs + (((c * sh + py) * sw + px) * q.h + i) * q.w;
        // Phase column j holds input column sw j + px - pad_w.
        const int64_t j0 = std::min(q.w, ceil_div(std::max<int64_t>(0, p.pad_w - px), sw));
        const int64_t j1 = std::max(j0, std::min(q.w, ceil_div(p.w + p.pad_w - px, sw)));
        float* at = row + px - p.pad_w;
        for (int64_t j = j0; j < j1; ++j) at[sw * j] = src[j];
      }
    }
}

// The stride-1 form of p and its space-to-depth input, held in this thread's scratch.
struct SpaceToDepthInput {
  Conv2dParams q;
  ScratchLease xs;
  SpaceToDepthInput(const Conv2dParams& p, const float* x, bool parallel)
      : q(space_to_depth_params(p)), xs(kScratchPhases, size_t(q.n * q.c_in * q.h * q.w)) {
    space_to_depth_input(p, q, x, xs.get(), parallel);
  }
};

// Where kernel tap (o, (c, py, px), a, b) of the split kernel comes from in the original one, or
// -1 for the zero taps past its edge; calls f(split index, original index) for every tap.
template <class F>
void space_to_depth_taps(const Conv2dParams& p, const Conv2dParams& q, const F& f) {
  const int64_t sh = p.stride_h, sw = p.stride_w;
  for (int64_t o = 0; o < q.c_out; ++o)
    for (int64_t cq = 0; cq < q.c_in; ++cq) {
      const int64_t c = cq / (sh * sw), py = cq / sw % sh, px = cq % sw;
      for (int64_t a = 0; a < q.kh; ++a)
        for (int64_t b = 0; b < q.kw; ++b) {
          const int64_t ky = sh * a + py, kx = sw * b + px;
          f(((o * q.c_in + cq) * q.kh + a) * q.kw + b,
            ky < p.kh && kx < p.kw ? ((o * p.c_in + c) * p.kh + ky) * p.kw + kx : int64_t(-1));
        }
    }
}

// Where each tap (c, ky, kx) of the original kernel, in its order, reads the phase images (planes
// of q.h x q.w) from an output pixel: phase (c, ky mod sh, kx mod sw), row ky / sh, column kx /
// sw. A stride-1 product over these offsets and the original weights is the strided convolution
// without the split kernel's zero taps (7 of 16 per channel for a 3x3/2).
inline std::vector<int64_t> space_to_depth_tap_offsets(const Conv2dParams& p,
                                                       const Conv2dParams& q) {
  std::vector<int64_t> offsets;
  offsets.reserve(size_t(p.c_in * p.kh * p.kw));
  for (int64_t c = 0; c < p.c_in; ++c)
    for (int64_t ky = 0; ky < p.kh; ++ky)
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t cq = (c * p.stride_h + ky % p.stride_h) * p.stride_w + kx % p.stride_w;
        offsets.push_back((cq * q.h + ky / p.stride_h) * q.w + kx / p.stride_w);
      }
  return offsets;
}

// ws (c_out x q.c_in x q.kh x q.kw) = the split kernel of w.
inline void space_to_depth_weights(const Conv2dParams& p, const Conv2dParams& q, const float* w,
                                   float* ws) {
  space_to_depth_taps(p, q, [&](int64_t s, int64_t o) { ws[s] = o >= 0 ? w[o] : 0.0f; });
}

// dw (c_out x c_in x kh x kw) = the taps of the split kernel's gradient dws that exist in w.
inline void space_to_depth_weight_grad(const Conv2dParams& p, const Conv2dParams& q,
                                       const float* dws, float* dw) {
  space_to_depth_taps(p, q, [&](int64_t s, int64_t o) {
    if (o >= 0) dw[o] = dws[s];
  });
}

}  // namespace ipuml::cpu::detail
