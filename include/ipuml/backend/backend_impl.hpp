// Bodies of the backend registry, the fallback reports and the interface's defaults (compiled
// once in src/lib/backend.cpp).
#pragma once

#include <iostream>
#include <mutex>
#include <set>
#include <utility>

#include <ipuml/backend/backend.hpp>

namespace ipuml::backend {

IPUML_INLINE std::vector<std::vector<Tensor>> Executable::run_many(
    const std::vector<RunItem>& items) {
  std::vector<std::vector<Tensor>> out;
  for (auto& it : items) out.push_back(run(it.inputs, *it.states, it.step));
  return out;
}

IPUML_INLINE void Backend::run_eager(Device device, ir::OpKind kind, const ir::Attrs& attrs,
                                     const std::vector<Tensor>& inputs,
                                     std::vector<Tensor>& outputs) const {
  (void)inputs;
  (void)outputs;
  (void)attrs;
  fail("backend '", name(), "' has no eager kernels: cannot run ", ir::op_name(kind), " on ",
       device);
}

IPUML_INLINE std::map<std::string, std::shared_ptr<Backend>>& registry() {
  static std::map<std::string, std::shared_ptr<Backend>> r;
  return r;
}

IPUML_INLINE bool register_backend(std::shared_ptr<Backend> b) {
  auto& slot = registry()[b->name()];
  slot = std::move(b);
  if (auto type = slot->eager_device_type())
    eager_tables()[static_cast<size_t>(*type)] = slot.get();
  return true;
}

IPUML_INLINE std::vector<Device> eager_devices() {
  std::vector<Device> out;
  for (size_t i = 0; i < eager_tables().size(); ++i)
    if (eager_tables()[i]) out.emplace_back(static_cast<DeviceType>(i), 0);
  return out;
}

namespace detail {
struct FallbackReports {
  std::mutex mu;
  std::set<std::pair<std::string, int>> seen;
};
inline FallbackReports& fallback_reports() {
  static FallbackReports* r = new FallbackReports();
  return *r;
}
}  // namespace detail

IPUML_INLINE void report_fallback(const Backend& b, ir::OpKind kind) {
  auto& r = detail::fallback_reports();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.seen.emplace(b.name(), static_cast<int>(kind)).second) return;
  std::cerr << "ipuml: backend '" << b.name() << "' does not run " << ir::op_name(kind)
            << "; running it on the CPU with copies (reported once)\n";
}

IPUML_INLINE void reset_fallback_reports() {
  auto& r = detail::fallback_reports();
  std::lock_guard<std::mutex> lock(r.mu);
  r.seen.clear();
}

IPUML_INLINE std::vector<std::string> backend_names() {
  std::vector<std::string> n;
  for (auto& [k, v] : registry()) n.push_back(k);
  return n;
}

IPUML_INLINE std::shared_ptr<Backend> get_backend(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (auto& k : backend_names()) known += (known.empty() ? "" : ", ") + k;
    fail("unknown backend '", name, "': registered backends are ", known);
  }
  return it->second;
}

}  // namespace ipuml::backend
