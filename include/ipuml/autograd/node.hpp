// Nodes of the autograd tape: each op that needs a gradient leaves a node whose backward is
// written with ordinary ops, so a traced step records its own backward pass.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/op_catalogue.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::autograd {

struct Node;

struct Edge {
  std::shared_ptr<Node> node;
  int input_nr = 0;
  bool valid() const { return node != nullptr; }
};

struct Node {
  std::string name;
  std::vector<Edge> next;                    // one per forward input
  std::vector<ir::TensorMeta> output_metas;  // outputs that receive no gradient get zeros
  bool released = false;
  int placement = 0;  // of the forward op; its backward is recorded with the same placement
  Device device;      // of the forward op's outputs: where the zeros of missing gradients go

  virtual ~Node() = default;
  virtual std::vector<Tensor> apply(const std::vector<Tensor>& grad_outputs) = 0;
  virtual void release() { released = true; }
};

using BackwardFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct FunctionNode : Node {
  BackwardFn fn;
  std::vector<Tensor> apply(const std::vector<Tensor>& g) override;
  void release() override {
    released = true;
    fn = nullptr;  // frees saved tensors
  }
};

// Adds incoming gradients into a leaf's .grad.
struct AccumulateGrad : Node {
  std::weak_ptr<TensorImpl> leaf;
  std::vector<Tensor> apply(const std::vector<Tensor>& g) override;
};

// The edge a gradient for `t` flows along: its grad_fn, or its leaf accumulator.
Edge gradient_edge(const Tensor& t);

// True when grad mode is on and any input requires grad.
bool needs_grad(const std::vector<Tensor>& inputs);

// Makes `outputs` differentiable: a FunctionNode named `name` whose backward maps output
// gradients to one gradient per input (undefined where none flows). No-op if !needs_grad.
void attach(const std::vector<Tensor>& outputs, const std::string& name,
            const std::vector<Tensor>& inputs, BackwardFn fn);

// Runs backward from `roots`, seeded with `grads` (undefined = ones for scalar roots).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph);

}  // namespace ipuml::autograd

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/autograd/engine_impl.hpp>
#endif
