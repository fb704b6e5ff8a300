// Runs a captured ir::Graph on the CPU with buffers planned once: activations live in one arena
// whose offsets come from liveness analysis, so repeated runs allocate only their outputs.
#pragma once

#include <memory>
#include <vector>

#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::cpu {

// Offsets for every Op value in one arena (first-fit reuse of dead values' blocks).
struct MemoryPlan {
  std::vector<int64_t> offset;  // per value: byte offset in the arena, -1 if not in the arena
  size_t arena_bytes = 0;
  size_t naive_bytes = 0;  // what it would take without reuse (for reports)
  // Per node: whether it is a Reshape whose output is a view of its input's bytes (see
  // plan_memory's `views`); such a node runs no kernel. Empty when the plan made no views.
  std::vector<bool> view;
};
// `in_place` (per node, or empty): the value whose block the node's output takes over, -1 for
// none: the node computes its output in place of that input, which nothing reads after it (a
// fused batch norm over its convolution's output, an Add onto one of its operands).
// `views`: a Reshape of a computed value or of an input takes its input's bytes instead of a copy
// (unless its output is an update's new value), and the block they share lives until the last
// reader of either; nothing writes a value's block after its producer, so the view stays valid.
// `runs_at` (per node, or empty): the node each node runs inside, itself for most. A node run
// inside another reads its inputs when that one runs and keeps no output of its own.
MemoryPlan plan_memory(const ir::Graph& g, size_t alignment = 64,
                       const std::vector<int64_t>& in_place = {}, bool views = false,
                       const std::vector<int64_t>& runs_at = {});

// Per node of g: the BatchNormInference node that runs fused into it (a Conv), -1 for none, -2
// for a batch norm fused into its convolution (no fusions under IPUML_CPU_FUSION=0).
std::vector<int64_t> fuse_conv_batch_norm(const ir::Graph& g);

// log_softmax's input gradient as autograd records it, dx = g - exp(y) * sum(g, last dim,
// keepdim), runs as one op (run_log_softmax_backward) at the Sub when nothing else reads the
// exponentials, the sums or their product.
struct LogSoftmaxBackwardFusion {
  std::vector<int64_t> exp_node;  // per node: for such a Sub, the Exp node (reading y); else -1
  std::vector<int64_t> runs_at;   // per node: the Sub its Exp, Sum and Mul run inside; else itself
};
LogSoftmaxBackwardFusion fuse_log_softmax_backward(const ir::Graph& g);

// An Add of an IndexAdd's result (index_add onto zeros: autograd's gradient of an embedding or
// of a slice) and of a value only the Add reads runs as run_index_add_onto at the Add: the
// IndexAdd's contributions go into the other operand's block, which the Add's output takes over,
// instead of a zero-filled tensor and a pass over both. Chains of them (a gradient made of
// slices' gradients) fuse link by link.
struct IndexAddFusion {
  std::vector<int64_t> index_add_node;  // per node: for such an Add, the IndexAdd; else -1
  std::vector<int64_t> onto;            // per node: for such an Add, the other operand; else -1
  std::vector<int64_t> runs_at;         // per node: the Add an IndexAdd runs inside; else itself
};
IndexAddFusion fuse_index_add_into_add(const ir::Graph& g);

// A MaxPool that alone reads a Conv's output runs with it as one op (run_conv_max_pool) at the
// MaxPool: each image is pooled from the core's cache as it is computed, and the convolution's
// output is neither written nor given memory.
struct ConvMaxPoolFusion {
  std::vector<int64_t> conv_node;  // per node: for such a MaxPool, the Conv; else -1
  std::vector<int64_t> runs_at;    // per node: the MaxPool a Conv runs inside; else itself
};
ConvMaxPoolFusion fuse_conv_max_pool(const ir::Graph& g);

// g with each Conv whose batch norm waits for a residual computed after it (a downsampling
// block's shortcut) moved to run right before that batch norm, where the pair can fuse. Only
// the order of independent nodes changes, so the results do not; values keep their indices.
// The graph as it was under IPUML_CPU_FUSION=0.
ir::Graph sink_convs_to_batch_norms(ir::Graph g);

// A Conv whose only reader is a BatchNormInference runs with it as one op when nothing in
// between can see the difference (see fuse_conv_batch_norm): the same bits, one pass less over
// the output; a Reshape is a view of its input's bytes (plan_memory's `views`); log_softmax's
// gradient makes one pass instead of four (fuse_log_softmax_backward); an index_add's result
// lands in the operand it is added to (fuse_index_add_into_add); a max pooling takes each image of
// its convolution's output from cache (fuse_conv_max_pool). IPUML_CPU_FUSION=0 in the
// environment turns them all off.
class GraphExecutor {
 public:
  explicit GraphExecutor(ir::Graph graph);

  // `inputs` feed graph.inputs in order; `states` are the tensors graph.states are bound to
  // (read at the start, overwritten by the step's updates at the end). `step` varies random ops.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& states,
                          uint64_t step = 0);

  const ir::Graph& graph() const { return graph_; }
  const MemoryPlan& plan() const { return plan_; }

 private:
  ir::Graph graph_;             // as given, with sink_convs_to_batch_norms' order
  std::vector<int64_t> fused_;  // fuse_conv_batch_norm(graph_)
  LogSoftmaxBackwardFusion log_softmax_grads_;
  IndexAddFusion index_adds_;
  ConvMaxPoolFusion conv_pools_;
  std::vector<int64_t> runs_at_;  // per node: the node it runs inside (the fusions), or itself
  MemoryPlan plan_;
  std::unique_ptr<Storage> arena_;
  std::vector<void*> ptr_;  // per value, filled each run
  // Per update: whether its new value is computed straight into the state's own buffer (no
  // node reads the old state after the value's producer, nothing else reads the state at the
  // end), which saves copying every weight and optimizer state at the end of a step.
  std::vector<bool> in_place_;
  // The states a run writes (indices into graph.states): only their versions change, so
  // replicas sharing read-only states (the weights) may run at the same time.
  std::vector<size_t> updated_states_;

  std::vector<std::vector<ConstBuffer>> in_bufs_;
  std::vector<std::vector<MutableBuffer>> out_bufs_;
};

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/graph_executor_impl.hpp>
#endif
