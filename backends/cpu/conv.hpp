// 2-D convolution on raw NCHW float buffers (forward and the three gradients), PyTorch semantics.
// Runs as implicit-im2col GEMM on the packed micro-kernels of gemm.hpp, as direct AVX-512 kernels,
// or (3x3, stride 1, >= 48 channels) as Winograd F(2x2, 3x3); deterministic under oneTBB.
#pragma once

#include <ipuml/backends/cpu/channel_affine.hpp>
#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/core/config.hpp>

#include <cstdint>
#include <functional>

namespace ipuml::cpu {

// Shapes of one convolution. A 1-D convolution is h = 1, kh = 1 (stride_h = dil_h = 1, pad_h = 0).
struct Conv2dParams {
  int64_t n = 1, c_in = 1, h = 1, w = 1;
  int64_t c_out = 1, kh = 1, kw = 1;
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int64_t groups = 1;
  int64_t out_h() const { return (h + 2 * pad_h - dil_h * (kh - 1) - 1) / stride_h + 1; }
  int64_t out_w() const { return (w + 2 * pad_w - dil_w * (kw - 1) - 1) / stride_w + 1; }
};

// Throws ipuml::Error naming the offending field unless the parameters describe a valid conv.
void check_conv2d_params(const char* op, const Conv2dParams& p);

// x: n x c_in x h x w, w: c_out x (c_in / groups) x kh x kw, bias: c_out or nullptr,
// y: n x c_out x out_h x out_w (overwritten).
void conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias,
                    float* y);
// The same, then `epilogue` (channels c_out, plane out_h * out_w; may be null) over y: a batch
// norm's output pass fused into the convolution. The paths that finish y a piece at a time (the
// pixel kernels, the wide GEMM) apply it to each piece as it is finished, while it is in cache;
// the others after the whole output. Either way y holds the same bits as the two run apart.
void conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias,
                    float* y, const ChannelAffine* epilogue);
// A consumer of a forward convolution's output image by image: consume(img, out) gets image img's
// c_out x out_h x out_w floats (NCHW) as soon as they are finished, on the task that computed them,
// and must not keep `out`. Images may come in any order and on several threads at once.
struct ConvImageSink {
  std::function<void(int64_t img, const float* out)> consume;
};
// The forward convolution handed to `sink` instead of written to a y: on the paths whose tasks
// are whole images (conv_forward_streams_images) each image is computed into a buffer of its
// task's own and consumed while it is in that core's cache, so the output never goes out to
// memory (the CPU graph executor pools MNIST's conv1 this way); on the others into one buffer,
// then consumed. Either way `out` holds the bits conv2d_forward would write to y.
void conv2d_forward(const Conv2dParams& p, const float* x, const float* w, const float* bias,
                    const ConvImageSink& sink);
bool conv_forward_streams_images(const Conv2dParams& p);
// dx = d(loss)/dx given dy (overwrites dx).
void conv2d_backward_input(const Conv2dParams& p, const float* dy, const float* w, float* dx);
// dw = d(loss)/dw given x and dy (overwrites dw); reduced over batch and space in a fixed order.
void conv2d_backward_weight(const Conv2dParams& p, const float* x, const float* dy, float* dw);
// db[o] = sum of dy over batch and space (overwrites db).
void conv2d_backward_bias(const Conv2dParams& p, const float* dy, float* db);

// Whether stride-1 3x3 convolutions with at least 48 channels each way take Winograd F(2x2, 3x3)
// (the default; about 1.3-1.7x faster, with rounding errors of the same order as the direct
// kernels') or the direct kernels. The environment variable IPUML_CONV_WINOGRAD=0 turns it off
// at start-up. Either way results do not depend on the thread count.
void set_conv_winograd(bool enabled);
bool conv_winograd_enabled();

// With AVX2, a stride-1 convolution on maps of at most 64 pixels, or 256 when a product runs on
// several threads (few images), and ResNet's stride-2 1x1 shortcuts onto such maps, compute
// their output as the transposed product, pixels x channels, transposed into NCHW (1x1s their
// input gradient too), the default: 1.2x faster on 7x7 maps on one thread, 1.2-1.8x on 7x7 and
// 14x14 maps on two. Off (or IPUML_CONV_TRANSPOSED=0 at start-up), the wide GEMM computes them;
// the bits are the same either way. conv_runs_transposed(p) says whether p's forward takes that
// path now.
void set_conv_transposed(bool enabled);
bool conv_runs_transposed(const Conv2dParams& p);

// The path conv2d_forward takes for p now (with the active ISA, the switches above and the
// oneTBB threads available): Winograd; the stride-1 convolution of a space-to-depth input, or of
// a strided 1x1's gathered pixels, which takes a path of its own; the AVX-512 pixel kernels over
// the phase images of a strided convolution; few taps in registers (small_k); the transposed
// product; the direct pixel kernels; the wide GEMM (stride 1); the im2col GEMM (strided).
enum class ConvPath {
  winograd,
  space_to_depth,
  gathered_1x1,
  phase_pixels,
  small_k,
  transposed,
  pixels,
  wide,
  im2col
};
ConvPath conv_forward_path(const Conv2dParams& p);

// With AVX2, whether stride-1 convolutions with several taps per channel (3x3s, 5x5s, 1-D
// kernels) and reductions of at most 384 (c_in x taps per group) compute their forward, weight
// gradient and flipped-form input gradient on the direct pixel kernels, and their col2im-form input
// gradient over the real outputs with a masked gather (the default; 1.15-2x faster than the wide
// GEMM on MNIST's, LeNet's and small-channel layers), or everything on the wide GEMM, which also
// computes the dropped columns of each row. Both sum in the same k blocks in the same order, so the
// bits are the same either way. IPUML_CONV_AVX2_PIXELS=0 turns them off at start-up. (AVX-512
// chooses its own pixel kernels.)
void set_conv_avx2_pixels(bool enabled);

// Naive loops with double accumulation: the test oracle.
void conv2d_forward_reference(const Conv2dParams& p, const float* x, const float* w,
                              const float* bias, float* y);
void conv2d_backward_input_reference(const Conv2dParams& p, const float* dy, const float* w,
                                     float* dx);
void conv2d_backward_weight_reference(const Conv2dParams& p, const float* x, const float* dy,
                                      float* dw);
void conv2d_backward_bias_reference(const Conv2dParams& p, const float* dy, float* db);

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/conv_impl.hpp>
#endif
