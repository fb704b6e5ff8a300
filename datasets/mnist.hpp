// MNIST in the IDX format: validated reading of the image and label files (plain or .gz), and
// finding the copy scripts/fetch-data.sh put in the data cache. Raw uint8 buffers, no tensors.
#pragma once

#include <ipuml/core/config.hpp>
#include <ipuml/core/error.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ipuml::datasets {

struct MnistSplit {
  std::vector<uint8_t> images;  // count x rows x cols, row-major, 0 = background, 255 = ink
  std::vector<uint8_t> labels;  // count digits, 0..9
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
};

// The standard file names; each may also be present with a ".gz" suffix.
inline constexpr const char* kMnistTrainImages = "train-images-idx3-ubyte";
inline constexpr const char* kMnistTrainLabels = "train-labels-idx1-ubyte";
inline constexpr const char* kMnistTestImages = "t10k-images-idx3-ubyte";
inline constexpr const char* kMnistTestLabels = "t10k-labels-idx1-ubyte";

// Reads one image file (magic 2051) and its label file (magic 2049), either gzip-compressed
// or not. Throws ipuml::Error naming the file for a missing or malformed file, a length that
// does not match the header, differing counts or a label outside 0..9.
MnistSplit read_mnist(const std::string& images_path, const std::string& labels_path);

// Reads the training (60000) or test (10000) split from `dir`; an empty `dir` means
// find_mnist_dir(). A missing file gives an error that says how to fetch the data.
MnistSplit load_mnist(const std::string& dir, bool train);

// The first directory holding all four MNIST files: `hint` (if non-empty), then
// $IPUML_DATA_DIR/mnist, then $XDG_CACHE_HOME/ipuml/mnist (or ~/.cache/ipuml/mnist). Throws
// an error listing the places searched and how to fetch the data otherwise.
std::string find_mnist_dir(const std::string& hint = "");

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/mnist_impl.hpp>
#endif
