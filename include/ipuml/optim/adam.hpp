// Adam with L2 weight decay and optional AMSGrad (torch.optim.Adam), one fused pass per
// parameter. Traceable: the step count is a float32 state tensor, so bias correction 1 - beta^t
// is computed in the graph.
#pragma once

#include <cmath>
#include <utility>
#include <vector>

#include <ipuml/optim/optimizer.hpp>

namespace ipuml::optim {

using Betas = std::pair<double, double>;

struct AdamOptions {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  IPUML_OPTIM_ARG(double, lr, 1e-3);
  IPUML_OPTIM_ARG(Betas, betas, Betas(0.9, 0.999));
  IPUML_OPTIM_ARG(double, eps, 1e-8);
  IPUML_OPTIM_ARG(double, weight_decay, 0.0);
  IPUML_OPTIM_ARG(bool, amsgrad, false);
};

namespace detail {

inline void check_adam_like(const std::string& who, double lr, const Betas& betas, double eps,
                            double weight_decay) {
  check_range(std::isfinite(lr) && lr >= 0.0, who, "lr", lr, "finite, >= 0");
  check_range(betas.first >= 0.0 && betas.first < 1.0, who, "beta1 (betas.first)", betas.first,
              "in [0, 1)");
  check_range(betas.second >= 0.0 && betas.second < 1.0, who, "beta2 (betas.second)", betas.second,
              "in [0, 1)");
  check_range(std::isfinite(eps) && eps >= 0.0, who, "eps", eps, "finite, >= 0");
  check_range(std::isfinite(weight_decay) && weight_decay >= 0.0, who, "weight_decay", weight_decay,
              "finite, >= 0");
}

inline void init_adam_state(ParamState& s, const Tensor& p, bool amsgrad) {
  ir::NoTraceGuard nt;
  s.emplace_back("step", zeros({}, kFloat32));
  const TensorOptions on_p = TensorOptions(kFloat32).device(p.device());  // state follows p
  s.emplace_back("exp_avg", zeros(p.shape(), on_p));
  s.emplace_back("exp_avg_sq", zeros(p.shape(), on_p));
  if (amsgrad) s.emplace_back("max_exp_avg_sq", zeros(p.shape(), on_p));
}

// Updates step, exp_avg, exp_avg_sq (and max_exp_avg_sq) in place, then
// p -= lr/(1-beta1^t) * exp_avg / (sqrt(v)/sqrt(1-beta2^t) + eps), as torch.optim.Adam does,
// with a dozen elementwise tensor ops. adam_step runs the fused AdamUpdate op instead where it
// applies; this composite serves the rest (a half parameter without master weights) and is
// the reference the fused update is tested against.
inline void adam_update_composite(Tensor& p, const Tensor& g, ParamState& s, const Tensor& lr,
                                  const Betas& betas, double eps, bool amsgrad) {
  Tensor& count = s[0].second;
  Tensor& m = s[1].second;
  Tensor& v = s[2].second;
  count.add_(1.0);
  m.mul_(betas.first);
  m.add_(g, 1.0 - betas.first);
  v.mul_(betas.second);
  v.add_(mul(g, g), 1.0 - betas.second);
  Tensor vv = v;
  if (amsgrad) {
    Tensor& vmax = s[3].second;
    vmax.copy_(maximum(vmax, v));
    vv = vmax;
  }
  const Tensor step_size = div(lr, one_minus_pow(betas.first, count));
  const Tensor denom = add(div(sqrt(vv), sqrt(one_minus_pow(betas.second, count))), eps);
  add_to_param(p, mul(div(m, denom), neg(step_size)));
}

// One Adam (decay L2) or AdamW (decay Decoupled) step of p from g: the step count goes up by
// one, then a float32 parameter (or master weight) gets the fused AdamUpdate, one pass over
// its memory; any other runs the composite ops in its own dtype.
inline void adam_step(Tensor& p, const Tensor& g, ParamState& s, const Tensor& lr,
                      const Betas& betas, double eps, double weight_decay, AdamDecay decay,
                      bool amsgrad) {
  if (p.dtype() == kFloat32 && g.dtype() == kFloat32) {
    Tensor& count = s[0].second;
    count.add_(1.0);
    Tensor no_max;
    AdamUpdateOptions o;
    o.beta1 = betas.first;
    o.beta2 = betas.second;
    o.eps = eps;
    o.weight_decay = weight_decay;
    o.decay = decay;
    adam_update_(p, s[1].second, s[2].second, amsgrad ? s[3].second : no_max, g, lr, count, o);
    return;
  }
  Tensor grad = g;
  if (weight_decay != 0.0 && decay == AdamDecay::L2) grad = add(g, mul(as_float(p), weight_decay));
  // The decay factor reads the lr tensor, so a scheduler's change reaches traced graphs.
  if (weight_decay != 0.0 && decay == AdamDecay::Decoupled)
    scale_param(p, add(mul(lr, -weight_decay), 1.0));
  adam_update_composite(p, grad, s, lr, betas, eps, amsgrad);
}

}  // namespace detail

// State keys per parameter: "step", "exp_avg", "exp_avg_sq" (+ "max_exp_avg_sq" with amsgrad).
class Adam : public OptimizerWithOptions<AdamOptions> {
 public:
  Adam(std::vector<Tensor> params, const AdamOptions& options)
      : OptimizerWithOptions("Adam", options) {
    add_param_group(std::move(params), options);
  }

  void step() override {
    NoGradGuard ng;
    for_each_with_grad([&](Tensor& p, Tensor g, size_t i, const AdamOptions& o, Group& grp) {
      detail::adam_step(p, g, state_[i], grp.lr, o.betas(), o.eps(), o.weight_decay(),
                        AdamDecay::L2, o.amsgrad());
    });
  }

 protected:
  void validate(const AdamOptions& o) const override {
    detail::check_adam_like("Adam", o.lr(), o.betas(), o.eps(), o.weight_decay());
  }
  void init_state(size_t index, const Tensor& p, const AdamOptions& o) override {
    detail::init_adam_state(state_[index], p, o.amsgrad());
  }
};

}  // namespace ipuml::optim
