// Bodies of the image-set loading (compiled once in src/lib/datasets_image_sets.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>

#include <ipuml/core/error.hpp>
#include <ipuml/datasets/data_cache.hpp>
#include <ipuml/datasets/image_sets.hpp>

namespace ipuml::datasets {

IPUML_INLINE std::pair<double, double> pixel_statistics(const MnistSplit& split) {
  IPUML_CHECK(!split.images.empty(), "pixel_statistics: the split has no pixels");
  // Integer sums are exact, so the statistics do not depend on summation order.
  uint64_t sum = 0, sq = 0;
  for (uint8_t p : split.images) {
    sum += p;
    sq += static_cast<uint64_t>(p) * p;
  }
  const double n = static_cast<double>(split.images.size());
  const double mean = static_cast<double>(sum) / n;
  const double var = std::max(static_cast<double>(sq) / n - mean * mean, 0.0);
  return {mean / 255.0, std::sqrt(var) / 255.0};
}

IPUML_INLINE ImageSet load_image_set(const std::string& name_or_dir) {
  IPUML_CHECK(!name_or_dir.empty(), "image set: no name or directory given (expected 'mnist', ",
              "'fashion-mnist' or a directory of IDX files)");
  ImageSet set;
  set.name = name_or_dir;
  if (name_or_dir == "mnist" || name_or_dir == "fashion-mnist") {
    set.dir = data_cache_dir() + "/" + name_or_dir;
    std::error_code ec;
    IPUML_CHECK(std::filesystem::is_directory(set.dir, ec), "image set '", name_or_dir,
                "': not in the data cache (", set.dir, "); run scripts/fetch-data.sh ",
                name_or_dir);
  } else {
    set.dir = name_or_dir;
    std::error_code ec;
    IPUML_CHECK(std::filesystem::is_directory(set.dir, ec), "image set: '", name_or_dir,
                "' is neither 'mnist', 'fashion-mnist' nor a directory of IDX files");
  }
  set.train = load_mnist(set.dir, true);
  set.test = load_mnist(set.dir, false);
  IPUML_CHECK(set.train.rows == set.test.rows && set.train.cols == set.test.cols, "image set '",
              name_or_dir, "': training images are ", set.train.rows, "x", set.train.cols,
              " but test images ", set.test.rows, "x", set.test.cols);
  if (name_or_dir == "fashion-mnist") {
    set.class_names = fashion_mnist_classes();
  } else {
    for (int c = 0; c < 10; ++c) set.class_names.push_back(std::to_string(c));
  }
  std::tie(set.mean, set.stddev) = pixel_statistics(set.train);
  IPUML_CHECK(set.stddev > 0, "image set '", name_or_dir,
              "': every training pixel has the same value; nothing to learn from");
  return set;
}

}  // namespace ipuml::datasets
