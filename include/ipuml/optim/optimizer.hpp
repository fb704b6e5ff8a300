// Optimizer base: parameter groups with their own options, per-parameter state tensors, a
// learning-rate tensor per group, zero_grad, and state_dict/load_state_dict with stable keys.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/tensor/ops.hpp>

// Declares an option with a chaining setter and a getter: `SGDOptions(0.1).momentum(0.9)`.
#define IPUML_OPTIM_ARG(T, name, def)       \
  auto& name(T v) {                         \
    name##_ = std::move(v);                 \
    return *this;                           \
  }                                         \
  const T& name() const { return name##_; } \
  T name##_ = def

namespace ipuml::optim {

namespace detail {

// Validation helper: messages name the optimizer, the option, its value and the valid range.
inline void check_range(bool ok, const std::string& who, const char* option, double value,
                        const char* expected) {
  IPUML_CHECK(ok, who, ": invalid ", option, " ", value, " (expected ", expected, ")");
}

// 1 - beta^t for a float32 step-count tensor t, with tensor ops only (traceable). Written as
// -expm1(t*log(beta)) = -2h/(1-h), h = tanh(t*log(beta)/2), which keeps full float32 relative
// precision where 1 - exp(...) would cancel (beta2 = 0.999 at t = 1 loses four digits).
inline Tensor one_minus_pow(double beta, const Tensor& t) {
  if (beta == 0.0) return ones_like(t);
  const Tensor h = tanh(mul(t, 0.5 * std::log(beta)));
  return div(mul(h, -2.0), add(neg(h), 1.0));
}

// Grads are replaced rather than scaled in place: the engine may hand one gradient tensor to
// several leaves. While tracing, the tracer must know to restore the eager grad afterwards.
inline void replace_grad(Tensor& p, const Tensor& g) {
  if (auto* tr = ir::Tracer::current()) tr->remember_grad(p.impl());
  p.set_grad(g);
}

// p += delta / p *= factor in place, in the parameter's own dtype.
inline void add_to_param(Tensor& p, const Tensor& delta) {
  p.add_(delta.dtype() == p.dtype() ? delta : cast(delta, p.dtype()));
}
inline void scale_param(Tensor& p, const Tensor& factor) {
  p.mul_(factor.dtype() == p.dtype() ? factor : cast(factor, p.dtype()));
}
// The parameter as float32 (for updates that read it).
inline Tensor as_float(const Tensor& p) { return p.dtype() == kFloat32 ? p : cast(p, kFloat32); }

}  // namespace detail

// Per-parameter state: named tensors in a fixed order ("momentum_buffer", "exp_avg", ...).
using ParamState = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient (traceable: tensor ops only).
  virtual void step() = 0;
  const std::string& name() const { return name_; }

  // Sets every gradient to undefined (PyTorch's set_to_none=True).
  void zero_grad() {
    for (auto& g : groups_)
      for (auto& p : g.params) detail::replace_grad(p, Tensor());
  }

  size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group) const { return group_at(group).params; }
  // Every parameter, groups in order (the index used by the state_dict keys).
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> out;
    for (auto& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
    return out;
  }

  double get_lr(size_t group = 0) const { return group_at(group).lr_value; }
  std::vector<double> get_lrs() const {
    std::vector<double> out;
    for (auto& g : groups_) out.push_back(g.lr_value);
    return out;
  }
  // Changes a group's learning rate in place, so graphs traced earlier read the new value.
  void set_lr(size_t group, double lr) {
    detail::check_range(std::isfinite(lr) && lr >= 0.0, name_ + ".set_lr", "lr", lr, ">= 0");
    IPUML_CHECK(!ir::is_tracing(), name_,
                ".set_lr: cannot change the learning rate while a step is being traced");
    Group& g = group_at(group);
    NoGradGuard ng;
    g.lr.fill_(lr);
    g.lr_value = lr;
    on_lr_changed(group, lr);
  }
  void set_lr(double lr) {
    for (size_t g = 0; g < groups_.size(); ++g) set_lr(g, lr);
  }
  // The float32 scalar the step reads (state of a traced graph).
  const Tensor& lr_tensor(size_t group = 0) const { return group_at(group).lr; }

  // Per-parameter state by global parameter index.
  const ParamState& state(size_t param_index) const {
    IPUML_CHECK(param_index < state_.size(), name_, ": parameter index ", param_index,
                " is out of range (", state_.size(), " parameters)");
    return state_[param_index];
  }

  // Mixed precision: every float16/bfloat16 parameter gets a float32 copy (state
  // "master_weight") that the update reads and writes; the parameter then receives the master
  // rounded to its dtype. Small updates then accumulate instead of being lost to half rounding.
  // Call once, before the first step (and before a trainingModel traces the optimizer).
  void keep_master_weights() {
    IPUML_CHECK(!ir::is_tracing(), name_, ".keep_master_weights: not available while tracing");
    ir::NoTraceGuard nt;
    NoGradGuard ng;
    const auto params = parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].dtype() == kFloat32 || master_of(i) != nullptr) continue;
      state_[i].emplace_back("master_weight", cast(params[i], kFloat32).contiguous());
    }
  }
  bool has_master_weights() const {
    for (size_t i = 0; i < state_.size(); ++i)
      if (master_of(i) != nullptr) return true;
    return false;
  }

  // PopTorch's optimizer `loss_scaling`: the model wrappers (trainingModel) seed backward with
  // this value instead of 1, and the update divides every gradient by it, so half gradients
  // keep their small values out of the subnormal range. In eager code multiply the loss by it
  // yourself before backward (or use LossScaler, which also skips steps on overflow).
  void set_loss_scaling(double scale) {
    detail::check_range(std::isfinite(scale) && scale > 0.0, name_ + ".set_loss_scaling",
                        "loss_scaling", scale, "a finite value > 0");
    IPUML_CHECK(!ir::is_tracing(), name_, ".set_loss_scaling: not available while tracing");
    loss_scaling_ = scale;
  }
  double loss_scaling() const { return loss_scaling_; }

  // A snapshot (copies): "state.<i>.<name>" for each parameter i's state tensors in order, then
  // "group.<g>.lr" for each group.
  nn::StateDict state_dict() const {
    IPUML_CHECK(!ir::is_tracing(), name_, ".state_dict: not available while tracing");
    nn::StateDict out;
    for (auto& [k, t] : live_entries()) out.emplace_back(k, t.clone().detach());
    return out;
  }
  // Copies every entry in place (traced graphs keep their state bindings); the dict must hold
  // exactly this optimizer's keys with matching shapes.
  void load_state_dict(const nn::StateDict& d) {
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

 protected:
  struct Group {
    std::vector<Tensor> params;
    Tensor lr;  // float32 scalar
    double lr_value = 0.0;
    size_t first_index = 0;  // global index of params[0]
  };

  explicit Optimizer(std::string name) : name_(std::move(name)) {}

  // Registers a group: validates the parameters and creates the lr tensor (outside any trace).
  void add_group_base(std::vector<Tensor> params, double lr) {
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

  // Adds a zero-initialised state tensor to parameter `index` (construction time only).
  // It lives on `device` (the parameter's; a 0-dim state may stay on the CPU).
  Tensor add_state(size_t index, const std::string& key, const Shape& shape,
                   Device device = Device()) {
    ir::NoTraceGuard nt;
    Tensor t = zeros(shape, TensorOptions(kFloat32).device(device));
    state_[index].emplace_back(key, t);
    return t;
  }
  Tensor& state_ref(size_t index, const std::string& key) {
    for (auto& [k, t] : state_[index])
      if (k == key) return t;
    fail(name_, ": parameter ", index, " has no state '", key, "'");
  }

  // Parameter `index`'s float32 master copy, or null.
  Tensor* master_of(size_t index) {
    for (auto& [k, t] : state_[index])
      if (k == "master_weight") return &t;
    return nullptr;
  }
  const Tensor* master_of(size_t index) const {
    for (auto& [k, t] : state_[index])
      if (k == "master_weight") return &t;
    return nullptr;
  }

  double loss_scaling_ = 1.0;

  // Keeps options structs' lr in step with the tensor.
  virtual void on_lr_changed(size_t group, double lr) { (void)group, (void)lr; }

  Group& group_at(size_t g) {
    IPUML_CHECK(g < groups_.size(), name_, ": param group ", g, " is out of range (",
                groups_.size(), " groups)");
    return groups_[g];
  }
  const Group& group_at(size_t g) const {
    IPUML_CHECK(g < groups_.size(), name_, ": param group ", g, " is out of range (",
                groups_.size(), " groups)");
    return groups_[g];
  }

  std::vector<Group> groups_;
  std::vector<ParamState> state_;  // by global parameter index

 private:
  nn::StateDict live_entries() const {
    nn::StateDict out;
    for (size_t i = 0; i < state_.size(); ++i)
      for (auto& [k, t] : state_[i]) out.emplace_back("state." + std::to_string(i) + "." + k, t);
    for (size_t g = 0; g < groups_.size(); ++g)
      out.emplace_back("group." + std::to_string(g) + ".lr", groups_[g].lr);
    return out;
  }

  std::string name_;
};

// An optimizer whose groups each carry an `Options` struct (which has an `lr`).
template <typename Options>
class OptimizerWithOptions : public Optimizer {
 public:
  using OptionsType = Options;

  const Options& defaults() const { return defaults_; }
  const Options& options(size_t group = 0) const {
    group_at(group);
    return options_[group];
  }

  // A new group with its own options (state for its parameters is created now).
  void add_param_group(std::vector<Tensor> params, const Options& opts) {
    validate(opts);
    add_group_base(std::move(params), opts.lr());
    options_.push_back(opts);
    const Group& g = groups_.back();
    for (size_t k = 0; k < g.params.size(); ++k) init_state(g.first_index + k, g.params[k], opts);
  }
  // A new group with the constructor's options.
  void add_param_group(std::vector<Tensor> params) {
    add_param_group(std::move(params), defaults_);
  }

 protected:
  OptimizerWithOptions(std::string name, const Options& defaults)
      : Optimizer(std::move(name)), defaults_(defaults) {}

  virtual void validate(const Options& o) const = 0;
  virtual void init_state(size_t index, const Tensor& param, const Options& o) = 0;
  void on_lr_changed(size_t group, double lr) override { options_[group].lr(lr); }

  // Calls f(param, grad, index, options, group) for every parameter that has a gradient.
  template <typename F>
  void for_each_with_grad(F&& f) {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      Group& g = groups_[gi];
      for (size_t k = 0; k < g.params.size(); ++k) {
        Tensor& p = g.params[k];
        Tensor grad = p.grad();
        if (!grad.defined()) continue;
        IPUML_CHECK(grad.shape() == p.shape(), name(), ": parameter ", g.first_index + k,
                    " has shape ", shape_str(p.shape()), " but its gradient has shape ",
                    shape_str(grad.shape()));
        // The update is computed in float32 (state is float32) whatever the parameter's dtype.
        if (grad.dtype() != kFloat32) grad = cast(grad, kFloat32);
        if (loss_scaling_ != 1.0) grad = mul(grad, 1.0 / loss_scaling_);
        const size_t index = g.first_index + k;
        if (Tensor* master = master_of(index)) {
          f(*master, grad, index, options_[gi], g);
          p.copy_(cast(*master, p.dtype()));
        } else {
          f(p, grad, index, options_[gi], g);
        }
      }
    }
  }

  Options defaults_;
  std::vector<Options> options_;
};

}  // namespace ipuml::optim
