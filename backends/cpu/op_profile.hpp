// Per-op wall time of the CPU graph executor (off by default): where a traced step spends its
// time, summed by op kind (convolutions also by kernel and stride), for benchmarks and tuning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/ir/attrs.hpp>
#include <ipuml/ir/op_kind.hpp>

namespace ipuml::cpu {

struct OpProfileRow {
  std::string name;  // "Conv k=3x3 s=1", "Add", ...
  double seconds = 0;
  int64_t calls = 0;
};

// While on, every node the CPU graph executor runs adds its wall time to the profile. Timing
// reads the clock twice per node, so it stays off unless asked for.
void set_op_profiling(bool on);
bool op_profiling();
void reset_op_profile();
// The rows so far, slowest first.
std::vector<OpProfileRow> op_profile();
// Adds one node's time (called by the executor while profiling is on).
void record_op_time(ir::OpKind kind, const ir::Attrs& attrs, double seconds);

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/op_profile_impl.hpp>
#endif
