// AdamW: Adam with decoupled weight decay (torch.optim.AdamW): p *= 1 - lr*wd before the
// Adam update, instead of adding wd*p to the gradient.
#pragma once

#include <utility>
#include <vector>

#include <ipuml/optim/adam.hpp>

namespace ipuml::optim {

struct AdamWOptions {
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  IPUML_OPTIM_ARG(double, lr, 1e-3);
  IPUML_OPTIM_ARG(Betas, betas, Betas(0.9, 0.999));
  IPUML_OPTIM_ARG(double, eps, 1e-8);
  IPUML_OPTIM_ARG(double, weight_decay, 1e-2);
  IPUML_OPTIM_ARG(bool, amsgrad, false);
};

// State keys as Adam's.
class AdamW : public OptimizerWithOptions<AdamWOptions> {
 public:
  AdamW(std::vector<Tensor> params, const AdamWOptions& options)
      : OptimizerWithOptions("AdamW", options) {
    add_param_group(std::move(params), options);
  }

  void step() override {
    NoGradGuard ng;
    for_each_with_grad([&](Tensor& p, Tensor g, size_t i, const AdamWOptions& o, Group& grp) {
      // The decay factor reads the lr tensor, so a scheduler's change reaches traced graphs.
      detail::adam_step(p, g, state_[i], grp.lr, o.betas(), o.eps(), o.weight_decay(),
                        AdamDecay::Decoupled, o.amsgrad());
    });
  }

 protected:
  void validate(const AdamWOptions& o) const override {
    detail::check_adam_like("AdamW", o.lr(), o.betas(), o.eps(), o.weight_decay());
  }
  void init_state(size_t index, const Tensor& p, const AdamWOptions& o) override {
    detail::init_adam_state(state_[index], p, o.amsgrad());
  }
};

}  // namespace ipuml::optim
