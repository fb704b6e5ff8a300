// The execution trace of a compiled program as Chrome / Perfetto trace-event JSON: BSP
// supersteps per device and unit group in simulated time, or a pipelined program's stages.
#pragma once

#include <cstdint>
#include <string>

#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>

namespace ipuml::emu {

struct TraceOptions {
  std::string program = "program";  // named in the trace's metadata
  // > 0: the program ran pipelined over this many micro-batches (one run_many call), and the
  // trace shows that schedule (backends/emu/schedule.hpp); 0: one step, superstep by superstep.
  int64_t pipelined_micro_batches = 0;
  // Units of a device are drawn as this many rows of consecutive units (PopVision's per-unit
  // execution trace, at a size a trace viewer can show).
  int unit_groups = 8;
};

// The trace-event format's "ph":"X" events, "ts"/"dur" in microseconds of simulated time at
// the target's clock, "pid" the device, "tid" a unit group or a pipeline stage
// (docs/profile-report.md, "trace.json"). The events of a device's "supersteps" row add up to
// its cycles in Plan::cycles, and the last one ends at Plan::cycles.total (one step) or at the
// pipelined schedule's cycles.
std::string make_trace_json(const ir::Graph& g, const Plan& p, const TraceOptions& o = {});

}  // namespace ipuml::emu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/emu/trace_impl.hpp>
#endif
