// Tracing: while a Tracer is active on this thread, ops record nodes into its ir::Graph instead
// of computing. Eager tensors an op touches become State values bound to those tensors.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::ir {

// A captured step: the graph and the eager tensors its State values are bound to.
struct Trace {
  Graph graph;
  std::vector<Tensor> states;  // parallel to graph.states
};

class Tracer {
 public:
  Tracer();
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  static Tracer* current();

  // Declares a streamed input shaped like `example`; returns the symbolic tensor to compute with.
  Tensor input(const Tensor& example, const std::string& name = "");
  Tensor input(const TensorMeta& meta, const std::string& name = "");
  // Names state tensors (e.g. "layer1.conv.weight") for reports; unnamed ones get "state<i>".
  void name_state(const Tensor& t, const std::string& name);

  // Ends the trace: `outputs` become the graph's outputs; in-place updates of state tensors
  // become StateUpdates; every touched eager tensor is restored.
  Trace finish(const std::vector<Tensor>& outputs);

  // Used by the dispatcher.
  std::vector<Tensor> record(OpKind kind, const Attrs& attrs, const std::vector<Tensor>& inputs,
                             const std::vector<TensorMeta>& metas);
  // In-place op while tracing: `target` now stands for `value`.
  void rebind(const Tensor& target, const Tensor& value);
  // The op that produced `t` may use `proportion` of each tile's memory for its temporaries.
  void set_available_memory(const Tensor& t, double proportion);
  // Marks t (the result of an op of this trace) as a recomputation checkpoint.
  void mark_checkpoint(const Tensor& t);
  // Grad of a state leaf set while tracing (restored by finish).
  void remember_grad(TensorImpl* impl);
  uint64_t id() const { return id_; }
  // Nodes recorded so far (marks where a phase of the step, such as its update, begins).
  size_t num_nodes() const { return graph_.nodes.size(); }

 private:
  int64_t value_of(const Tensor& t);
  Tensor symbolic(int64_t value);

  struct Saved {
    std::shared_ptr<TensorImpl> impl;
    int64_t value;
    uint64_t trace_id;
    std::shared_ptr<TensorImpl> grad;
    bool grad_saved = false;
    int64_t state_value = -1;  // the State value it was captured as, or -1
  };
  Graph graph_;
  std::vector<Tensor> state_tensors_;
  std::unordered_map<TensorImpl*, size_t> touched_;  // eager impl -> index in saved_
  std::vector<Saved> saved_;
  std::unordered_map<TensorImpl*, std::string> names_;
  Tracer* prev_ = nullptr;
  int prev_placement_ = 0;
  uint64_t id_;
  bool finished_ = false;
};

// Suspends tracing on this thread for the guard's lifetime (ops run eagerly again), e.g. to
// create optimizer state that must persist across steps.
class NoTraceGuard {
 public:
  NoTraceGuard();
  ~NoTraceGuard();
  NoTraceGuard(const NoTraceGuard&) = delete;
  NoTraceGuard& operator=(const NoTraceGuard&) = delete;

 private:
  Tracer* saved_;
};

bool is_tracing();

// PopTorch's poptorch.set_available_memory(t, p): the op producing `t` (while tracing) may use
// proportion p of each tile's memory for its temporaries, overriding the program's setting.
// Eager code has no tiles, so outside tracing it only checks p. Returns t.
Tensor set_available_memory(const Tensor& t, double proportion);

// PopTorch's poptorch.recomputationCheckpoint(t): in a traced training step, the backward pass
// keeps only checkpointed activations (and inputs and state) and recomputes everything else it
// needs from them, trading cycles for tile memory (ir/recompute.hpp). Eager code keeps every
// activation, so outside tracing it does nothing. Returns t.
Tensor recomputation_checkpoint(const Tensor& t);

// Places the ops recorded while it lives on IPU `ipu` (PopTorch's BeginBlock / Block(ipu_id)).
class PlacementGuard {
 public:
  explicit PlacementGuard(int ipu);
  ~PlacementGuard();
  PlacementGuard(const PlacementGuard&) = delete;
  PlacementGuard& operator=(const PlacementGuard&) = delete;
  static int current();
  // Switches placement without restoring it (BeginBlock: "from this layer on, IPU k").
  static void set_current(int ipu);

 private:
  int prev_;
};

}  // namespace ipuml::ir

namespace ipuml {
using ir::recomputation_checkpoint;
using ir::set_available_memory;
}  // namespace ipuml

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/ir/trace_impl.hpp>
#endif
