// Pipelined execution on a wafer: the step's kernels (a layer's matrix op and the ops that follow
// it), each on a region of PEs of its own sized to its work and its memory, samples flowing from
// region to region; the step rate is the slowest region's (docs/targets-cerebras.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/backends/cerebras/target.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>

namespace ipuml::cerebras {

struct PipelineKernel {
  std::string label;  // its first op and how many ops it holds
  int64_t first_node = 0, nodes = 0;
  double flops = 0;             // per step, the optimizer's included
  double work_cycles = 0;       // forward and backward, per sample, on one PE
  double update_cycles = 0;     // the optimizer's, per step, on one PE
  double state_bytes = 0;       // weights, optimizer state and gradients, resident
  double activation_bytes = 0;  // activations in flight until their backward reads them
  double fabric_bytes = 0;      // per sample, arriving from other regions
  int64_t min_pes = 0;          // PEs its bytes need
  int64_t pes = 0, width = 0, height = 0;
  double cycles_per_sample = 0;
};

struct PipelineLayout {
  std::vector<PipelineKernel> kernels;
  int64_t samples = 0;
  int64_t pes_total = 0, pes_needed = 0, pes_used = 0;
  bool fits = false;
  int64_t slowest = -1;
  double sample_cycles = 0;  // the slowest region's cycles per sample: the pipeline's rate
  double fill_cycles = 0;    // the first sample's trip through every region, and back
  double update_cycles = 0;  // every region updating its weights at once, after the step
  double step_cycles = 0;    // samples x sample_cycles + fill + update
  double flops = 0;
  double state_bytes = 0, activation_bytes = 0;
  std::string message;  // when it does not fit: how much, which layers, and what would help
};

// Lays out the step `g` of `samples` samples (the batch one CS-2 runs) for pipelined execution
// on `t`'s wafer. `extra_state_bytes` is state kept on the wafer besides g's own (a separate
// weight-update program's optimizer state), spread over the kernels as their weights are.
PipelineLayout plan_layer_pipeline(const ir::Graph& g, const Target& t, int64_t samples,
                                   double extra_state_bytes = 0);

// One line per region, the slowest marked, for reports and --validate_only.
std::string describe(const PipelineLayout& l, const Target& t, size_t max_rows = 12);

}  // namespace ipuml::cerebras

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cerebras/layer_pipeline_impl.hpp>
#endif
