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
  void zero_grad();

  size_t num_param_groups() const { return groups_.size(); }
  const std::vector<Tensor>& params(size_t group) const { return group_at(group).params; }
  // Every parameter, groups in order (the index used by the state_dict keys).
  std::vector<Tensor> parameters() const;

  double get_lr(size_t group = 0) const { return group_at(group).lr_value; }
  std::vector<double> get_lrs() const;
  // Changes a group's learning rate in place, so graphs traced earlier read the new value.
  void set_lr(size_t group, double lr);
  void set_lr(double lr);
  // The float32 scalar the step reads (state of a traced graph).
  const Tensor& lr_tensor(size_t group = 0) const { return group_at(group).lr; }

  // Per-parameter state by global parameter index.
  const ParamState& state(size_t param_index) const;

  // Mixed precision: every float16/bfloat16 parameter gets a float32 copy (state
  // "master_weight") that the update reads and writes; the parameter then receives the master
  // rounded to its dtype. Small updates then accumulate instead of being lost to half rounding.
  // Call once, before the first step (and before a trainingModel traces the optimizer).
  void keep_master_weights();
  bool has_master_weights() const;

  // PopTorch's optimizer `loss_scaling`: the model wrappers (trainingModel) seed backward with
  // this value instead of 1, and the update divides every gradient by it, so half gradients
  // keep their small values out of the subnormal range. In eager code multiply the loss by it
  // yourself before backward (or use LossScaler, which also skips steps on overflow).
  void set_loss_scaling(double scale);
  double loss_scaling() const { return loss_scaling_; }

  // A snapshot (copies): "state.<i>.<name>" for each parameter i's state tensors in order, then
  // "group.<g>.lr" for each group.
  nn::StateDict state_dict() const;
  // Copies every entry in place (traced graphs keep their state bindings); the dict must hold
  // exactly this optimizer's keys with matching shapes.
  void load_state_dict(const nn::StateDict& d);

 protected:
  struct Group {
    std::vector<Tensor> params;
    Tensor lr;  // float32 scalar
    double lr_value = 0.0;
    size_t first_index = 0;  // global index of params[0]
  };

  explicit Optimizer(std::string name) : name_(std::move(name)) {}

  // Registers a group: validates the parameters and creates the lr tensor (outside any trace).
  void add_group_base(std::vector<Tensor> params, double lr);

  // Adds a zero-initialised state tensor to parameter `index` (construction time only).
  // It lives on `device` (the parameter's; a 0-dim state may stay on the CPU).
  Tensor add_state(size_t index, const std::string& key, const Shape& shape,
                   Device device = Device());
  Tensor& state_ref(size_t index, const std::string& key);

  // Parameter `index`'s float32 master copy, or null.
  Tensor* master_of(size_t index);
  const Tensor* master_of(size_t index) const;

  double loss_scaling_ = 1.0;

  // Keeps options structs' lr in step with the tensor.
  virtual void on_lr_changed(size_t group, double lr);

  Group& group_at(size_t g);
  const Group& group_at(size_t g) const;

  std::vector<Group> groups_;
  std::vector<ParamState> state_;  // by global parameter index

 private:
  nn::StateDict live_entries() const;

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

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/optim/optimizer_impl.hpp>
#endif
