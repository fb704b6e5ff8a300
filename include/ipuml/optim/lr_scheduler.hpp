// Learning-rate schedulers: StepLR, cosine with linear warm-up, ReduceLROnPlateau, and linear
// warm-up followed by ReduceLROnPlateau. They write the optimizer's lr tensors, so graphs traced
// once pick up every change. Their state is one small struct for checkpoints.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/optim/optimizer.hpp>

namespace ipuml::optim {

// Everything a scheduler needs to resume (fields a scheduler does not use stay at defaults).
struct SchedulerState {
  int64_t last_epoch = 0;        // scheduler.step() calls so far
  std::vector<double> base_lrs;  // the optimizer's lrs when the scheduler was made
  std::vector<double> last_lrs;  // the lrs it set last
  // ReduceLROnPlateau.
  double best = 0.0;
  int64_t num_bad_epochs = 0;
  int64_t cooldown_counter = 0;
};

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one step (epoch or iteration, as the caller uses it).
  virtual void step() = 0;
  // Advances with a metric; schedulers that do not use one ignore it.
  virtual void step(double metric) {
    (void)metric;
    step();
  }
  const std::vector<double>& get_last_lr() const { return state_.last_lrs; }
  int64_t last_epoch() const { return state_.last_epoch; }
  Optimizer& optimizer() const { return *opt_; }

  const SchedulerState& state() const { return state_; }
  // Restores a saved state and re-applies its lrs to the optimizer.
  void load_state(const SchedulerState& s) {
    IPUML_CHECK(s.base_lrs.size() == opt_->num_param_groups() &&
                    s.last_lrs.size() == opt_->num_param_groups(),
                "LRScheduler.load_state: the state has ", s.base_lrs.size(), " base lrs and ",
                s.last_lrs.size(), " last lrs, but the optimizer has ", opt_->num_param_groups(),
                " param groups");
    state_ = s;
    apply(state_.last_lrs);
  }

 protected:
  explicit LRScheduler(Optimizer& opt) : opt_(&opt) {
    state_.base_lrs = opt.get_lrs();
    state_.last_lrs = state_.base_lrs;
  }
  void apply(const std::vector<double>& lrs) {
    for (size_t g = 0; g < lrs.size(); ++g) opt_->set_lr(g, lrs[g]);
    state_.last_lrs = lrs;
  }

  Optimizer* opt_;
  SchedulerState state_;
};

// lr_g = base_lr_g * factor(epoch): epoch 0 is applied at construction, each step() advances.
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& opt, std::function<double(int64_t)> factor)
      : LRScheduler(opt), factor_(std::move(factor)) {
    IPUML_CHECK(static_cast<bool>(factor_), "LambdaLR: the factor function is empty");
    apply_epoch();
  }
  void step() override {
    ++state_.last_epoch;
    apply_epoch();
  }

 protected:
  void apply_epoch() {
    const double f = factor_(state_.last_epoch);
    IPUML_CHECK(std::isfinite(f) && f >= 0.0, "LRScheduler: lr factor at step ", state_.last_epoch,
                " is ", f, " (expected a finite value >= 0)");
    std::vector<double> lrs;
    for (double b : state_.base_lrs) lrs.push_back(b * f);
    apply(lrs);
  }

 private:
  std::function<double(int64_t)> factor_;
};

// lr = base_lr * gamma^floor(epoch / step_size) (torch.optim.lr_scheduler.StepLR).
class StepLR : public LambdaLR {
 public:
  StepLR(Optimizer& opt, int64_t step_size, double gamma = 0.1)
      : LambdaLR(opt, checked_factor(step_size, gamma)) {}

 private:
  static std::function<double(int64_t)> checked_factor(int64_t step_size, double gamma) {
    IPUML_CHECK(step_size > 0, "StepLR: invalid step_size ", step_size, " (expected > 0)");
    IPUML_CHECK(std::isfinite(gamma) && gamma >= 0.0, "StepLR: invalid gamma ", gamma,
                " (expected a finite value >= 0)");
    return [step_size, gamma](int64_t e) {
      return std::pow(gamma, static_cast<double>(e / step_size));
    };
  }
};

// Linear warm-up from 0, then half a cosine down to 0 at total_steps (HuggingFace's
// get_cosine_schedule_with_warmup): factor = e/warmup for e < warmup, else
// 0.5*(1 + cos(pi*(e - warmup)/(total - warmup))), held at 0 after total_steps.
class CosineWithWarmup : public LambdaLR {
 public:
  CosineWithWarmup(Optimizer& opt, int64_t warmup_steps, int64_t total_steps)
      : LambdaLR(opt, checked_factor(warmup_steps, total_steps)) {}

 private:
  static std::function<double(int64_t)> checked_factor(int64_t warmup, int64_t total) {
    IPUML_CHECK(warmup >= 0, "CosineWithWarmup: invalid warmup_steps ", warmup, " (expected >= 0)");
    IPUML_CHECK(total > warmup, "CosineWithWarmup: invalid total_steps ", total,
                " (expected > warmup_steps = ", warmup, ")");
    return [warmup, total](int64_t e) {
      if (e < warmup) return static_cast<double>(e) / static_cast<double>(warmup);
      const double progress =
          std::min(1.0, static_cast<double>(e - warmup) / static_cast<double>(total - warmup));
      return 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    };
  }
};

struct ReduceLROnPlateauOptions {
  IPUML_OPTIM_ARG(std::string, mode, "min");  // "min" or "max"
  IPUML_OPTIM_ARG(double, factor, 0.1);
  IPUML_OPTIM_ARG(int64_t, patience, 10);
  IPUML_OPTIM_ARG(double, threshold, 1e-4);
  IPUML_OPTIM_ARG(std::string, threshold_mode, "rel");  // "rel" or "abs"
  IPUML_OPTIM_ARG(int64_t, cooldown, 0);
  IPUML_OPTIM_ARG(double, min_lr, 0.0);
  IPUML_OPTIM_ARG(double, eps, 1e-8);
};

// torch.optim.lr_scheduler.ReduceLROnPlateau: after more than `patience` steps without
// improvement (rel: better than best*(1 -/+ threshold); abs: best -/+ threshold), lr *= factor
// (not below min_lr; changes smaller than eps are skipped), then `cooldown` steps of rest.
class ReduceLROnPlateau : public LRScheduler {
 public:
  ReduceLROnPlateau(Optimizer& opt, ReduceLROnPlateauOptions o = {})
      : LRScheduler(opt), o_(std::move(o)) {
    validate(o_);
    state_.best = worst();
  }

  void step() override {
    fail("ReduceLROnPlateau: step() needs the monitored metric; call step(metric)");
  }
  void step(double metric) override {
    IPUML_CHECK(!std::isnan(metric), "ReduceLROnPlateau: the metric is NaN");
    ++state_.last_epoch;
    if (is_better(metric)) {
      state_.best = metric;
      state_.num_bad_epochs = 0;
    } else {
      ++state_.num_bad_epochs;
    }
    if (state_.cooldown_counter > 0) {
      --state_.cooldown_counter;
      state_.num_bad_epochs = 0;
    }
    if (state_.num_bad_epochs > o_.patience()) {
      reduce();
      state_.cooldown_counter = o_.cooldown();
      state_.num_bad_epochs = 0;
    }
    state_.last_lrs = opt_->get_lrs();
  }

  const ReduceLROnPlateauOptions& options() const { return o_; }

 private:
  static void validate(const ReduceLROnPlateauOptions& o) {
    IPUML_CHECK(o.mode() == "min" || o.mode() == "max", "ReduceLROnPlateau: invalid mode '",
                o.mode(), "' (expected \"min\" or \"max\")");
    IPUML_CHECK(o.threshold_mode() == "rel" || o.threshold_mode() == "abs",
                "ReduceLROnPlateau: invalid threshold_mode '", o.threshold_mode(),
                "' (expected \"rel\" or \"abs\")");
    detail::check_range(o.factor() >= 0.0 && o.factor() < 1.0, "ReduceLROnPlateau", "factor",
                        o.factor(), "in [0, 1)");
    IPUML_CHECK(o.patience() >= 0, "ReduceLROnPlateau: invalid patience ", o.patience(),
                " (expected >= 0)");
    IPUML_CHECK(o.cooldown() >= 0, "ReduceLROnPlateau: invalid cooldown ", o.cooldown(),
                " (expected >= 0)");
    detail::check_range(o.threshold() >= 0.0, "ReduceLROnPlateau", "threshold", o.threshold(),
                        ">= 0");
    detail::check_range(o.min_lr() >= 0.0, "ReduceLROnPlateau", "min_lr", o.min_lr(), ">= 0");
    detail::check_range(o.eps() >= 0.0, "ReduceLROnPlateau", "eps", o.eps(), ">= 0");
  }
  double worst() const {
    const double inf = std::numeric_limits<double>::infinity();
    return o_.mode() == "min" ? inf : -inf;
  }
  bool is_better(double a) const {
    const double best = state_.best;
    const bool rel = o_.threshold_mode() == "rel";
    if (o_.mode() == "min")
      return rel ? a < best * (1.0 - o_.threshold()) : a < best - o_.threshold();
    return rel ? a > best * (1.0 + o_.threshold()) : a > best + o_.threshold();
  }
  void reduce() {
    for (size_t g = 0; g < opt_->num_param_groups(); ++g) {
      const double old_lr = opt_->get_lr(g);
      const double new_lr = std::max(old_lr * o_.factor(), o_.min_lr());
      if (old_lr - new_lr > o_.eps()) opt_->set_lr(g, new_lr);
    }
  }

  ReduceLROnPlateauOptions o_;
};

// The Neuron-Inverter schedule: for the first `warmup_epochs` epochs lr = base_lr *
// (epoch+1)/warmup_epochs, then ReduceLROnPlateau on the validation loss. Call step(val_loss)
// at the end of every epoch; losses of warm-up epochs do not feed the plateau detector.
class LinearWarmupThenPlateau : public LRScheduler {
 public:
  LinearWarmupThenPlateau(Optimizer& opt, int64_t warmup_epochs,
                          ReduceLROnPlateauOptions plateau = {})
      : LRScheduler(opt), warmup_(warmup_epochs) {
    IPUML_CHECK(warmup_epochs >= 0, "LinearWarmupThenPlateau: invalid warmup_epochs ",
                warmup_epochs, " (expected >= 0)");
    apply_warmup(0);
    plateau_ = std::make_unique<ReduceLROnPlateau>(opt, std::move(plateau));
  }

  void step() override {
    fail("LinearWarmupThenPlateau: step() needs the validation loss; call step(metric)");
  }
  void step(double metric) override {
    const int64_t finished = state_.last_epoch;  // the epoch this metric belongs to
    if (finished >= warmup_) {
      plateau_->step(metric);
    } else {
      apply_warmup(finished + 1);
    }
    ++state_.last_epoch;
    state_.last_lrs = opt_->get_lrs();
  }

  bool in_warmup() const { return state_.last_epoch < warmup_; }
  const ReduceLROnPlateau& plateau() const { return *plateau_; }
  // Both parts' states (the plateau's best/bad-epoch counters live in the second).
  std::pair<SchedulerState, SchedulerState> full_state() const {
    return {state_, plateau_->state()};
  }
  void load_full_state(const std::pair<SchedulerState, SchedulerState>& s) {
    plateau_->load_state(s.second);
    load_state(s.first);
  }

 private:
  void apply_warmup(int64_t epoch) {
    if (warmup_ == 0 || epoch >= warmup_) {
      apply(state_.base_lrs);
      return;
    }
    std::vector<double> lrs;
    for (double b : state_.base_lrs)
      lrs.push_back(b * static_cast<double>(epoch + 1) / static_cast<double>(warmup_));
    apply(lrs);
  }

  int64_t warmup_;
  std::unique_ptr<ReduceLROnPlateau> plateau_;
};

}  // namespace ipuml::optim
