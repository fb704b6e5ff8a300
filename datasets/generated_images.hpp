// GeneratedImages: random images and labels for throughput runs (Graphcore's `--data
// generated`), every sample a pure function of (seed, index), assembled a batch at a time.
#pragma once

#include <cstdint>
#include <span>

#include <ipuml/core/config.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/data/dataset.hpp>

namespace ipuml::datasets {

struct GeneratedImagesOptions {
  int64_t size = 1024;  // samples
  int64_t channels = 3;
  int64_t height = 224;
  int64_t width = 224;
  int64_t num_classes = 1000;
  uint64_t seed = 0;
};

// Pixels are standard normal (what normalised images look like), labels uniform in
// [0, num_classes). Nothing is stored: a sample is drawn again whenever it is asked for.
class GeneratedImages : public data::DatasetBase<GeneratedImages> {
 public:
  explicit GeneratedImages(const GeneratedImagesOptions& o);

  data::Example get(int64_t i) const;
  // data [B, C, H, W] float32, target [B] int64.
  data::Example get_batch(std::span<const int64_t> indices) const;
  int64_t size() const { return o_.size; }
  const GeneratedImagesOptions& options() const { return o_; }

 private:
  void fill(int64_t i, float* pixels, int64_t* label) const;
  GeneratedImagesOptions o_;
};

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/generated_images_impl.hpp>
#endif
