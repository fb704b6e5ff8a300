// libFuzzer harness: the MNIST IDX reader (plain or gzip) on an images and a labels file cut
// from one input (its first two bytes say where). Every input must load or throw ipuml::Error.
#include <ipuml/datasets/mnist.hpp>

#include <cstddef>
#include <cstdint>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t body = size - 2;
  const size_t cut = (size_t{data[0]} | size_t{data[1]} << 8) % (body + 1);
  const std::string images = ipuml::fuzz::write_file("images", data + 2, cut);
  const std::string labels = ipuml::fuzz::write_file("labels", data + 2 + cut, body - cut);
  try {
    const auto split = ipuml::datasets::read_mnist(images, labels);
    // What a loaded split promises its users.
    if (split.images.size() != static_cast<size_t>(split.count * split.rows * split.cols) ||
        split.labels.size() != static_cast<size_t>(split.count))
      __builtin_trap();
  } catch (const ipuml::Error&) {
  }
  return 0;
}
