// The real image sets the vision example trains on: directories of MNIST-layout IDX files
// (MNIST and Fashion-MNIST from scripts/fetch-data.sh, or any such directory), with statistics.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/datasets/mnist.hpp>

namespace ipuml::datasets {

struct ImageSet {
  std::string name;  // "mnist", "fashion-mnist" or the directory given
  std::string dir;
  std::vector<std::string> class_names;
  MnistSplit train, test;
  // Pixel mean and standard deviation of the training split, after scaling to [0, 1].
  double mean = 0, stddev = 1;
};

// Fashion-MNIST's classes, in label order.
inline const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                 "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                 "Bag",         "Ankle boot"};
  return names;
}

// "mnist" or "fashion-mnist" (from the data cache), or a directory holding train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each may be .gz).
// A missing set gives an error that says how to fetch it.
ImageSet load_image_set(const std::string& name_or_dir);

// Mean and standard deviation of a split's pixels scaled to [0, 1].
std::pair<double, double> pixel_statistics(const MnistSplit& split);

}  // namespace ipuml::datasets

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/datasets/image_sets_impl.hpp>
#endif
