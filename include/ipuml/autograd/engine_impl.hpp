// The backward engine: walks the tape from the roots in dependency order, summing gradients
// that meet at a node, and accumulates into leaves' .grad.
#pragma once

#include <unordered_map>
#include <unordered_set>

#include <ipuml/autograd/node.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml::autograd {

IPUML_INLINE std::vector<Tensor> FunctionNode::apply(const std::vector<Tensor>& g) {
  IPUML_CHECK(fn != nullptr, "backward through ", name,
              " a second time: its saved tensors were "
              "freed after the first backward (pass retain_graph=true to keep them)");
  return fn(g);
}

IPUML_INLINE std::vector<Tensor> AccumulateGrad::apply(const std::vector<Tensor>& g) {
  auto impl = leaf.lock();
  if (!impl || !g[0].defined()) return {};
  // Whether the engine's buffer is the only owner of the incoming gradient and of its memory
  // (a convolution's or a matmul's fresh input gradient, not one shared with another leaf, a
  // view, or a tensor the caller passed in).
  const TensorImpl& in = *g[0].impl();
  const bool sole_owner = g[0].impl_ptr().use_count() == 1 && in.storage != nullptr &&
                          in.storage.use_count() == 1 && !in.is_view && in.offset == 0 &&
                          g[0].is_contiguous();
  Tensor grad = g[0];
  IPUML_CHECK(grad.shape() == impl->shape, "backward: gradient of shape ", shape_str(grad.shape()),
              " for a leaf of shape ", shape_str(impl->shape));
  if (auto* tracer = ir::Tracer::current()) tracer->remember_grad(impl.get());
  if (impl->grad) {
    impl->grad = add(Tensor(impl->grad), grad).impl_ptr();
  } else {
    // A gradient may be shared by several leaves (e.g. both sides of an add); own a copy so
    // that in-place changes to one .grad never show up in another. One that nothing else holds
    // becomes .grad as it is, as in PyTorch, rather than being copied (megabytes per step).
    impl->grad = (ir::is_tracing() || sole_owner ? grad : grad.clone()).detach().impl_ptr();
    impl->grad->is_view = false;
  }
  return {};
}

IPUML_INLINE Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  TensorImpl* impl = t.impl();
  if (impl->grad_fn) return {impl->grad_fn, impl->output_nr};
  if (!impl->requires_grad) return {};
  if (!impl->grad_accumulator) {
    auto acc = std::make_shared<AccumulateGrad>();
    acc->name = "AccumulateGrad";
    acc->leaf = t.impl_ptr();
    acc->output_metas = {{impl->shape, impl->dtype}};
    acc->placement = ir::PlacementGuard::current();
    impl->grad_accumulator = acc;
  }
  return {impl->grad_accumulator, 0};
}

IPUML_INLINE bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!is_grad_enabled()) return false;
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

IPUML_INLINE void attach(const std::vector<Tensor>& outputs, const std::string& name,
                         const std::vector<Tensor>& inputs, BackwardFn fn) {
  if (!needs_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>();
  node->name = name;
  node->fn = std::move(fn);
  node->placement = ir::PlacementGuard::current();
  if (!outputs.empty() && outputs[0].defined()) node->device = outputs[0].device();
  for (auto& t : inputs) node->next.push_back(gradient_edge(t));
  for (size_t i = 0; i < outputs.size(); ++i) {
    TensorImpl* o = outputs[i].impl();
    node->output_metas.push_back({o->shape, o->dtype});
    if (!is_floating(o->dtype)) continue;
    o->grad_fn = node;
    o->output_nr = static_cast<int>(i);
    o->requires_grad = true;
  }
}

IPUML_INLINE void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                               bool retain_graph) {
  IPUML_CHECK(roots.size() == grads.size(), "backward: ", roots.size(), " roots but ", grads.size(),
              " gradients");
  GradModeGuard no_grad(false);
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::vector<std::shared_ptr<Node>> starts;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    IPUML_CHECK(r.defined(), "backward: root ", i, " is undefined");
    Edge e = gradient_edge(r);
    IPUML_CHECK(e.valid(), "backward: tensor ", i,
                " does not require grad and has no grad_fn "
                "(did you forget requires_grad_() on a parameter, or run under NoGradGuard?)");
    Tensor g = grads[i];
    if (!g.defined()) {
      IPUML_CHECK(r.numel() == 1,
                  "backward: grad can be implicitly created only for scalar "
                  "outputs; got shape ",
                  shape_str(r.shape()), " (pass a gradient)");
      g = ones_like(r);
    }
    IPUML_CHECK(g.shape() == r.shape(), "backward: gradient of shape ", shape_str(g.shape()),
                " for an output of shape ", shape_str(r.shape()));
    auto& buf = buffers[e.node.get()];
    buf.resize(std::max<size_t>(buf.size(), e.node->output_metas.size()));
    buf[e.input_nr] = buf[e.input_nr].defined() ? add(buf[e.input_nr], g) : g;
    starts.push_back(e.node);
  }

  // Dependency counts over the reachable graph.
  std::unordered_map<Node*, int> deps;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (auto& s : starts)
    if (seen.insert(s.get()).second) stack.push_back(s.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& e : n->next) {
      if (!e.valid()) continue;
      deps[e.node.get()]++;
      if (seen.insert(e.node.get()).second) stack.push_back(e.node.get());
    }
  }

  std::vector<std::shared_ptr<Node>> ready;
  std::unordered_set<Node*> queued;
  for (auto& s : starts)
    if (deps[s.get()] == 0 && queued.insert(s.get()).second) ready.push_back(s);
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.back();
    ready.pop_back();
    std::vector<Tensor> in = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    in.resize(node->output_metas.size());
    for (size_t i = 0; i < in.size(); ++i)
      if (!in[i].defined() && is_floating(node->output_metas[i].dtype))
        in[i] = zeros(node->output_metas[i].shape,
                      TensorOptions(node->output_metas[i].dtype).device(node->device));
    std::vector<Tensor> out;
    {
      ir::PlacementGuard place(node->placement);
      out = node->apply(in);
    }
    if (!retain_graph) node->release();
    for (size_t i = 0; i < node->next.size(); ++i) {
      const Edge& e = node->next[i];
      if (!e.valid()) continue;
      if (i < out.size() && out[i].defined()) {
        auto& buf = buffers[e.node.get()];
        buf.resize(std::max<size_t>(buf.size(), e.node->output_metas.size()));
        Tensor& slot = buf[e.input_nr];
        if (slot.defined()) {
          // The sum of a value's gradients runs where its consumer, the value's own backward,
          // runs: left at the current placement (where the forward pass ended) it would bounce
          // a model split over IPUs back and forth (ResNet's BatchNorm backward, one pipeline
          // stage per bounce).
          ir::PlacementGuard place(e.node->placement);
          slot = add(slot, out[i]);
        } else {
          slot = out[i];
        }
      }
      if (--deps[e.node.get()] == 0) ready.push_back(e.node);
    }
  }
}

}  // namespace ipuml::autograd
