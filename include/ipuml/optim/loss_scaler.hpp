// Loss scaling for low-precision training: scale the loss before backward, unscale the
// gradients before the update, and skip the update when a gradient is inf or NaN. Static by
// default; LossScaler::dynamic() also adapts the scale as torch.cuda.amp.GradScaler does: an
// overflow multiplies it by the backoff factor, every `growth_interval` clean steps in a row by
// the growth factor. Use it instead of the optimizer's own loss_scaling, not with it.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <ipuml/optim/optimizer.hpp>

namespace ipuml::optim {

class LossScaler {
 public:
  explicit LossScaler(double scale = 1.0) : scale_(scale) {
    detail::check_range(std::isfinite(scale) && scale > 0.0, "LossScaler", "scale", scale,
                        "a finite value > 0");
  }

  // GradScaler's defaults: 2^16, x2 after 2000 clean steps, x0.5 on overflow.
  static LossScaler dynamic(double init_scale = 65536.0, double growth_factor = 2.0,
                            double backoff_factor = 0.5, int64_t growth_interval = 2000) {
    LossScaler s(init_scale);
    detail::check_range(std::isfinite(growth_factor) && growth_factor > 1.0, "LossScaler",
                        "growth_factor", growth_factor, "a finite value > 1");
    detail::check_range(backoff_factor > 0.0 && backoff_factor < 1.0, "LossScaler",
                        "backoff_factor", backoff_factor, "a value in (0, 1)");
    detail::check_range(growth_interval >= 1, "LossScaler", "growth_interval",
                        static_cast<double>(growth_interval), ">= 1");
    s.dynamic_ = true;
    s.growth_ = growth_factor;
    s.backoff_ = backoff_factor;
    s.interval_ = growth_interval;
    return s;
  }

  bool is_dynamic() const { return dynamic_; }
  double scale_value() const { return scale_; }
  // loss * scale: call backward on this.
  // A half loss is scaled in float32 (its scaled value may exceed float16's range; the
  // gradient flowing back through the cast is half again).
  Tensor scale(const Tensor& loss) const {
    return mul(loss.dtype() == kFloat32 ? loss : cast(loss, kFloat32), scale_);
  }

  // Multiplies every gradient of `opt`'s parameters by 1/scale. Returns a float32 scalar that is
  // 1 when some gradient holds inf or NaN and 0 otherwise (tensor ops only: traceable).
  Tensor unscale_(Optimizer& opt) {
    NoGradGuard ng;
    Tensor probe;
    for (auto p : opt.parameters()) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      const Tensor gs = mul(g, 1.0 / scale_);
      detail::replace_grad(p, gs);
      // inf*0 and NaN*0 are NaN, finite*0 is 0: the sum is NaN exactly when something is not
      // finite.
      const Tensor s = sum(mul(cast(gs, kFloat32), 0.0));
      probe = probe.defined() ? add(probe, s) : s;
    }
    found_inf_ = probe.defined() ? cast(ne(probe, probe), kFloat32) : scalar_tensor(0.0);
    unscaled_ = true;
    return found_inf_;
  }

  // Unscales (unless unscale_ ran since the last step), then runs opt.step() when every gradient
  // is finite. Returns false, counts and remembers the skip when one is not: the parameters and
  // the optimizer state are left untouched. Eager only (the decision reads the gradients).
  bool step(Optimizer& opt) {
    IPUML_CHECK(!ir::is_tracing(),
                "LossScaler.step: deciding to skip a step reads the gradient "
                "values, which a traced graph does not have; trace unscale_() "
                "and opt.step() instead");
    if (!unscaled_) unscale_(opt);
    unscaled_ = false;
    ++steps_;
    last_skipped_ = found_inf_.item<float>() != 0.0f;
    if (last_skipped_) {
      ++skipped_;
      if (dynamic_) {
        scale_ = std::max(scale_ * backoff_, std::numeric_limits<double>::min());
        clean_ = 0;
      }
      return false;
    }
    opt.step();
    if (dynamic_ && ++clean_ >= interval_) {
      const double grown = scale_ * growth_;
      if (std::isfinite(grown)) scale_ = grown;
      clean_ = 0;
    }
    return true;
  }

  int64_t steps() const { return steps_; }
  int64_t skipped_steps() const { return skipped_; }
  bool last_step_skipped() const { return last_skipped_; }

 private:
  double scale_;
  bool dynamic_ = false;
  double growth_ = 2.0, backoff_ = 0.5;
  int64_t interval_ = 2000, clean_ = 0;
  Tensor found_inf_;
  bool unscaled_ = false;
  bool last_skipped_ = false;
  int64_t steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace ipuml::optim
