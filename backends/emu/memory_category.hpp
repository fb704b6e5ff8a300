// What a unit's memory holds, by category (docs/memory-model.md). The core charges every
// category; the target model names the fixed ones in its own words (TargetModel::
// memory_category_name: the IPU calls kernel state "vertex_state" and receive code
// "exchange_code"), and reports, profiles and out-of-memory errors use its names.
#pragma once

namespace ipuml::emu {

// The first six are always live.
enum MemCategory : int {
  kState,        // parameters, buffers, optimizer state
  kStream,       // buffers of streamed inputs
  kCode,         // kernel code: each kernel type once per unit that runs it
  kKernelState,  // each kernel instance's fields (MemoryTerms::state_bytes_per_field)
  kReceiveCode,  // the instructions that receive each step's operands
  kStack,        // stacks, resident on every unit
  kActivations,  // op results, from their producer to their last reader
  kTemporaries,  // a step's received operands and partial sums
  kNumCategories
};

// The core's own name of a category ("kernel_state"); "?" outside the enum.
inline const char* mem_category_name(int c) {
  switch (c) {
    case kState:
      return "state";
    case kStream:
      return "stream_buffers";
    case kCode:
      return "code";
    case kKernelState:
      return "kernel_state";
    case kReceiveCode:
      return "receive_code";
    case kStack:
      return "stack";
    case kActivations:
      return "activations";
    case kTemporaries:
      return "temporaries";
    default:
      return "?";
  }
}

}  // namespace ipuml::emu
