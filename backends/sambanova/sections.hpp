// SambaFlow's sections on an emulated RDU: the step's graph cut into sections (o0: one operator
// each; o1: consecutive operators fused while the tiles hold them), each section's operators
// placed spatially on the PCUs and PMUs of the tiles the program holds and pipelined over the
// batch; a section runs to completion before the next is loaded, and the tensors between
// sections go through DDR. A section's time is its slowest pipeline stage (with the pipeline's
// fill) or its DDR traffic, whichever is longer, plus loading it (docs/targets-sambanova.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/backends/sambanova/rdu_model.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>

namespace ipuml::sambanova {

struct SectionOp {
  int64_t node = 0;
  std::string op;
  double flops = 0;
  double work_cycles = 0;     // the whole batch on one PCU
  double resident_bytes = 0;  // weights it keeps in PMUs while its section runs
  int64_t stream_pmus = 0;    // PMU buffers of the operands that flow through it
  int64_t pcus = 0, pmus = 0;
  int64_t passes = 1;  // passes over its streamed inputs when its weights exceed its PMUs
  double stage_cycles = 0;
};

struct Section {
  std::string label;  // its first operator and how many more it holds
  std::vector<SectionOp> ops;
  int64_t pcus = 0, pmus = 0;
  double flops = 0;
  double resident_bytes = 0;
  double ddr_read_bytes = 0, ddr_write_bytes = 0;
  double compute_cycles = 0, ddr_cycles = 0, switch_cycles = 0, cycles = 0;
  int64_t slowest_op = -1;  // index into ops
  std::string bound;        // "compute", "DDR" or "switch": what sets its time
};

struct SectionPlan {
  std::string target;
  Optimization optimization = Optimization::O1;
  int64_t num_tiles = 0, samples = 0;
  int64_t pcus_total = 0, pmus_total = 0;
  std::vector<Section> sections;
  double flops = 0;
  double step_cycles = 0;
  double state_bytes = 0;     // weights and optimizer state, in DDR throughout
  double ddr_peak_bytes = 0;  // states plus the most that sections keep in DDR at once
  double ddr_capacity_bytes = 0;
  double ddr_bytes_moved = 0;
  int64_t slowest = -1;  // the section that takes longest
  bool fits = false;
  std::string message;  // when it does not fit: what, where, and what would help
};

// Cuts the step `g` into sections for one instance on `model`'s tiles. `extra_state_bytes` is
// state kept in DDR besides g's own (a separate weight-update program's optimizer state).
SectionPlan plan_sections(const ir::Graph& g, const RduModel& model, double extra_state_bytes = 0);

// The sections, the slowest first, as sntilestat and SambaTune's section report show them.
std::string describe(const SectionPlan& p, size_t max_rows = 12);
// The plan as JSON (ipuml.sections/1): the report's sections.json and a PEF's plan.
std::string sections_json(const SectionPlan& p);

}  // namespace ipuml::sambanova

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/sambanova/sections_impl.hpp>
#endif
