// SGD with momentum, dampening, Nesterov momentum and L2 weight decay (torch.optim.SGD), one
// fused pass per float32 parameter. Traceable: the momentum buffer and learning rate are tensors
// created before any step.
#pragma once

#include <utility>
#include <vector>

#include <ipuml/optim/optimizer.hpp>

namespace ipuml::optim {

struct SGDOptions {
  explicit SGDOptions(double lr = 0.01) : lr_(lr) {}
  IPUML_OPTIM_ARG(double, lr, 0.01);
  IPUML_OPTIM_ARG(double, momentum, 0.0);
  IPUML_OPTIM_ARG(double, dampening, 0.0);
  IPUML_OPTIM_ARG(double, weight_decay, 0.0);
  IPUML_OPTIM_ARG(bool, nesterov, false);
};

namespace detail {

// One SGD step of p from g with up to ten elementwise tensor ops, in p's own dtype: the formula as
// optim::SGD ran it before the fused SgdUpdate. It serves the parameters the fused op does not
// cover (a half parameter without master weights) and is the reference the fused update is
// tested against. `buf` and `count` are the "momentum_buffer" and "step" state (undefined when
// unused); count goes up by one.
inline void sgd_update_composite(Tensor& p, Tensor g, Tensor& buf, Tensor& count, const Tensor& lr,
                                 const SGDOptions& o) {
  if (o.weight_decay() != 0.0) g = add(g, mul(as_float(p), o.weight_decay()));
  if (o.momentum() != 0.0) {
    if (o.dampening() == 0.0) {
      // buf starts at zero, so the first step gives exactly g without a branch.
      buf.mul_(o.momentum());
      buf.add_(g);
    } else {
      buf.copy_(where(eq(count, 0.0), g, add(mul(buf, o.momentum()), mul(g, 1.0 - o.dampening()))));
      count.add_(1.0);
    }
    g = o.nesterov() ? add(g, mul(buf, o.momentum())) : buf;
  }
  add_to_param(p, mul(g, neg(lr)));
}

// One SGD step: a float32 parameter (or master weight) with a float32 gradient gets the fused
// SgdUpdate, one pass over its memory (with dampening the step count goes up by one first and
// the op takes the first step's buffer from it); any other runs sgd_update_composite.
inline void sgd_step(Tensor& p, const Tensor& g, Tensor& buf, Tensor& count, const Tensor& lr,
                     const SGDOptions& o) {
  const bool fused =
      p.dtype() == kFloat32 && g.dtype() == kFloat32 && (!buf.defined() || buf.dtype() == kFloat32);
  if (!fused) return sgd_update_composite(p, g, buf, count, lr, o);
  SgdUpdateOptions so;
  so.momentum = o.momentum();
  so.dampening = o.dampening();
  so.weight_decay = o.weight_decay();
  so.nesterov = o.nesterov();
  Tensor no_step;
  if (count.defined()) count.add_(1.0);
  sgd_update_(p, buf, g, lr, count.defined() ? count : no_step, so);
}

}  // namespace detail

// Per parameter, PyTorch's rule: g += wd*p; buf = g on the first step, else
// momentum*buf + (1-dampening)*g; g = nesterov ? g + momentum*buf : buf; p -= lr*g.
// State keys: "momentum_buffer" when momentum != 0, plus "step" when dampening != 0 (the
// first-step rule then needs to know the step inside a traced graph).
class SGD : public OptimizerWithOptions<SGDOptions> {
 public:
  SGD(std::vector<Tensor> params, const SGDOptions& options)
      : OptimizerWithOptions("SGD", options) {
    add_param_group(std::move(params), options);
  }

  void step() override {
    NoGradGuard ng;
    for_each_with_grad([&](Tensor& p, Tensor g, size_t i, const SGDOptions& o, Group& grp) {
      Tensor none_buf, none_count;
      Tensor& buf = o.momentum() != 0.0 ? state_ref(i, "momentum_buffer") : none_buf;
      Tensor& count =
          o.momentum() != 0.0 && o.dampening() != 0.0 ? state_ref(i, "step") : none_count;
      detail::sgd_step(p, g, buf, count, grp.lr, o);
    });
  }

 protected:
  void validate(const SGDOptions& o) const override {
    // Finite, as the fused update (SgdUpdate) requires: an infinite momentum or weight decay
    // would turn every parameter into NaN at the first step.
    detail::check_range(std::isfinite(o.lr()) && o.lr() >= 0.0, "SGD", "lr", o.lr(),
                        "finite, >= 0");
    detail::check_range(std::isfinite(o.momentum()) && o.momentum() >= 0.0, "SGD", "momentum",
                        o.momentum(), "finite, >= 0");
    detail::check_range(o.dampening() >= 0.0 && o.dampening() <= 1.0, "SGD", "dampening",
                        o.dampening(), "in [0, 1]");
    detail::check_range(std::isfinite(o.weight_decay()) && o.weight_decay() >= 0.0, "SGD",
                        "weight_decay", o.weight_decay(), "finite, >= 0");
    IPUML_CHECK(!o.nesterov() || (o.momentum() > 0.0 && o.dampening() == 0.0),
                "SGD: nesterov momentum requires momentum > 0 and dampening = 0 (got momentum ",
                o.momentum(), ", dampening ", o.dampening(), ")");
  }
  void init_state(size_t index, const Tensor& p, const SGDOptions& o) override {
    if (o.momentum() == 0.0) return;
    add_state(index, "momentum_buffer", p.shape(), p.device());
    if (o.dampening() != 0.0) add_state(index, "step", {});
  }
};

}  // namespace ipuml::optim
