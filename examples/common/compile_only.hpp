// --compile-only, as Graphcore's examples take it: trace and compile the training step the flags
// describe, print whether it fits and how fast the whole configuration would train, and exit
// without reading data or running a kernel.
#pragma once

#include <iostream>

#include <ipuml/ipuml.hpp>

namespace ipuml::examples {

inline constexpr const char* kCompileOnlyHelp =
    "Trace and compile the training step, print whether it fits and its projected throughput, "
    "and exit without reading data or training";

// A batch of this shape and dtype for compiling and estimating, which need its shape only: one
// row of zeros broadcast to all of them (a host call of ResNet-50 on a POD16 is 16416 images).
inline Tensor batch_shaped(Shape shape, DType dtype) {
  Shape one = shape;
  one.at(0) = 1;
  return expand(zeros(one, dtype), shape);
}

// Estimates `model` for these batches and prints the estimate.
template <typename Model, typename Inputs, typename Targets>
runtime::Estimate print_compile_only(Model& model, const Inputs& inputs, const Targets& targets) {
  runtime::Estimate e = model.estimate(inputs, targets);
  runtime::print_estimate(std::cout, e);
  return e;
}

}  // namespace ipuml::examples
