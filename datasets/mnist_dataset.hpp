// MnistDataset: the IDX files as a data::Dataset of float32 images [1,28,28] in [0,1] and int64
// labels, with whole batches assembled by row copies. Normalise with .map(Normalize(...)).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <ipuml/core/config.hpp>
#include <ipuml/data/dataset.hpp>
#include <ipuml/data/transforms.hpp>
#include <ipuml/datasets/mnist.hpp>

namespace ipuml::datasets {

// The training set's pixel mean and standard deviation (after scaling to [0,1]), as in the
// PyTorch MNIST examples.
inline constexpr double kMnistMean = 0.1307;
inline constexpr double kMnistStd = 0.3081;

class MnistDataset : public data::DatasetBase<MnistDataset> {
 public:
  // Reads the training or test split from `dir` (empty: find_mnist_dir()).
  MnistDataset(const std::string& dir, bool train);
  // Over data already in memory (tests, generated digits).
  explicit MnistDataset(MnistSplit split);

  data::Example get(int64_t i) const;
  // data [B,1,rows,cols] float32, target [B] int64.
  data::Example get_batch(std::span<const int64_t> indices) const;
  int64_t size() const { return split_->count; }

  const MnistSplit& split() const { return *split_; }

 private:
  std::shared_ptr<const MnistSplit> split_;  // shared: loaders and .map() copy the dataset
};

// LibTorch's data::datasets::MNIST(root, MNIST::Mode::kTest) (ipuml::datasets::MNIST, also
// reachable as ipuml::data::datasets::MNIST). `root` holds the four IDX files under their
// original names, as LibTorch's does; size() reads as a count and as LibTorch's optional.
class MNIST : public MnistDataset {
 public:
  enum class Mode { kTrain, kTest };
  explicit MNIST(const std::string& root, Mode mode = Mode::kTrain)
      : MnistDataset(root, mode == Mode::kTrain) {}
  data::DatasetSize size() const { return MnistDataset::size(); }
};

// MnistDataset(dir, train).map(Normalize(kMnistMean, kMnistStd)): what the MNIST example feeds.
inline auto normalized_mnist(const std::string& dir, bool train) {
  return MnistDataset(dir, train).map(data::transforms::Normalize(kMnistMean, kMnistStd));
}

}  // namespace ipuml::datasets

// LibTorch nests the data sets under data:: (torch::data::datasets::MNIST).
namespace ipuml::data {
namespace datasets = ::ipuml::datasets;
}  // namespace ipuml::data

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/mnist_dataset_impl.hpp>
#endif
