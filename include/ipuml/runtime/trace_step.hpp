// Tracing one training step of any model with any number of inputs: forward and loss, backward
// and the optimizer's step, with the update placed on each parameter's IPU.
#pragma once

#include <string>
#include <vector>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/ir/placement.hpp>
#include <ipuml/ir/recompute.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/optim/optimizer.hpp>

namespace ipuml::runtime {

// `loss_of(inputs)` computes the scalar loss from symbolic inputs shaped as `inputs`; the
// returned graph's single output is that loss and its state updates are the optimizer's. As
// trainingModel traces a fused step (one replica, no accumulation); with
// `optimizer_off_chip`, the optimizer's state is kept in streaming memory.
template <typename LossFn>
ir::Trace trace_training_step(nn::Module& model, optim::Optimizer& optimizer, LossFn&& loss_of,
                              const std::vector<ir::TensorMeta>& inputs,
                              bool optimizer_off_chip = false) {
  ir::Tracer tracer;
  for (auto& [name, t] : model.named_parameters()) tracer.name_state(t, name);
  for (auto& [name, t] : model.named_buffers()) tracer.name_state(t, name);
  std::vector<Tensor> xs;
  for (size_t i = 0; i < inputs.size(); ++i)
    xs.push_back(tracer.input(inputs[i], "input" + std::to_string(i)));
  optimizer.zero_grad();
  Tensor loss = loss_of(xs);
  IPUML_CHECK(loss.numel() == 1, "trace_training_step: the loss must be a scalar, got shape ",
              shape_str(loss.shape()));
  const size_t backward_begin = tracer.num_nodes();
  if (optimizer.loss_scaling() != 1.0)
    loss.backward(full(loss.shape(), optimizer.loss_scaling(), loss.dtype()));
  else
    loss.backward();
  const size_t update_begin = tracer.num_nodes();
  {
    NoGradGuard ng;
    optimizer.step();
  }
  optimizer.zero_grad();
  ir::Trace tr = tracer.finish({loss.reshape({})});
  auto homes = ir::state_homes(tr.graph, update_begin);
  ir::place_update(tr.graph, update_begin, homes);
  ir::recompute_from_checkpoints(tr.graph, backward_begin, update_begin);
  if (optimizer_off_chip) {
    std::vector<Tensor> state;
    const size_t n = optimizer.parameters().size();
    for (size_t i = 0; i < n; ++i)
      for (auto& [name, t] : optimizer.state(i)) state.push_back(t);
    ir::place_off_chip(tr.graph, tr.states, state);
  }
  return tr;
}

}  // namespace ipuml::runtime
