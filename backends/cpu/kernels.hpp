// The CPU backend's kernel entry point: runs one primitive op of the catalogue on contiguous
// row-major host buffers. Eager mode and the CPU graph executor both call it.
#pragma once

#include <cstdint>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/ir/attrs.hpp>
#include <ipuml/ir/op_catalogue.hpp>
#include <ipuml/ir/op_kind.hpp>

namespace ipuml::cpu {

struct ConstBuffer {
  const void* data;
  ir::TensorMeta meta;
};

struct MutableBuffer {
  void* data;
  ir::TensorMeta meta;
};

struct KernelContext {
  // Added to random ops' streams so each run of a compiled graph draws fresh numbers.
  uint64_t rng_step = 0;
};

// Runs `kind` with `attrs`. Inputs and outputs are contiguous; outputs are allocated with the
// metadata ir::infer returned. For elementwise ops out[0] may alias in[0] (in-place updates).
// Results are bit-identical whatever the number of threads.
void run_kernel(ir::OpKind kind, const ir::Attrs& attrs, const std::vector<ConstBuffer>& in,
                const std::vector<MutableBuffer>& out, const KernelContext& ctx = {});

// Whether this backend implements `kind` (the CPU backend implements the whole catalogue).
inline bool supports(ir::OpKind) { return true; }

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/kernels_impl.hpp>
#endif
