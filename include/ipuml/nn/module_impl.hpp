// Bodies of nn::Module's registration, traversal, state dicts, dtype and device moves and
// printing (compiled once in src/lib/nn_module.cpp).
#pragma once

#include <ostream>
#include <sstream>
#include <unordered_set>

#include <ipuml/nn/module.hpp>

namespace ipuml::nn {

IPUML_INLINE const Tensor* find_in(const StateDict& d, const std::string& name) {
  for (auto& [k, v] : d)
    if (k == name) return &v;
  return nullptr;
}

IPUML_INLINE std::string Module::extra_repr() const { return ""; }

IPUML_INLINE Tensor Module::forward(const Tensor& x) {
  (void)x;
  fail(type_name_, ": this module has no single-tensor forward(Tensor)");
}

IPUML_INLINE Tensor& Module::register_parameter(const std::string& name, Tensor t,
                                                bool requires_grad) {
  check_name(name);
  if (t.defined() && requires_grad) t.requires_grad_(true);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

IPUML_INLINE Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name);
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

IPUML_INLINE Tensor& Module::replace_parameter(const std::string& name, Tensor t,
                                               bool requires_grad) {
  for (auto& [k, v] : params_)
    if (k == name) {
      if (t.defined() && requires_grad && !t.requires_grad()) t.requires_grad_(true);
      v = std::move(t);
      return v;
    }
  fail(type_name_, ": no parameter named '", name, "'");
}

IPUML_INLINE void Module::replace_module(const std::string& name, std::shared_ptr<Module> m) {
  for (auto& [k, v] : children_)
    if (k == name) {
      v = std::move(m);
      return;
    }
  fail(type_name_, ": no child module named '", name, "'");
}

IPUML_INLINE StateDict Module::named_parameters(bool recurse) const {
  StateDict all;
  collect(all, "", recurse, true, false);
  StateDict out;
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [k, v] : all)
    if (seen.insert(v.impl()).second) out.emplace_back(k, v);
  return out;
}

IPUML_INLINE StateDict Module::named_buffers(bool recurse) const {
  StateDict out;
  collect(out, "", recurse, false, true);
  return out;
}

IPUML_INLINE std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [k, v] : named_parameters(recurse)) out.push_back(v);
  return out;
}

IPUML_INLINE std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [k, v] : named_buffers(recurse)) out.push_back(v);
  return out;
}

IPUML_INLINE std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules(
    const std::string& prefix) const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  for (auto& [k, c] : children_) {
    const std::string name = prefix.empty() ? k : prefix + "." + k;
    out.emplace_back(name, c);
    auto sub = c->named_modules(name);
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

IPUML_INLINE void Module::train(bool on) {
  training_ = on;
  for (auto& [k, c] : children_) c->train(on);
}

IPUML_INLINE void Module::begin_block(int ipu) {
  IPUML_CHECK(ipu >= 0, type_name_, ": BeginBlock ipu_id must be non-negative, got ", ipu);
  block_placement_ = ipu;
}

IPUML_INLINE void Module::zero_grad() {
  for (auto& p : parameters()) p.set_grad(Tensor());
}

IPUML_INLINE StateDict Module::state_dict() const {
  StateDict out;
  collect(out, "", true, true, true);
  return out;
}

IPUML_INLINE void Module::load_state_dict(const StateDict& d, bool strict) {
  StateDict mine = state_dict();
  NoGradGuard ng;
  for (auto& [k, t] : mine) {
    const Tensor* src = find_in(d, k);
    if (!src) {
      IPUML_CHECK(!strict, "load_state_dict: missing key '", k, "' in the state dict");
      continue;
    }
    IPUML_CHECK(src->shape() == t.shape(), "load_state_dict: '", k, "' has shape ",
                shape_str(src->shape()), " in the state dict but ", shape_str(t.shape()),
                " in the model");
    Tensor dst = t;
    dst.copy_(*src);
  }
  if (strict)
    for (auto& [k, v] : d)
      IPUML_CHECK(find_in(mine, k) != nullptr, "load_state_dict: unexpected key '", k, "'");
}

IPUML_INLINE Module& Module::to(DType dtype) {
  IPUML_CHECK(is_floating(dtype), type_name_, ".to: expected a floating-point dtype (float32, ",
              "float16 or bfloat16), got ", dtype_name(dtype));
  IPUML_CHECK(!ir::is_tracing(), type_name_, ".to: cannot change dtypes while tracing");
  NoGradGuard ng;
  for (auto& [k, t] : state_dict()) {
    if (!t.defined() || !is_floating(t.dtype()) || t.dtype() == dtype) continue;
    const Tensor c = cast(t, dtype).contiguous();
    auto& impl = *t.impl();
    impl.storage = c.impl()->storage;
    impl.offset = c.impl()->offset;
    impl.strides = c.strides();
    impl.dtype = dtype;
    impl.grad.reset();
    impl.version++;
  }
  return *this;
}

IPUML_INLINE Module& Module::to(Device device) {
  IPUML_CHECK(!ir::is_tracing(), type_name_, ".to: cannot move a module while tracing");
  NoGradGuard ng;
  for (auto& [k, t] : state_dict()) {
    if (!t.defined() || t.device() == device) continue;
    const Tensor c = detail::copy_to_device(t, device);
    auto& impl = *t.impl();
    impl.storage = c.impl()->storage;
    impl.offset = 0;
    impl.strides = c.strides();
    if (impl.grad) impl.grad = detail::copy_to_device(Tensor(impl.grad), device).impl_ptr();
    impl.version++;
  }
  return *this;
}

IPUML_INLINE Module& Module::to(Device device, DType dtype) {
  to(dtype);
  return to(device);
}

IPUML_INLINE void Module::print(std::ostream& os, int indent) const {
  os << type_name_ << '(';
  if (children_.empty()) {
    os << extra_repr() << ')';
    return;
  }
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  const std::string extra = extra_repr();
  if (!extra.empty()) os << '\n' << pad << extra;
  for (auto& [k, c] : children_) {
    os << '\n' << pad << '(' << k << "): ";
    c->print(os, indent + 2);
  }
  os << '\n' << std::string(static_cast<size_t>(indent), ' ') << ')';
}

IPUML_INLINE std::string Module::to_string() const {
  std::ostringstream os;
  print(os);
  return os.str();
}

IPUML_INLINE void Module::check_name(const std::string& name) const {
  IPUML_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name_,
              ": invalid member name '", name, "' (must be non-empty and contain no '.')");
  for (auto* list : {&params_, &buffers_})
    for (auto& [k, v] : *list)
      IPUML_CHECK(k != name, type_name_, ": a member named '", name, "' already exists");
  for (auto& [k, v] : children_)
    IPUML_CHECK(k != name, type_name_, ": a member named '", name, "' already exists");
}

IPUML_INLINE void Module::collect(StateDict& out, const std::string& prefix, bool recurse,
                                  bool params, bool bufs) const {
  if (params)
    for (auto& [k, v] : params_)
      if (v.defined()) out.emplace_back(prefix + k, v);
  if (bufs)
    for (auto& [k, v] : buffers_)
      if (v.defined()) out.emplace_back(prefix + k, v);
  if (!recurse) return;
  for (auto& [k, c] : children_) c->collect(out, prefix + k + ".", true, params, bufs);
}

IPUML_INLINE std::ostream& operator<<(std::ostream& os, const Module& m) {
  m.print(os);
  return os;
}

}  // namespace ipuml::nn
