// LibTorch compatibility: `#include <ipuml/libtorch.hpp>` where LibTorch code has
// `#include <torch/torch.h>`, then `torch::` -> `ipuml::` (docs/libtorch.md lists what differs).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <ipuml/ipuml.hpp>
#include <ipuml/datasets/mnist_dataset.hpp>

namespace ipuml::libtorch_detail {
// What AT_ASSERT and TORCH_CHECK throw: the macro, the condition as written, where it is, and
// the caller's message parts when there are any.
template <typename... Args>
[[noreturn]] void check_failed(const char* macro, const char* condition, const char* file, int line,
                               const Args&... message) {
  if constexpr (sizeof...(message) == 0)
    fail(macro, "(", condition, ") failed at ", file, ":", line);
  else
    fail(macro, "(", condition, ") failed at ", file, ":", line, ": ", message...);
}
}  // namespace ipuml::libtorch_detail

// LibTorch's checks, defined only where nothing defined them first (a program that also
// includes LibTorch keeps LibTorch's). Both throw ipuml::Error.
#ifndef AT_ASSERT
#define AT_ASSERT(cond, ...)                                                       \
  do {                                                                             \
    if (!(cond))                                                                   \
      ::ipuml::libtorch_detail::check_failed("AT_ASSERT", #cond, __FILE__,         \
                                             __LINE__ __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)
#endif
#ifndef TORCH_CHECK
#define TORCH_CHECK(cond, ...)                                                     \
  do {                                                                             \
    if (!(cond))                                                                   \
      ::ipuml::libtorch_detail::check_failed("TORCH_CHECK", #cond, __FILE__,       \
                                             __LINE__ __VA_OPT__(, ) __VA_ARGS__); \
  } while (0)
#endif

// LibTorch code writes `Reduction::Sum` unqualified (pytorch/examples' mnist.cpp does), which
// <torch/torch.h> makes visible at global scope; this header does the same for ipuml's.
using ipuml::Reduction;
