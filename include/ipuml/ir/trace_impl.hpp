// Bodies of the tracer (compiled once in compiled mode).
#pragma once

#include <atomic>

#include <ipuml/ir/trace.hpp>

namespace ipuml::ir {

namespace trace_detail {
inline Tracer*& current_tracer() {
  static thread_local Tracer* t = nullptr;
  return t;
}
inline int& current_placement() {
  static thread_local int ipu = 0;
  return ipu;
}
inline uint64_t next_trace_id() {
  static std::atomic<uint64_t> n{1};
  return n++;
}
}  // namespace trace_detail

IPUML_INLINE Tracer::Tracer()
    : prev_(trace_detail::current_tracer()),
      prev_placement_(trace_detail::current_placement()),
      id_(trace_detail::next_trace_id()) {
  trace_detail::current_tracer() = this;
  trace_detail::current_placement() = 0;  // every trace starts on IPU 0
}

IPUML_INLINE Tracer::~Tracer() {
  if (!finished_) {
    for (auto& s : saved_) {
      s.impl->value = s.value;
      s.impl->trace_id = s.trace_id;
      if (s.grad_saved) s.impl->grad = s.grad;
    }
    if (trace_detail::current_tracer() == this) trace_detail::current_tracer() = prev_;
    trace_detail::current_placement() = prev_placement_;
  }
}

IPUML_INLINE Tracer* Tracer::current() { return trace_detail::current_tracer(); }

IPUML_INLINE bool is_tracing() { return Tracer::current() != nullptr; }

IPUML_INLINE Tensor Tracer::symbolic(int64_t v) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = graph_.values[v].meta.shape;
  impl->strides = contiguous_strides(impl->shape);
  impl->dtype = graph_.values[v].meta.dtype;
  impl->value = v;
  impl->trace_id = id_;
  return Tensor(std::move(impl));
}

IPUML_INLINE Tensor Tracer::input(const TensorMeta& meta, const std::string& name) {
  IPUML_CHECK(!finished_, "Tracer::input: the trace is finished");
  Value v{meta, ValueKind::Input, -1, 0,
          name.empty() ? "input" + std::to_string(graph_.inputs.size()) : name};
  const int64_t id = graph_.add_value(std::move(v));
  graph_.inputs.push_back(id);
  return symbolic(id);
}

IPUML_INLINE Tensor Tracer::input(const Tensor& example, const std::string& name) {
  return input(TensorMeta{example.shape(), example.dtype()}, name);
}

IPUML_INLINE void Tracer::name_state(const Tensor& t, const std::string& name) {
  names_[t.impl()] = name;
}

IPUML_INLINE void Tracer::set_available_memory(const Tensor& t, double proportion) {
  IPUML_CHECK(t.defined() && t.impl()->trace_id == id_ && t.impl()->value >= 0 &&
                  graph_.values[static_cast<size_t>(t.impl()->value)].kind == ValueKind::Op,
              "set_available_memory: expected the result of an op recorded in this trace");
  const auto& v = graph_.values[static_cast<size_t>(t.impl()->value)];
  graph_.nodes[static_cast<size_t>(v.node)].available_memory_proportion = proportion;
}

IPUML_INLINE Tensor set_available_memory(const Tensor& t, double proportion) {
  IPUML_CHECK(proportion > 0 && proportion <= 1,
              "set_available_memory: the proportion must be in (0, 1], got ", proportion);
  if (Tracer* tr = Tracer::current()) tr->set_available_memory(t, proportion);
  return t;
}

IPUML_INLINE void Tracer::mark_checkpoint(const Tensor& t) {
  IPUML_CHECK(t.defined(), "recomputation_checkpoint: got an undefined tensor");
  if (t.impl()->trace_id != id_ || t.impl()->value < 0) return;  // a constant: always kept
  const int64_t v = t.impl()->value;
  if (graph_.values[static_cast<size_t>(v)].kind != ValueKind::Op) return;  // input or state
  graph_.checkpoints.push_back(v);
}

IPUML_INLINE Tensor recomputation_checkpoint(const Tensor& t) {
  if (Tracer* tr = Tracer::current()) tr->mark_checkpoint(t);
  return t;
}

IPUML_INLINE int64_t Tracer::value_of(const Tensor& t) {
  IPUML_CHECK(t.defined(), "tracing: an op received an undefined tensor");
  TensorImpl* impl = t.impl();
  if (impl->trace_id == id_ && impl->value >= 0) return impl->value;
  IPUML_CHECK(impl->storage != nullptr,
              "tracing: a symbolic tensor from another (finished) trace was used; tensors "
              "recorded while tracing cannot outlive their trace");
  // An eager tensor: capture it as state, bound to this very tensor so runs see its current
  // values and write updates back to it. Non-contiguous views are captured as a copy.
  Tensor bound = t;
  if (!t.is_contiguous()) {
    NoTraceGuard eager;
    bound = t.contiguous();
  }
  std::string name;
  if (auto it = names_.find(impl); it != names_.end()) name = it->second;
  if (name.empty()) name = "state" + std::to_string(graph_.states.size());
  const int64_t v = graph_.add_value({{t.shape(), t.dtype()}, ValueKind::State, -1, 0, name});
  graph_.states.push_back(v);
  state_tensors_.push_back(bound);
  auto it = touched_.find(impl);
  if (it == touched_.end()) {
    touched_[impl] = saved_.size();
    saved_.push_back({t.impl_ptr(), impl->value, impl->trace_id, nullptr, false, v});
  } else {
    saved_[it->second].state_value = v;
  }
  impl->value = v;
  impl->trace_id = id_;
  return v;
}

IPUML_INLINE std::vector<Tensor> Tracer::record(OpKind kind, const Attrs& attrs,
                                                const std::vector<Tensor>& inputs,
                                                const std::vector<TensorMeta>& metas) {
  IPUML_CHECK(!finished_, "tracing: the trace is finished");
  Node n{kind, attrs, {}, {}, trace_detail::current_placement(), 0.0};
  for (auto& t : inputs) n.inputs.push_back(value_of(t));
  const auto node_id = static_cast<int64_t>(graph_.nodes.size());
  std::vector<Tensor> out;
  for (size_t i = 0; i < metas.size(); ++i) {
    const int64_t v = graph_.add_value({metas[i], ValueKind::Op, node_id, static_cast<int>(i), ""});
    n.outputs.push_back(v);
    out.push_back(symbolic(v));
  }
  graph_.nodes.push_back(std::move(n));
  return out;
}

IPUML_INLINE void Tracer::rebind(const Tensor& target, const Tensor& value) {
  // A traced view is a copy in the graph, and a strided eager view is captured as a copy: an
  // update of either would not reach the base tensor, so refuse rather than lose it.
  IPUML_CHECK(target.is_symbolic() ? !target.impl()->is_view : target.is_contiguous(),
              "tracing: in-place update of a view is not supported; update the base tensor");
  value_of(target);  // captures eager targets as state first
  target.impl()->value = value_of(value);
  target.impl()->trace_id = id_;
}

IPUML_INLINE void Tracer::remember_grad(TensorImpl* impl) {
  auto it = touched_.find(impl);
  if (it == touched_.end()) {
    // A leaf that was never read as a value still gets its grad restored.
    touched_[impl] = saved_.size();
    std::shared_ptr<TensorImpl> owner;
    for (auto& s : state_tensors_)
      if (s.impl() == impl) owner = s.impl_ptr();
    saved_.push_back({owner, impl->value, impl->trace_id, impl->grad, true, -1});
    if (!owner) saved_.back().impl = std::shared_ptr<TensorImpl>(impl, [](TensorImpl*) {});
    return;
  }
  auto& s = saved_[it->second];
  if (!s.grad_saved) {
    s.grad = impl->grad;
    s.grad_saved = true;
  }
}

IPUML_INLINE Trace Tracer::finish(const std::vector<Tensor>& outputs) {
  IPUML_CHECK(!finished_, "Tracer::finish called twice");
  for (auto& t : outputs) graph_.outputs.push_back(value_of(t));
  for (auto& s : saved_) {
    if (s.state_value < 0) continue;
    if (s.impl->trace_id == id_ && s.impl->value != s.state_value)
      graph_.updates.push_back({s.state_value, s.impl->value});
  }
  for (auto& s : saved_) {
    s.impl->value = s.value;
    s.impl->trace_id = s.trace_id;
    if (s.grad_saved) s.impl->grad = s.grad;
  }
  finished_ = true;
  // Ops after finish() run eagerly again (or into an enclosing trace).
  if (trace_detail::current_tracer() == this) trace_detail::current_tracer() = prev_;
  trace_detail::current_placement() = prev_placement_;
  return Trace{std::move(graph_), std::move(state_tensors_)};
}

IPUML_INLINE PlacementGuard::PlacementGuard(int ipu) : prev_(trace_detail::current_placement()) {
  IPUML_CHECK(ipu >= 0, "PlacementGuard: ipu must be non-negative, got ", ipu);
  trace_detail::current_placement() = ipu;
}
IPUML_INLINE PlacementGuard::~PlacementGuard() { trace_detail::current_placement() = prev_; }
IPUML_INLINE int PlacementGuard::current() { return trace_detail::current_placement(); }
IPUML_INLINE void PlacementGuard::set_current(int ipu) {
  IPUML_CHECK(ipu >= 0, "BeginBlock: ipu_id must be non-negative, got ", ipu);
  trace_detail::current_placement() = ipu;
}

IPUML_INLINE NoTraceGuard::NoTraceGuard() : saved_(trace_detail::current_tracer()) {
  trace_detail::current_tracer() = nullptr;
}
IPUML_INLINE NoTraceGuard::~NoTraceGuard() { trace_detail::current_tracer() = saved_; }

}  // namespace ipuml::ir
