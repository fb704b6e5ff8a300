// Bodies of the image augmentations (compiled once in src/lib/data_image_transforms.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <ipuml/core/error.hpp>
#include <ipuml/data/image_transforms.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::data::transforms {

namespace image_detail {

IPUML_INLINE void check_image(const Tensor& t, const char* who) {
  IPUML_CHECK(t.defined(), who, ": the example has no data tensor");
  IPUML_CHECK(t.dtype() == kFloat32, who, ": expected float32 image data, got ",
              dtype_name(t.dtype()));
  IPUML_CHECK(t.dim() >= 2, who, ": expected an image [..., H, W], got shape ",
              shape_str(t.shape()));
  IPUML_CHECK(t.size(-1) > 0 && t.size(-2) > 0, who, ": the image is empty, shape ",
              shape_str(t.shape()));
}

// Where output pixel `dst` samples the source (PyTorch's area_pixel_compute_source_index for
// align_corners=False, clamped at 0 as its linear modes do): the lower neighbour, the upper one
// (the lower at the last row) and the upper one's weight.
struct Tap {
  int64_t lo, hi;
  float frac;
};
IPUML_INLINE std::vector<Tap> taps(int64_t in, int64_t out) {
  std::vector<Tap> t(static_cast<size_t>(out));
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  for (int64_t d = 0; d < out; ++d) {
    const float src = std::max(scale * (static_cast<float>(d) + 0.5f) - 0.5f, 0.0f);
    const int64_t lo = std::min(static_cast<int64_t>(src), in - 1);
    t[static_cast<size_t>(d)] = {lo, lo < in - 1 ? lo + 1 : lo, src - static_cast<float>(lo)};
  }
  return t;
}

}  // namespace image_detail

IPUML_INLINE Tensor resized_crop(const Tensor& image, const CropBox& box, int64_t out_h,
                                 int64_t out_w) {
  using namespace image_detail;
  check_image(image, "resized_crop");
  const int64_t H = image.size(-2), W = image.size(-1);
  IPUML_CHECK(box.height > 0 && box.width > 0 && box.top >= 0 && box.left >= 0 &&
                  box.top + box.height <= H && box.left + box.width <= W,
              "resized_crop: box (top ", box.top, ", left ", box.left, ", height ", box.height,
              ", width ", box.width, ") is not a non-empty part of the ", H, "x", W, " image");
  IPUML_CHECK(out_h > 0 && out_w > 0, "resized_crop: output size ", out_h, "x", out_w,
              " must be positive");
  Shape shape = image.shape();
  shape[shape.size() - 2] = out_h;
  shape[shape.size() - 1] = out_w;
  Tensor src = image.contiguous();
  Tensor out = empty(shape, kFloat32);
  const int64_t planes = H * W == 0 ? 0 : image.numel() / (H * W);
  const auto ty = taps(box.height, out_h), tx = taps(box.width, out_w);
  const float* in = src.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* plane = in + p * H * W + box.top * W + box.left;
    float* dst = o + p * out_h * out_w;
    for (int64_t y = 0; y < out_h; ++y) {
      const Tap& a = ty[static_cast<size_t>(y)];
      const float* r0 = plane + a.lo * W;
      const float* r1 = plane + a.hi * W;
      for (int64_t x = 0; x < out_w; ++x) {
        const Tap& b = tx[static_cast<size_t>(x)];
        // PyTorch's order: h0lambda * (w0lambda * p00 + w1lambda * p01) + h1lambda * (...).
        const float top = (1.0f - b.frac) * r0[b.lo] + b.frac * r0[b.hi];
        const float bottom = (1.0f - b.frac) * r1[b.lo] + b.frac * r1[b.hi];
        dst[y * out_w + x] = (1.0f - a.frac) * top + a.frac * bottom;
      }
    }
  }
  return out;
}

IPUML_INLINE Resize::Resize(int64_t height, int64_t width) : h_(height), w_(width) {
  IPUML_CHECK(height > 0 && width > 0, "Resize: size ", height, "x", width, " must be positive");
}

IPUML_INLINE Example Resize::operator()(Example e) const {
  image_detail::check_image(e.data, "Resize");
  e.data = resized_crop(e.data, {0, 0, e.data.size(-2), e.data.size(-1)}, h_, w_);
  return e;
}

IPUML_INLINE RandomResizedCrop::RandomResizedCrop(int64_t height, int64_t width,
                                                  std::pair<double, double> scale,
                                                  std::pair<double, double> ratio)
    : h_(height), w_(width), scale_(scale), ratio_(ratio) {
  IPUML_CHECK(height > 0 && width > 0, "RandomResizedCrop: size ", height, "x", width,
              " must be positive");
  IPUML_CHECK(std::isfinite(scale.first) && std::isfinite(scale.second) && scale.first > 0.0 &&
                  scale.first <= scale.second && scale.second <= 1.0,
              "RandomResizedCrop: scale (", scale.first, ", ", scale.second,
              ") must satisfy 0 < min <= max <= 1");
  IPUML_CHECK(std::isfinite(ratio.first) && std::isfinite(ratio.second) && ratio.first > 0.0 &&
                  ratio.first <= ratio.second,
              "RandomResizedCrop: ratio (", ratio.first, ", ", ratio.second,
              ") must satisfy 0 < min <= max");
}

IPUML_INLINE CropBox RandomResizedCrop::params(int64_t H, int64_t W, SampleRandom& r) const {
  const double area = static_cast<double>(H) * static_cast<double>(W);
  const double log_lo = std::log(ratio_.first), log_hi = std::log(ratio_.second);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * r.uniform(scale_.first, scale_.second);
    const double aspect = std::exp(r.uniform(log_lo, log_hi));
    // Python's round() (half to even), as torchvision.
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
    if (w > 0 && w <= W && h > 0 && h <= H) {
      const int64_t top = r.integer(0, H - h + 1);
      const int64_t left = r.integer(0, W - w + 1);
      return {top, left, h, w};
    }
  }
  const double in_ratio = static_cast<double>(W) / static_cast<double>(H);
  int64_t w = W, h = H;
  if (in_ratio < ratio_.first) {
    h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / ratio_.first));
  } else if (in_ratio > ratio_.second) {
    w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * ratio_.second));
  }
  h = std::clamp<int64_t>(h, 1, H);
  w = std::clamp<int64_t>(w, 1, W);
  return {(H - h) / 2, (W - w) / 2, h, w};
}

IPUML_INLINE Example RandomResizedCrop::operator()(Example e, SampleRandom& r) const {
  image_detail::check_image(e.data, "RandomResizedCrop");
  const CropBox box = params(e.data.size(-2), e.data.size(-1), r);
  e.data = resized_crop(e.data, box, h_, w_);
  return e;
}

IPUML_INLINE RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  IPUML_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: probability ", p, " is outside [0, 1]");
}

IPUML_INLINE Tensor RandomHorizontalFlip::flip(const Tensor& image) {
  image_detail::check_image(image, "RandomHorizontalFlip");
  Tensor src = image.contiguous();
  Tensor out = empty(image.shape(), kFloat32);
  const int64_t W = image.size(-1), rows = image.numel() / W;
  const float* in = src.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t x = 0; x < W; ++x) o[row * W + x] = in[row * W + (W - 1 - x)];
  return out;
}

IPUML_INLINE Example RandomHorizontalFlip::operator()(Example e, SampleRandom& r) const {
  image_detail::check_image(e.data, "RandomHorizontalFlip");
  // The draw happens whatever p is, so changing p never shifts later transforms' numbers.
  if (r.bernoulli(p_)) e.data = flip(e.data);
  return e;
}

IPUML_INLINE RepeatChannels::RepeatChannels(int64_t channels) : channels_(channels) {
  IPUML_CHECK(channels >= 1, "RepeatChannels: channels ", channels, " must be >= 1");
}

IPUML_INLINE Example RepeatChannels::operator()(Example e) const {
  image_detail::check_image(e.data, "RepeatChannels");
  IPUML_CHECK(e.data.dim() >= 3, "RepeatChannels: expected an image [..., C, H, W], got shape ",
              shape_str(e.data.shape()));
  const int64_t c = e.data.size(-3);
  if (c == channels_) return e;
  IPUML_CHECK(c == 1, "RepeatChannels: expected 1 or ", channels_, " channels, got ", c, " (shape ",
              shape_str(e.data.shape()), ")");
  Shape shape = e.data.shape();
  shape[shape.size() - 3] = channels_;
  Tensor src = e.data.contiguous();
  Tensor out = empty(shape, kFloat32);
  const int64_t plane = e.data.size(-1) * e.data.size(-2), images = e.data.numel() / plane;
  const float* in = src.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < images; ++i)
    for (int64_t k = 0; k < channels_; ++k)
      std::memcpy(o + (i * channels_ + k) * plane, in + i * plane,
                  static_cast<size_t>(plane) * sizeof(float));
  e.data = out;
  return e;
}

}  // namespace ipuml::data::transforms
