// Gradient clipping by total norm (torch.nn.utils.clip_grad_norm_) and by value. Tensor ops
// only, so clipping inside a traced step is recorded in the graph.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <ipuml/optim/optimizer.hpp>

namespace ipuml::optim {

// Scales the gradients of `params` (those that have one) so that their joint norm is at most
// max_norm: coef = min(max_norm/(total + 1e-6), 1). Returns the total norm before clipping as a
// float32 scalar tensor. norm_type may be any p > 0 or infinity (the largest |g|).
inline Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm,
                              double norm_type = 2.0) {
  detail::check_range(std::isfinite(max_norm) && max_norm >= 0.0, "clip_grad_norm_", "max_norm",
                      max_norm, "a finite value >= 0");
  detail::check_range(norm_type > 0.0, "clip_grad_norm_", "norm_type", norm_type,
                      "> 0, or infinity");
  NoGradGuard ng;
  std::vector<Tensor> owners, grads;
  for (auto& p : params) {
    IPUML_CHECK(p.defined(), "clip_grad_norm_: a parameter is undefined");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    owners.push_back(p);
    grads.push_back(g.dtype() == kFloat32 ? g : cast(g, kFloat32));
  }
  if (grads.empty()) return scalar_tensor(0.0);
  Tensor total;
  const bool inf_norm = std::isinf(norm_type);
  for (auto& g : grads) {
    Tensor part;
    if (inf_norm)
      part = amax(abs(g));
    else if (norm_type == 2.0)
      part = sum(mul(g, g));
    else if (norm_type == 1.0)
      part = sum(abs(g));
    else
      part = sum(pow(abs(g), norm_type));
    total = !total.defined() ? part : inf_norm ? maximum(total, part) : add(total, part);
  }
  if (!inf_norm) {
    if (norm_type == 2.0)
      total = sqrt(total);
    else if (norm_type != 1.0)
      total = pow(total, 1.0 / norm_type);
  }
  const Tensor coef = clamp(div(full_like(total, max_norm), add(total, 1e-6)), std::nullopt, 1.0);
  for (size_t i = 0; i < owners.size(); ++i) {
    const Tensor g = owners[i].grad();
    detail::replace_grad(owners[i], mul(g, g.dtype() == kFloat32 ? coef : cast(coef, g.dtype())));
  }
  return total;
}

// Clamps every gradient element into [-clip_value, clip_value].
inline void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  detail::check_range(std::isfinite(clip_value) && clip_value >= 0.0, "clip_grad_value_",
                      "clip_value", clip_value, "a finite value >= 0");
  NoGradGuard ng;
  for (auto p : params) {
    IPUML_CHECK(p.defined(), "clip_grad_value_: a parameter is undefined");
    const Tensor g = p.grad();
    if (g.defined()) detail::replace_grad(p, clamp(g, -clip_value, clip_value));
  }
}

}  // namespace ipuml::optim
