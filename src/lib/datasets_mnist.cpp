// Compiled-mode home of the MNIST IDX reader's bodies (ipuml::ipuml).
#include <ipuml/datasets/mnist.hpp>
#include <ipuml/datasets/mnist_impl.hpp>
