// Test support: IPU compile options without the progress line, for tests that compile plans.
#pragma once

#include <ipuml/backends/ipu/compile.hpp>

namespace ipuml::testing {

inline ipu::CompileOptions quiet() {
  ipu::CompileOptions o;
  o.progress = false;
  return o;
}

}  // namespace ipuml::testing
