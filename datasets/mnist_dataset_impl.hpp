// Bodies of MnistDataset (compiled once in src/lib/data_mnist_dataset.cpp).
#pragma once

#include <utility>

#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::datasets {

namespace detail {
// uint8 pixels -> float32 in [0,1], the same value torchvision's ToTensor gives (x / 255).
IPUML_INLINE void mnist_pixels_to_float(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
}
}  // namespace detail

IPUML_INLINE MnistDataset::MnistDataset(const std::string& dir, bool train)
    : MnistDataset(load_mnist(dir, train)) {}

IPUML_INLINE MnistDataset::MnistDataset(MnistSplit split)
    : split_(std::make_shared<const MnistSplit>(std::move(split))) {
  const MnistSplit& s = *split_;
  IPUML_CHECK(s.count >= 0 && s.rows > 0 && s.cols > 0 &&
                  static_cast<int64_t>(s.images.size()) == s.count * s.rows * s.cols &&
                  static_cast<int64_t>(s.labels.size()) == s.count,
              "MnistDataset: inconsistent split (", s.count, " images of ", s.rows, "x", s.cols,
              ", ", s.images.size(), " pixel bytes, ", s.labels.size(), " labels)");
}

IPUML_INLINE data::Example MnistDataset::get(int64_t i) const {
  check_index(i, size(), "MnistDataset::get");
  const MnistSplit& s = *split_;
  const int64_t px = s.rows * s.cols;
  Tensor image = empty({1, s.rows, s.cols}, kFloat32);
  detail::mnist_pixels_to_float(s.images.data() + i * px, image.data_ptr<float>(), px);
  Tensor label = empty({}, kInt64);
  *label.data_ptr<int64_t>() = s.labels[static_cast<size_t>(i)];
  return {image, label};
}

IPUML_INLINE data::Example MnistDataset::get_batch(std::span<const int64_t> indices) const {
  const MnistSplit& s = *split_;
  const int64_t b = static_cast<int64_t>(indices.size());
  const int64_t px = s.rows * s.cols;
  Tensor images = empty({b, 1, s.rows, s.cols}, kFloat32);
  Tensor labels = empty({b}, kInt64);
  float* img = images.data_ptr<float>();
  int64_t* lab = labels.data_ptr<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[static_cast<size_t>(r)];
    check_index(i, size(), "MnistDataset::get_batch");
    detail::mnist_pixels_to_float(s.images.data() + i * px, img + r * px, px);
    lab[r] = s.labels[static_cast<size_t>(i)];
  }
  return {images, labels};
}

}  // namespace ipuml::datasets
