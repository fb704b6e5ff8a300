// Bodies of the Optimizer base: parameter groups, state, learning rates, master weights and
// state dicts (compiled once in src/lib/optim_optimizer.cpp).
#pragma once

#include <cmath>
#include <string>

#include <ipuml/optim/optimizer.hpp>

namespace ipuml::optim {

IPUML_INLINE void Optimizer::on_lr_changed(size_t group, double lr) { (void)group, (void)lr; }

IPUML_INLINE void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.params) detail::replace_grad(p, Tensor());
}

IPUML_INLINE std::vector<Tensor> Optimizer::parameters() const {
  std::vector<Tensor> out;
  for (auto& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

IPUML_INLINE std::vector<double> Optimizer::get_lrs() const {
  std::vector<double> out;
  for (auto& g : groups_) out.push_back(g.lr_value);
  return out;
}

IPUML_INLINE void Optimizer::set_lr(size_t group, double lr) {
  detail::check_range(std::isfinite(lr) && lr >= 0.0, name_ + ".set_lr", "lr", lr, ">= 0");
  IPUML_CHECK(!ir::is_tracing(), name_,
              ".set_lr: cannot change the learning rate while a step is being traced");
  Group& g = group_at(group);
  NoGradGuard ng;
  g.lr.fill_(lr);
  g.lr_value = lr;
  on_lr_changed(group, lr);
}

IPUML_INLINE void Optimizer::set_lr(double lr) {
  for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
}

IPUML_INLINE const ParamState& Optimizer::state(size_t param_index) const {
  IPUML_CHECK(param_index < state_.size(), name_, ": parameter index ", param_index,
              " is out of range (", state_.size(), " parameters)");
  return state_[param_index];
}

IPUML_INLINE void Optimizer::keep_master_weights() {
  IPUML_CHECK(!ir::is_tracing(), name_, ".keep_master_weights: not available while tracing");
  ir::NoTraceGuard nt;
  NoGradGuard ng;
  const auto params = parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].dtype() == kFloat32 || master_of(i) != nullptr) continue;
    state_[i].emplace_back("master_weight", cast(params[i], kFloat32).contiguous());
  }
}

IPUML_INLINE bool Optimizer::has_master_weights() const {
  for (size_t i = 0; i < state_.size(); ++i)
    if (master_of(i) != nullptr) return true;
  return false;
}

IPUML_INLINE void Optimizer::set_loss_scaling(double scale) {
  detail::check_range(std::isfinite(scale) && scale > 0.0, name_ + ".set_loss_scaling",
                      "loss_scaling", scale, "a finite value > 0");
  IPUML_CHECK(!ir::is_tracing(), name_, ".set_loss_scaling: not available while tracing");
  loss_scaling_ = scale;
}

IPUML_INLINE nn::StateDict Optimizer::state_dict() const {
  IPUML_CHECK(!ir::is_tracing(), name_, ".state_dict: not available while tracing");
  nn::StateDict out;
  for (auto& [k, t] : live_entries()) out.emplace_back(k, t.clone().detach());
  return out;
}

IPUML_INLINE void Optimizer::load_state_dict(const nn::StateDict& d) {
  IPUML_CHECK(!ir::is_tracing(), name_, ".load_state_dict: not available while tracing");
  const nn::StateDict mine = live_entries();
  for (auto& [k, t] : mine) {
    const Tensor* src = nn::find_in(d, k);
    IPUML_CHECK(src != nullptr && src->defined(), name_, ".load_state_dict: missing key '", k,
                "' (this optimizer has ", parameters().size(), " parameters in ", groups_.size(),
                " groups)");
    IPUML_CHECK(src->shape() == t.shape(), name_, ".load_state_dict: '", k, "' has shape ",
                shape_str(src->shape()), " in the state dict but ", shape_str(t.shape()),
                " in the optimizer");
    IPUML_CHECK(src->dtype() == t.dtype(), name_, ".load_state_dict: '", k, "' is ",
                dtype_name(src->dtype()), " in the state dict but ", dtype_name(t.dtype()),
                " in the optimizer");
    if (k.size() > 3 && k.compare(k.size() - 3, 3, ".lr") == 0) {
      const double lr = src->item<float>();
      detail::check_range(std::isfinite(lr) && lr >= 0.0, name_ + ".load_state_dict '" + k + "'",
                          "lr", lr, "finite and >= 0");
    }
  }
  for (auto& [k, v] : d)
    IPUML_CHECK(nn::find_in(mine, k) != nullptr, name_, ".load_state_dict: unexpected key '", k,
                "' (not a state of this optimizer)");
  NoGradGuard ng;
  for (auto& [k, t] : mine) {
    Tensor dst = t;
    dst.copy_(*nn::find_in(d, k));
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].lr_value = groups_[g].lr.item<float>();
    on_lr_changed(g, groups_[g].lr_value);
  }
}

IPUML_INLINE void Optimizer::add_group_base(std::vector<Tensor> params, double lr) {
  detail::check_range(std::isfinite(lr) && lr >= 0.0, name_, "lr", lr, ">= 0");
  IPUML_CHECK(!params.empty(), name_, ": got an empty parameter list");
  const std::vector<Tensor> existing = parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    IPUML_CHECK(p.defined(), name_, ": parameter ", i, " of the group is undefined");
    IPUML_CHECK(is_floating(p.dtype()), name_, ": parameter ", i, " has dtype ",
                dtype_name(p.dtype()), "; only floating-point tensors can be optimized");
    IPUML_CHECK(p.is_leaf(), name_, ": parameter ", i,
                " is not a leaf tensor (it was computed by an op); pass leaves or detach()");
    for (auto& e : existing)
      IPUML_CHECK(!e.same(p), name_, ": parameter ", i, " already appears in another group");
    for (size_t j = 0; j < i; ++j)
      IPUML_CHECK(!params[j].same(p), name_, ": parameter ", i, " appears twice in the group");
  }
  ir::NoTraceGuard nt;
  Group g;
  g.first_index = state_.size();
  g.params = std::move(params);
  g.lr = scalar_tensor(lr, kFloat32);
  g.lr_value = lr;
  state_.resize(state_.size() + g.params.size());
  groups_.push_back(std::move(g));
}

IPUML_INLINE Tensor Optimizer::add_state(size_t index, const std::string& key, const Shape& shape,
                                         Device device) {
  ir::NoTraceGuard nt;
  Tensor t = zeros(shape, TensorOptions(kFloat32).device(device));
  state_[index].emplace_back(key, t);
  return t;
}

IPUML_INLINE Tensor& Optimizer::state_ref(size_t index, const std::string& key) {
  for (auto& [k, t] : state_[index])
    if (k == key) return t;
  fail(name_, ": parameter ", index, " has no state '", key, "'");
}

IPUML_INLINE Tensor* Optimizer::master_of(size_t index) {
  for (auto& [k, t] : state_[index])
    if (k == "master_weight") return &t;
  return nullptr;
}

IPUML_INLINE const Tensor* Optimizer::master_of(size_t index) const {
  for (auto& [k, t] : state_[index])
    if (k == "master_weight") return &t;
  return nullptr;
}

IPUML_INLINE Optimizer::Group& Optimizer::group_at(size_t g) {
  IPUML_CHECK(g < groups_.size(), name_, ": param group ", g, " is out of range (", groups_.size(),
              " groups)");
  return groups_[g];
}

IPUML_INLINE const Optimizer::Group& Optimizer::group_at(size_t g) const {
  IPUML_CHECK(g < groups_.size(), name_, ": param group ", g, " is out of range (", groups_.size(),
              " groups)");
  return groups_[g];
}

IPUML_INLINE nn::StateDict Optimizer::live_entries() const {
  nn::StateDict out;
  for (size_t i = 0; i < state_.size(); ++i)
    for (auto& [k, t] : state_[i]) out.emplace_back("state." + std::to_string(i) + "." + k, t);
  for (size_t g = 0; g < groups_.size(); ++g)
    out.emplace_back("group." + std::to_string(g) + ".lr", groups_[g].lr);
  return out;
}

}  // namespace ipuml::optim
