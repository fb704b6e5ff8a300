// Test support: the MNIST directory of the data cache, or an empty string after a WARN saying
// why the test skips (scripts/fetch-data.sh mnist fills the cache).
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/datasets/mnist.hpp>

namespace ipuml::testing {

inline std::string cached_mnist_dir() {
  try {
    return ipuml::datasets::find_mnist_dir();
  } catch (const ipuml::Error& e) {
    WARN("MNIST not in the data cache, skipping (" << e.what() << ")");
    return {};
  }
}

}  // namespace ipuml::testing
