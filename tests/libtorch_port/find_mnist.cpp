// Prints the data cache's MNIST directory as the library finds it (datasets::find_mnist_dir),
// for run_mnist.sh; exits 77 (ctest's skip) with the library's message when it is not there.
#include <iostream>

#include <ipuml/datasets/mnist.hpp>
#include <ipuml/ipuml.hpp>

int main() {
  try {
    std::cout << ipuml::datasets::find_mnist_dir() << "\n";
    return 0;
  } catch (const ipuml::Error& e) {
    std::cerr << e.what() << "\n";
    return 77;
  }
}
