// Finite-difference checking of gradients: compares autograd's gradients of a function with
// central differences (accumulated in double), as the op tests and users' custom ops need.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <ipuml/tensor/ops.hpp>

namespace ipuml::autograd {

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  std::string message;  // the worst element when !ok
};

// f maps the inputs to one tensor; the checked scalar is sum(f(inputs) * w) for a fixed
// random w. Inputs that require grad are perturbed one element at a time by +-eps.
inline GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                 std::vector<Tensor> inputs, double eps = 1e-2, double atol = 2e-3,
                                 double rtol = 2e-2) {
  Generator gen(1234);
  Tensor out0 = f(inputs);
  Tensor w = randn(out0.shape(), &gen);
  auto scalar = [&](const std::vector<Tensor>& in) {
    NoGradGuard ng;
    Tensor o = f(in);
    auto ov = o.to_vector<double>();
    auto wv = w.to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < ov.size(); ++i) s += ov[i] * wv[i];
    return s;
  };
  for (auto& t : inputs)
    if (t.requires_grad()) t.set_grad(Tensor());
  sum(mul(out0, w)).backward();
  GradcheckResult r;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].requires_grad()) continue;
    Tensor analytic = inputs[k].grad();
    std::vector<double> ag = analytic.defined() ? analytic.to_vector<double>()
                                                : std::vector<double>(inputs[k].numel(), 0.0);
    Tensor x = inputs[k];
    float* p = x.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float orig = p[i];
      p[i] = static_cast<float>(orig + eps);
      const double up = scalar(inputs);
      p[i] = static_cast<float>(orig - eps);
      const double down = scalar(inputs);
      p[i] = orig;
      const double numeric = (up - down) / (2 * eps);
      const double err = std::abs(numeric - ag[static_cast<size_t>(i)]);
      r.max_abs_error = std::max(r.max_abs_error, err);
      if (err > atol + rtol * std::abs(numeric) && r.ok) {
        r.ok = false;
        r.message = detail::str("input ", k, " element ", i, ": analytic ",
                                ag[static_cast<size_t>(i)], " vs numeric ", numeric);
      }
    }
  }
  return r;
}

}  // namespace ipuml::autograd
