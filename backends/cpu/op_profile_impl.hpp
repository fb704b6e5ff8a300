// Bodies of the CPU executor's op profile.
#pragma once

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include <ipuml/backends/cpu/op_profile.hpp>

namespace ipuml::cpu {

namespace detail {
struct OpProfileState {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::map<std::string, OpProfileRow> rows;
};
IPUML_INLINE OpProfileState& op_profile_state() {
  static OpProfileState s;
  return s;
}
}  // namespace detail

IPUML_INLINE void set_op_profiling(bool on) {
  detail::op_profile_state().on.store(on);
  ipuml::detail::set_loop_accounting(on);
}
IPUML_INLINE bool op_profiling() {
  return detail::op_profile_state().on.load(std::memory_order_relaxed);
}
IPUML_INLINE void reset_op_profile() {
  auto& s = detail::op_profile_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.rows.clear();
}
IPUML_INLINE std::vector<OpProfileRow> op_profile() {
  auto& s = detail::op_profile_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<OpProfileRow> out;
  for (const auto& [name, row] : s.rows) out.push_back(row);
  std::stable_sort(out.begin(), out.end(), [](const OpProfileRow& a, const OpProfileRow& b) {
    return a.seconds > b.seconds;
  });
  return out;
}
IPUML_INLINE void record_op_time(ir::OpKind kind, const ir::Attrs& attrs, double seconds) {
  std::string name = ir::op_name(kind);
  if ((kind == ir::OpKind::Conv || kind == ir::OpKind::ConvBackwardInput ||
       kind == ir::OpKind::ConvBackwardWeight) &&
      attrs.kernel.size() == 2 && attrs.stride.size() == 2)
    name += " k=" + std::to_string(attrs.kernel[0]) + "x" + std::to_string(attrs.kernel[1]) +
            " s=" + std::to_string(attrs.stride[0]);
  record_op_time(name, seconds);
}
IPUML_INLINE void record_op_time(const std::string& name, double seconds) {
  const ipuml::detail::LoopTotals loops = ipuml::detail::take_loop_totals();
  const double serial = std::max(0.0, seconds - loops.seconds);
  auto& s = detail::op_profile_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  OpProfileRow& row = s.rows[name];
  row.name = name;
  row.seconds += seconds;
  ++row.calls;
  row.work += serial + loops.work;
  row.least += serial + loops.least;
  row.threads = std::max(1, ipuml::get_num_threads());
}

}  // namespace ipuml::cpu
