// Internal to the CPU backend: the weight gradient of an unpadded stride-1 1x1 convolution with
// one of its operands read in place. Not a public API.
//
// Both operands of a 1x1's weight gradient are rows of pixels (dy: output channels x pixels, x:
// input channels x pixels), so the wide GEMM (conv_impl.hpp), which packs A and B with the
// reduction innermost, transposes both, and the AVX-512 pixel kernels transpose dy. Here the
// operand with more rows is A and the direct micro-kernels broadcast its values from the rows
// themselves; only the narrower one is transposed into B panels.
#pragma once

#include <ipuml/backends/cpu/gemm_kernels.hpp>

#include <cstdint>
#include <optional>

namespace ipuml::cpu::detail {

// dW (m x c) of an unpadded 1x1 convolution over nimg images (P pixels each) of dy (m rows of P
// pixels an image) and x (c rows), if a narrow enough operand allows: the operand with more rows
// is read in place as A by the direct kernels and only the other is transposed into B panels (a
// fifth of the floats the wide GEMM transposes for a 256 -> 64 layer). dW = dy x^T,
// or dW^T = x dy^T then transposed into dW. One image is the wide GEMM's product (k = P, the same
// blocks, a * b + acc in the same order): the same bits. Several are one product each, added
// into dW in order (the wide GEMM's k blocks would cross images, which A read in place cannot),
// so only images of at least kDirectWgradPixels take this path: shallower ones would make short
// k blocks. False: the wide GEMM takes it.
constexpr int64_t kDirectWgradPixels = 256;
inline bool direct_wgrad_1x1(const GemmConfig& cfg, int64_t nimg, int64_t c, int64_t m, int64_t P,
                             int64_t x_img_stride, int64_t dy_img_stride, const float* x,
                             const float* dy, float* dw, bool inner) {
  const bool dy_direct = m >= c;
  const int64_t rows = dy_direct ? m : c, cols = dy_direct ? c : m;
  if (cfg.kern_direct[cfg.mr][1] == nullptr || cols * block_depth(cfg, P) > kDirectDeepB ||
      (nimg > 1 && P < kDirectWgradPixels))
    return false;
  std::optional<ScratchLease> dwt;
  if (!dy_direct) dwt.emplace(kScratchConvOut, size_t(rows * cols));
  float* out = dy_direct ? dw : dwt->get();
  for (int64_t img = 0; img < nimg; ++img) {
    const float* xi = x + img * x_img_stride;
    const float* dyi = dy + img * dy_img_stride;
    const PackColMajorB b{dy_direct ? xi : dyi, P};  // B(p, j) = row j's pixel p
    run_gemm_direct_a(cfg, rows, cols, P, dy_direct ? dyi : xi, P, b, img == 0 ? 0.0f : 1.0f, out,
                      cols, inner);
  }
  if (!dy_direct)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < c; ++i) dw[o * c + i] = out[i * m + o];
  return true;
}

}  // namespace ipuml::cpu::detail
