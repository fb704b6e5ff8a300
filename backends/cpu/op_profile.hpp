// Per-op wall time of the CPU graph executor (off by default): where a traced step spends its
// time, summed by op kind (convolutions also by kernel and stride), for benchmarks and tuning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/core/parallel.hpp>
#include <ipuml/ir/attrs.hpp>
#include <ipuml/ir/op_kind.hpp>

namespace ipuml::cpu {

struct OpProfileRow {
  std::string name;  // "Conv k=3x3 s=1", "Add", ...
  double seconds = 0;
  int64_t calls = 0;
  // How far the op's partition spreads (parallel.hpp's loop accounting): its work in
  // core-seconds, and its least time with a core for each of the `threads` it ran with, given
  // the pieces each of its parallel loops offers (its time outside them is serial).
  double work = 0;
  double least = 0;
  int threads = 1;
  // The most of the ideal speed-up on `threads` cores that the pieces allow.
  double bound() const { return least > 0 ? work / threads / least : 1.0; }
};

// While on, every node the CPU graph executor runs adds its wall time to the profile, and its
// parallel loops their pieces and times. Timing reads the clock twice per node and loop, so it
// stays off unless asked for.
void set_op_profiling(bool on);
bool op_profiling();
void reset_op_profile();
// The rows so far, slowest first.
std::vector<OpProfileRow> op_profile();
// Adds one node's time and the loops it ran since the node began (called by the executor while
// profiling is on; it calls detail::take_loop_totals() as the node begins).
void record_op_time(ir::OpKind kind, const ir::Attrs& attrs, double seconds);
// The same under a row name of the caller's (ops the executor runs fused).
void record_op_time(const std::string& name, double seconds);

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/op_profile_impl.hpp>
#endif
