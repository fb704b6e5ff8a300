// data::Example: one sample (or one stacked batch) as a data tensor and a target tensor.
// The unit datasets return, transforms rewrite and the DataLoader hands to a training loop.
#pragma once

#include <ipuml/tensor/tensor.hpp>

namespace ipuml::data {

struct Example {
  Tensor data;
  Tensor target;
};

}  // namespace ipuml::data
