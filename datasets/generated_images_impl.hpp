// Bodies of GeneratedImages (compiled once in src/lib/datasets_generated_images.cpp).
#pragma once

#include <cmath>

#include <ipuml/core/error.hpp>
#include <ipuml/datasets/generated_images.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::datasets {

IPUML_INLINE GeneratedImages::GeneratedImages(const GeneratedImagesOptions& o) : o_(o) {
  IPUML_CHECK(o.size >= 1 && o.channels >= 1 && o.height >= 1 && o.width >= 1,
              "GeneratedImages: size ", o.size, ", channels ", o.channels, ", height ", o.height,
              " and width ", o.width, " must all be >= 1");
  IPUML_CHECK(o.num_classes >= 1, "GeneratedImages: num_classes ", o.num_classes, " must be >= 1");
  IPUML_CHECK(o.channels * o.height * o.width <= (int64_t{1} << 32),
              "GeneratedImages: an image of ", o.channels, "x", o.height, "x", o.width,
              " has more than 2^32 pixels");
}

IPUML_INLINE void GeneratedImages::fill(int64_t i, float* pixels, int64_t* label) const {
  // Sample i is stream i of a seed of its own, so samples do not overlap and none reuses the
  // streams a program's own random ops draw from the same seed.
  const RandomStream rs{o_.seed ^ 0x6E6E4A7A1D0C5B3FULL, static_cast<uint64_t>(i)};
  const int64_t n = o_.channels * o_.height * o_.width;
  for (int64_t k = 0; k < n; k += 2) {
    // Box-Muller over one Philox block: two normals per block.
    const auto w = rs.words(static_cast<uint64_t>(k / 2 + 1));
    const double u1 = (static_cast<double>(w[0] >> 8) + 1.0) * (1.0 / 16777217.0);
    const double u2 = static_cast<double>(w[1] >> 8) * (1.0 / 16777216.0);
    const double rad = std::sqrt(-2.0 * std::log(u1)), ang = 6.283185307179586 * u2;
    pixels[k] = static_cast<float>(rad * std::cos(ang));
    if (k + 1 < n) pixels[k + 1] = static_cast<float>(rad * std::sin(ang));
  }
  const auto w = rs.words(0);
  *label = static_cast<int64_t>(((static_cast<uint64_t>(w[0]) << 32) | w[1]) %
                                static_cast<uint64_t>(o_.num_classes));
}

IPUML_INLINE data::Example GeneratedImages::get(int64_t i) const {
  check_index(i, size(), "GeneratedImages::get");
  Tensor image = empty({o_.channels, o_.height, o_.width}, kFloat32);
  Tensor label = empty({}, kInt64);
  fill(i, image.data_ptr<float>(), label.data_ptr<int64_t>());
  return {image, label};
}

IPUML_INLINE data::Example GeneratedImages::get_batch(std::span<const int64_t> indices) const {
  const int64_t b = static_cast<int64_t>(indices.size());
  const int64_t n = o_.channels * o_.height * o_.width;
  Tensor images = empty({b, o_.channels, o_.height, o_.width}, kFloat32);
  Tensor labels = empty({b}, kInt64);
  float* img = images.data_ptr<float>();
  int64_t* lab = labels.data_ptr<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[static_cast<size_t>(r)];
    check_index(i, size(), "GeneratedImages::get_batch");
    fill(i, img + r * n, lab + r);
  }
  return {images, labels};
}

}  // namespace ipuml::datasets
