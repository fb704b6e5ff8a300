// adam_update_ and sgd_update_: the fused Adam / AdamW and SGD steps (ir::OpKind::AdamUpdate,
// SgdUpdate), in place on the parameter and its optimizer state, eager or traced.
#pragma once

#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

IPUML_INLINE void adam_update_(Tensor& param, Tensor& exp_avg, Tensor& exp_avg_sq,
                               Tensor& max_exp_avg_sq, const Tensor& grad, const Tensor& lr,
                               const Tensor& step, const AdamUpdateOptions& o) {
  IPUML_CHECK(param.defined() && exp_avg.defined() && exp_avg_sq.defined() && grad.defined() &&
                  lr.defined() && step.defined(),
              "adam_update_: param, exp_avg, exp_avg_sq, grad, lr and step must be defined");
  ops_detail::Attrs a;
  a.reals = {o.beta1, o.beta2, o.eps, o.weight_decay};
  a.mode = o.weight_decay == 0.0             ? 0
           : o.decay == AdamDecay::L2        ? 1
           : o.decay == AdamDecay::Decoupled ? 2
                                             : 0;
  a.flag = max_exp_avg_sq.defined();
  std::vector<Tensor*> targets{&param, &exp_avg, &exp_avg_sq};
  if (a.flag) targets.push_back(&max_exp_avg_sq);
  std::vector<Tensor> inputs;
  for (auto* t : targets) inputs.push_back(*t);
  inputs.push_back(grad);
  inputs.push_back(lr);
  inputs.push_back(step);
  detail::dispatch_update(targets, ops_detail::OpKind::AdamUpdate, a, inputs);
}

IPUML_INLINE void sgd_update_(Tensor& param, Tensor& momentum_buffer, const Tensor& grad,
                              const Tensor& lr, const Tensor& step, const SgdUpdateOptions& o) {
  IPUML_CHECK(param.defined() && grad.defined() && lr.defined(),
              "sgd_update_: param, grad and lr must be defined");
  IPUML_CHECK(momentum_buffer.defined() == (o.momentum != 0.0),
              "sgd_update_: a momentum buffer must be given exactly when momentum != 0 (momentum ",
              o.momentum, ")");
  ops_detail::Attrs a;
  a.reals = {o.momentum, o.dampening, o.weight_decay};
  a.flag = momentum_buffer.defined();
  a.flag2 = o.nesterov;
  a.mode = step.defined() ? 1 : 0;
  std::vector<Tensor*> targets{&param};
  if (a.flag) targets.push_back(&momentum_buffer);
  std::vector<Tensor> inputs;
  for (auto* t : targets) inputs.push_back(*t);
  inputs.push_back(grad);
  inputs.push_back(lr);
  if (step.defined()) inputs.push_back(step);
  detail::dispatch_update(targets, ops_detail::OpKind::SgdUpdate, a, inputs);
}

}  // namespace ipuml
