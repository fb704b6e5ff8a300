// A traced step run by a CPU graph executor built with its fusions on or off
// (IPUML_CPU_FUSION, read when the executor plans the graph), the environment restored after.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include <ipuml/ipuml.hpp>

namespace ipuml::testing {

inline std::vector<Tensor> run_with_fusion(const ir::Trace& trace, bool on,
                                           const std::vector<Tensor>& in) {
  const char* old = std::getenv("IPUML_CPU_FUSION");
  const std::string saved = old ? old : "";
  ::setenv("IPUML_CPU_FUSION", on ? "1" : "0", 1);
  cpu::GraphExecutor exec(trace.graph);
  if (old)
    ::setenv("IPUML_CPU_FUSION", saved.c_str(), 1);
  else
    ::unsetenv("IPUML_CPU_FUSION");
  return exec.run(in, trace.states);
}

}  // namespace ipuml::testing
