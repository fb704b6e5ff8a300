// Image augmentations for vision training, as torchvision's: Resize, RandomResizedCrop,
// RandomHorizontalFlip and RepeatChannels (greyscale to RGB) on float32 images [..., C, H, W].
#pragma once

#include <cstdint>
#include <utility>

#include <ipuml/core/config.hpp>
#include <ipuml/data/augment.hpp>
#include <ipuml/data/example.hpp>

namespace ipuml::data::transforms {

// A rectangle of an image: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
  bool operator==(const CropBox&) const = default;
};

// The box of `image` resized to out_h x out_w by bilinear interpolation with half-pixel centres
// (torchvision's resized_crop without antialiasing = F.interpolate(mode="bilinear",
// align_corners=False) of the crop). Works on every [H, W] plane of [..., H, W] float32 data.
Tensor resized_crop(const Tensor& image, const CropBox& box, int64_t out_h, int64_t out_w);

// The whole image resized to height x width.
class Resize {
 public:
  static constexpr bool batchable = true;
  Resize(int64_t height, int64_t width);
  Example operator()(Example e) const;

 private:
  int64_t h_, w_;
};

// torchvision's RandomResizedCrop: a box of a random share of the area (`scale`) and aspect
// ratio (`ratio`, sampled log-uniformly), up to 10 tries, else the centre crop with the ratio
// clamped; then resized to height x width.
class RandomResizedCrop {
 public:
  RandomResizedCrop(int64_t height, int64_t width, std::pair<double, double> scale = {0.08, 1.0},
                    std::pair<double, double> ratio = {3.0 / 4.0, 4.0 / 3.0});
  // The box for an image of image_h x image_w (torchvision's get_params).
  CropBox params(int64_t image_h, int64_t image_w, SampleRandom& r) const;
  Example operator()(Example e, SampleRandom& r) const;

 private:
  int64_t h_, w_;
  std::pair<double, double> scale_, ratio_;
};

// Mirrors the image left to right with probability p.
class RandomHorizontalFlip {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Example operator()(Example e, SampleRandom& r) const;
  // The mirrored image, always.
  static Tensor flip(const Tensor& image);

 private:
  double p_;
};

// A one-channel image [..., 1, H, W] as `channels` equal channels (greyscale data for RGB
// models); data that already has `channels` channels passes unchanged.
class RepeatChannels {
 public:
  static constexpr bool batchable = true;
  explicit RepeatChannels(int64_t channels);
  Example operator()(Example e) const;

 private:
  int64_t channels_;
};

}  // namespace ipuml::data::transforms

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/data/image_transforms_impl.hpp>
#endif
