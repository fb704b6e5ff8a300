// LAMB (You et al. 2019): Adam moments with bias correction, then a per-parameter-tensor trust
// ratio ||w|| / ||r|| scaling the step. Traceable: the ratio is computed with tensor ops.
#pragma once

#include <utility>
#include <vector>

#include <ipuml/optim/adam.hpp>

namespace ipuml::optim {

struct LAMBOptions {
  explicit LAMBOptions(double lr = 1e-3) : lr_(lr) {}
  IPUML_OPTIM_ARG(double, lr, 1e-3);
  IPUML_OPTIM_ARG(Betas, betas, Betas(0.9, 0.999));
  IPUML_OPTIM_ARG(double, eps, 1e-6);
  IPUML_OPTIM_ARG(double, weight_decay, 0.0);
};

// Per parameter tensor, step t = 1, 2, ...: m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
// r = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*w; ratio = ||w||/||r|| when both norms are
// > 0, else 1; w -= lr*ratio*r. State keys: "step", "exp_avg", "exp_avg_sq".
class LAMB : public OptimizerWithOptions<LAMBOptions> {
 public:
  LAMB(std::vector<Tensor> params, const LAMBOptions& options)
      : OptimizerWithOptions("LAMB", options) {
    add_param_group(std::move(params), options);
  }

  void step() override {
    NoGradGuard ng;
    for_each_with_grad([&](Tensor& p, Tensor g, size_t i, const LAMBOptions& o, Group& grp) {
      ParamState& s = state_[i];
      Tensor& count = s[0].second;
      Tensor& m = s[1].second;
      Tensor& v = s[2].second;
      const auto [b1, b2] = o.betas();
      count.add_(1.0);
      m.mul_(b1);
      m.add_(g, 1.0 - b1);
      v.mul_(b2);
      v.add_(mul(g, g), 1.0 - b2);
      const Tensor pf = detail::as_float(p);
      const Tensor m_hat = div(m, detail::one_minus_pow(b1, count));
      const Tensor v_hat = div(v, detail::one_minus_pow(b2, count));
      Tensor r = div(m_hat, add(sqrt(v_hat), o.eps()));
      if (o.weight_decay() != 0.0) r = add(r, mul(pf, o.weight_decay()));
      const Tensor w_norm = sqrt(sum(mul(pf, pf)));
      const Tensor r_norm = sqrt(sum(mul(r, r)));
      const Tensor ratio = where(logical_and(gt(w_norm, 0.0), gt(r_norm, 0.0)), div(w_norm, r_norm),
                                 ones_like(w_norm));
      detail::add_to_param(p, mul(r, neg(mul(grp.lr, ratio))));
    });
  }

 protected:
  void validate(const LAMBOptions& o) const override {
    detail::check_adam_like("LAMB", o.lr(), o.betas(), o.eps(), o.weight_decay());
  }
  void init_state(size_t index, const Tensor& p, const LAMBOptions&) override {
    detail::init_adam_state(state_[index], p, false);
  }
};

}  // namespace ipuml::optim
