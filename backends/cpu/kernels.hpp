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

// Conv, then BatchNormInference of the convolution's output, as one op: the batch norm's pass
// runs on each piece of the output as the convolution finishes it, while it is in cache (the CPU
// graph executor fuses the pair this way). conv_in and bn_in are the two ops' inputs (bn_in[0],
// the convolution's output, is not read), `out` the batch norm's output, which must not overlap
// any input. The same bits as the two ops run one after the other. Float32 only.
void run_conv_batch_norm(const ir::Attrs& conv, const std::vector<ConstBuffer>& conv_in,
                         const ir::Attrs& bn, const std::vector<ConstBuffer>& bn_in,
                         const MutableBuffer& out);

// Conv, then MaxPool of the convolution's output, as one op: each image is pooled as soon as the
// convolution finishes it, from the core's cache, and the convolution's output is never written
// out (the CPU graph executor fuses a max pooling that alone reads a convolution's output this
// way). conv_in are the convolution's inputs, `out` the pooling's (values, int64 indices), apart
// from every input. The same bits as the two ops run one after the other. Float32 only.
void run_conv_max_pool(const ir::Attrs& conv, const std::vector<ConstBuffer>& conv_in,
                       const ir::Attrs& pool, const std::vector<MutableBuffer>& out);

// dx = g - exp(y) * sum(g, last dim): the gradient g of log_softmax's output y (over its last
// dim) taken back to its input, as one op; the CPU graph executor runs autograd's Sum, Exp, Mul
// and Sub this way. The same bits as those four ops. Float32, all three of y's shape, dx apart
// from y and g.
void run_log_softmax_backward(const ConstBuffer& y, const ConstBuffer& g, const MutableBuffer& dx);

// out += index_add(idx, src) (IndexAdd with `attrs`, a result of out's shape) in place: out
// holds the other operand of an Add of the two; the CPU graph executor runs that pair this way.
// Every element the index reaches gets the bits of the Add of the two ops; the others keep theirs
// (a -0 stays -0 where the Add would give +0). Float32; src must not overlap out.
void run_index_add_onto(const ir::Attrs& attrs, const ConstBuffer& idx, const ConstBuffer& src,
                        const MutableBuffer& out);

// Whether this backend implements `kind` (the CPU backend implements the whole catalogue).
inline bool supports(ir::OpKind) { return true; }

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/kernels_impl.hpp>
#endif
