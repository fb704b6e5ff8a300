// Whether ops record autograd history (per thread), and guards that switch it off or on.
// Optimizer updates and evaluation run under NoGradGuard.
#pragma once

namespace ipuml::autograd {

inline bool& grad_mode_flag() {
  static thread_local bool enabled = true;
  return enabled;
}
inline bool is_grad_enabled() { return grad_mode_flag(); }

class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(grad_mode_flag()) { grad_mode_flag() = enabled; }
  ~GradModeGuard() { grad_mode_flag() = prev_; }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace ipuml::autograd

namespace ipuml {
struct NoGradGuard : autograd::GradModeGuard {
  NoGradGuard() : autograd::GradModeGuard(false) {}
};
struct EnableGradGuard : autograd::GradModeGuard {
  EnableGradGuard() : autograd::GradModeGuard(true) {}
};
}  // namespace ipuml
