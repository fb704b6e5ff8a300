// Bodies of GeneratedMasks (compiled once in src/lib/datasets_generated_masks.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <ipuml/core/error.hpp>
#include <ipuml/datasets/generated_masks.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::datasets {

IPUML_INLINE GeneratedMasks::GeneratedMasks(const GeneratedMasksOptions& o) : o_(o) {
  IPUML_CHECK(o.size >= 1 && o.channels >= 1 && o.height >= 1 && o.width >= 1,
              "GeneratedMasks: size ", o.size, ", channels ", o.channels, ", height ", o.height,
              " and width ", o.width, " must all be >= 1");
  IPUML_CHECK(o.channels <= 64 && o.height <= 65536 && o.width <= 65536 &&
                  o.channels * o.height * o.width <= (int64_t{1} << 32),
              "GeneratedMasks: an image of ", o.channels, "x", o.height, "x", o.width,
              " is too large (at most 64 channels, 65536 rows and columns, 2^32 pixels)");
  IPUML_CHECK(std::isfinite(o.noise) && o.noise >= 0.0 && o.noise <= 10.0,
              "GeneratedMasks: noise must be in [0, 10], got ", o.noise);
  IPUML_CHECK(o.max_defects >= 1 && o.max_defects <= 64,
              "GeneratedMasks: max_defects must be in [1, 64], got ", o.max_defects);
  IPUML_CHECK(o.empty_fraction >= 0.0 && o.empty_fraction <= 1.0,
              "GeneratedMasks: empty_fraction must be in [0, 1], got ", o.empty_fraction);
}

IPUML_INLINE void GeneratedMasks::fill(int64_t i, float* pixels, float* mask) const {
  // Sample i is stream i of a seed of its own (apart from GeneratedImages' and from a program's
  // own random ops drawn from the same seed). Blocks 0..1 draw the surface and the defect count,
  // blocks 2 + 2d and 3 + 2d defect d, blocks from kNoise the noise, two normals a block.
  const RandomStream rs{o_.seed ^ 0x3D5A9C2E71B04F86ULL, static_cast<uint64_t>(i)};
  constexpr uint64_t kNoise = uint64_t{1} << 20;
  auto unit = [](uint32_t w) { return static_cast<double>(RandomStream::to_unit(w)); };
  const int64_t h = o_.height, w = o_.width, hw = h * w;
  const double side = static_cast<double>(std::min(h, w));

  const auto b0 = rs.words(0), b1 = rs.words(1);
  const bool clean = unit(b0[0]) < o_.empty_fraction;
  const int64_t count =
      clean ? 0 : 1 + static_cast<int64_t>(unit(b0[1]) * static_cast<double>(o_.max_defects));
  const double level = 0.35 + 0.3 * unit(b0[2]);
  const double gy = (unit(b0[3]) - 0.5) * 0.2, gx = (unit(b1[0]) - 0.5) * 0.2;

  struct Defect {
    bool streak;
    double cy, cx, cos_t, sin_t, a, b, contrast;
  };
  std::vector<Defect> defects;
  for (int64_t d = 0; d < count; ++d) {
    const auto p = rs.words(2 + 2 * static_cast<uint64_t>(d));
    const auto q = rs.words(3 + 2 * static_cast<uint64_t>(d));
    Defect df{};
    df.streak = unit(p[0]) < 0.4;
    df.cy = unit(p[1]) * static_cast<double>(h);
    df.cx = unit(p[2]) * static_cast<double>(w);
    const double angle = unit(p[3]) * 3.141592653589793;
    df.cos_t = std::cos(angle);
    df.sin_t = std::sin(angle);
    if (df.streak) {  // half-length and half-width of a thin bar
      df.a = side * (0.2 + 0.25 * unit(q[0]));
      df.b = std::max(0.6, side * 0.04) * (1.0 + unit(q[1]));
    } else {  // semi-axes of an ellipse
      const double lo = std::max(1.2, 0.06 * side), hi = std::max(1.8, 0.2 * side);
      df.a = lo + (hi - lo) * unit(q[0]);
      df.b = lo + (hi - lo) * unit(q[1]);
    }
    df.contrast = (unit(q[2]) < 0.5 ? -1.0 : 1.0) * (0.25 + 0.25 * unit(q[3]));
    defects.push_back(df);
  }

  // The clean surface and the defects, shared by every channel.
  std::vector<float> base(static_cast<size_t>(hw));
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      const double py = (static_cast<double>(y) + 0.5), px = (static_cast<double>(x) + 0.5);
      double v = level + gy * (py / static_cast<double>(h) - 0.5) +
                 gx * (px / static_cast<double>(w) - 0.5);
      bool hit = false;
      for (const Defect& df : defects) {
        const double dy = py - df.cy, dx = px - df.cx;
        const double u = dx * df.cos_t + dy * df.sin_t, t = -dx * df.sin_t + dy * df.cos_t;
        const bool in = df.streak ? std::abs(u) <= df.a && std::abs(t) <= df.b
                                  : (u / df.a) * (u / df.a) + (t / df.b) * (t / df.b) <= 1.0;
        if (in && !hit) v += df.contrast;  // overlapping defects keep the first one's shade
        hit = hit || in;
      }
      base[static_cast<size_t>(y * w + x)] = static_cast<float>(v);
      mask[y * w + x] = hit ? 1.0f : 0.0f;
    }

  const int64_t n = o_.channels * hw;
  for (int64_t k = 0; k < n; k += 2) {
    const auto r = rs.words(kNoise + static_cast<uint64_t>(k / 2));
    const double u1 = (static_cast<double>(r[0] >> 8) + 1.0) * (1.0 / 16777217.0);
    const double u2 = static_cast<double>(r[1] >> 8) * (1.0 / 16777216.0);
    const double rad = o_.noise * std::sqrt(-2.0 * std::log(u1)), ang = 6.283185307179586 * u2;
    pixels[k] = base[static_cast<size_t>(k % hw)] + static_cast<float>(rad * std::cos(ang));
    if (k + 1 < n)
      pixels[k + 1] =
          base[static_cast<size_t>((k + 1) % hw)] + static_cast<float>(rad * std::sin(ang));
  }
}

IPUML_INLINE data::Example GeneratedMasks::get(int64_t i) const {
  check_index(i, size(), "GeneratedMasks::get");
  Tensor image = empty({o_.channels, o_.height, o_.width}, kFloat32);
  Tensor mask = empty({1, o_.height, o_.width}, kFloat32);
  fill(i, image.data_ptr<float>(), mask.data_ptr<float>());
  return {image, mask};
}

IPUML_INLINE data::Example GeneratedMasks::get_batch(std::span<const int64_t> indices) const {
  const int64_t b = static_cast<int64_t>(indices.size());
  const int64_t hw = o_.height * o_.width, n = o_.channels * hw;
  Tensor images = empty({b, o_.channels, o_.height, o_.width}, kFloat32);
  Tensor masks = empty({b, 1, o_.height, o_.width}, kFloat32);
  float* img = images.data_ptr<float>();
  float* msk = masks.data_ptr<float>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[static_cast<size_t>(r)];
    check_index(i, size(), "GeneratedMasks::get_batch");
    fill(i, img + r * n, msk + r * hw);
  }
  return {images, masks};
}

}  // namespace ipuml::datasets
