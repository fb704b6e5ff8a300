// GeneratedMasks: a Severstal-like segmentation set for UNet (models/unet.hpp): grey images of a
// steel-like surface (a background level with a gentle gradient, plus noise) carrying a few
// defects, ellipses and streaks brighter or darker than the surface, and the binary mask of the
// defects' pixels. Every sample is a pure function of (seed, index), drawn again whenever it is
// asked for, so the set is the same on every machine, thread count and order of access.
#pragma once

#include <cstdint>
#include <span>

#include <ipuml/core/config.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/data/dataset.hpp>

namespace ipuml::datasets {

struct GeneratedMasksOptions {
  int64_t size = 1024;  // samples
  int64_t channels = 1;
  int64_t height = 256;
  int64_t width = 256;
  uint64_t seed = 0;
  // Standard deviation of the per-pixel Gaussian noise; defects differ from the surface by 0.25
  // to 0.5, so the signal stays learnable up to a noise of about 0.2.
  double noise = 0.1;
  // Each sample has no defect with probability empty_fraction (as many Severstal images are
  // clean), else 1 to max_defects of them.
  int64_t max_defects = 3;
  double empty_fraction = 0.15;
};

// data: images [C, H, W] float32 (the surface near 0.5, about [0, 1]); target: the mask
// [1, H, W] float32, 1 on a defect's pixels and 0 elsewhere (every channel shows the same
// defects, each channel with noise of its own).
class GeneratedMasks : public data::DatasetBase<GeneratedMasks> {
 public:
  explicit GeneratedMasks(const GeneratedMasksOptions& o);

  data::Example get(int64_t i) const;
  // data [B, C, H, W] float32, target [B, 1, H, W] float32.
  data::Example get_batch(std::span<const int64_t> indices) const;
  int64_t size() const { return o_.size; }
  const GeneratedMasksOptions& options() const { return o_; }

 private:
  void fill(int64_t i, float* pixels, float* mask) const;
  GeneratedMasksOptions o_;
};

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/generated_masks_impl.hpp>
#endif
