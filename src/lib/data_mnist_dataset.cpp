// Compiled-mode home of MnistDataset's bodies (ipuml::ipuml).
#include <ipuml/datasets/mnist_dataset.hpp>
#include <ipuml/datasets/mnist_dataset_impl.hpp>
