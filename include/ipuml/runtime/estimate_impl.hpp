// Body of print_estimate (compiled once, with the runtime).
#pragma once

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include <ipuml/runtime/estimate.hpp>

namespace ipuml::runtime {

namespace edetail {

inline std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

inline std::string megabytes(int64_t bytes) {
  return fixed(static_cast<double>(bytes) / 1e6, 1) + " MB";
}

// Cycles, and the seconds they take: "5678901 cycles (4.270 ms)".
inline std::string cycles_and_time(const Estimate& e, double seconds) {
  std::string s;
  if (e.clock_hz > 0) s = fixed(std::round(e.cycles(seconds)), 0) + " cycles (";
  s += seconds >= 1 ? fixed(seconds, 3) + " s" : fixed(seconds * 1e3, 3) + " ms";
  if (e.clock_hz > 0) s += ")";
  return s;
}

inline void print_memory(std::ostream& os, const Estimate& e) {
  const auto& m = e.memory;
  os << "  memory: " << (m.fits ? "fits" : "DOES NOT FIT");
  if (!m.fullest_unit.empty() && m.unit_bytes > 0) {
    os << " (fullest " << m.unit << " of each " << m.device << ": ";
    for (size_t i = 0; i < m.fullest_unit.size(); ++i)
      os << (i ? " / " : "")
         << fixed(
                100.0 * static_cast<double>(m.fullest_unit[i]) / static_cast<double>(m.unit_bytes),
                1)
         << " %";
    os << " of " << m.unit_bytes << " bytes)";
  }
  os << "\n";
  if (!m.device_bytes.empty()) {
    os << "    per " << m.device << ":";
    for (size_t i = 0; i < m.device_bytes.size(); ++i)
      os << (i ? ", " : " ") << megabytes(m.device_bytes[i]);
    os << "\n";
  }
  if (!m.categories.empty()) {
    os << "    by category:";
    for (size_t i = 0; i < m.categories.size(); ++i)
      os << (i ? ", " : " ") << m.categories[i].first << " " << megabytes(m.categories[i].second);
    os << "\n";
  }
  if (!m.fits && !m.message.empty()) {
    std::istringstream lines(m.message);
    for (std::string line; std::getline(lines, line);) os << "    " << line << "\n";
  }
}

// The shares of a host call's time: the step program's split over its micro-batches as they
// are scheduled, the update program's, and the all-reduce's.
inline void print_time_split(std::ostream& os, const Estimate& e) {
  const bool training = e.program == "training";
  const double step_total = e.step_split.total(), update_total = e.update_split.total();
  if (step_total <= 0) return;
  const double steps = training ? e.accumulation_seconds : e.micro_batch_seconds;
  const double update = training ? e.update_seconds : 0,
               allreduce = training ? e.allreduce_seconds : 0;
  auto part = [&](double step_part, double update_part) {
    return steps * step_part / step_total +
           (update_total > 0 ? update * update_part / update_total : 0);
  };
  const double compute = part(e.step_split.compute, e.update_split.compute),
               exchange = part(e.step_split.exchange, e.update_split.exchange),
               sync = part(e.step_split.sync, e.update_split.sync),
               host = part(e.step_split.host, e.update_split.host);
  const double all = compute + exchange + sync + host + allreduce;
  if (all <= 0) return;
  auto pct = [&](double v) { return fixed(100.0 * v / all, 1) + " %"; };
  os << "  where the time goes" << (training ? " (one weight update)" : "") << ": compute "
     << pct(compute) << ", exchange " << pct(exchange) << ", sync " << pct(sync) << ", host "
     << pct(host);
  if (training) os << ", all-reduce " << pct(allreduce);
  os << "\n";
}

}  // namespace edetail

IPUML_INLINE void print_estimate(std::ostream& os, const Estimate& e) {
  os << "Compile-only estimate of the " << e.program << " program on " << e.target << "\n";
  print_configuration(os, e);
  os << "  estimated in " << edetail::fixed(e.wall_seconds, 1)
     << " s of wall clock, without executing a kernel\n";
}

IPUML_INLINE void print_configuration(std::ostream& os, const Estimate& e) {
  using edetail::cycles_and_time;
  const bool training = e.program == "training";
  os << "  configuration: micro-batch " << e.micro_batch;
  if (training) os << " x gradient accumulation " << e.gradient_accumulation;
  os << " x " << e.replicas << " replica" << (e.replicas == 1 ? "" : "s") << " of "
     << e.devices_per_replica << " " << e.memory.device << (e.devices_per_replica == 1 ? "" : "s")
     << (e.pipelined ? " (pipelined)" : "") << " x " << e.device_iterations << " device iteration"
     << (e.device_iterations == 1 ? "" : "s");
  if (e.instances > 1) os << " x " << e.instances << " instances";
  os << " = " << e.samples_per_call * e.instances << " samples per host call\n";
  edetail::print_memory(os, e);
  os << "  one micro-batch: " << cycles_and_time(e, e.micro_batch_seconds) << "\n";
  if (training) {
    os << "  one weight update: " << cycles_and_time(e, e.iteration_seconds()) << " = "
       << e.gradient_accumulation << " micro-batch" << (e.gradient_accumulation == 1 ? "" : "es")
       << " " << cycles_and_time(e, e.accumulation_seconds);
    if (e.update_seconds > 0) os << " + optimizer step " << cycles_and_time(e, e.update_seconds);
    if (e.allreduce_seconds > 0)
      os << " + gradient all-reduce " << cycles_and_time(e, e.allreduce_seconds);
    os << "\n";
  }
  edetail::print_time_split(os, e);
  os << "  one host call: " << cycles_and_time(e, e.call_seconds) << "\n";
  os << "  projected throughput: " << edetail::fixed(e.samples_per_second(), 1) << " samples/s\n";
}

}  // namespace ipuml::runtime
