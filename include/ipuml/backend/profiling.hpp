// The optional profiling interface of a compiled program: what a backend that models its device
// (the IPU emulator) reports about it — a JSON report, a terminal summary and the modelled device
// time. Backends without a model (the CPU) do not implement it; Executable::profiling() is then
// null and callers report wall-clock time only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace ipuml::backend {

class Profiling {
 public:
  virtual ~Profiling() = default;
  // The backend's report (memory, cycles) as JSON text.
  virtual std::string report_json() const = 0;
  // A short human-readable report (memory, busiest tiles, cycles) for the terminal, with
  // throughput for `samples_per_step` samples per run (PopTorch's printProfileSummary).
  virtual void print_summary(std::ostream& os, double samples_per_step) const = 0;
  // The modelled device time of the last run, in seconds.
  virtual double simulated_seconds() const = 0;
  // The modelled device time of `micro_batches` runs back to back, as the program's execution
  // strategy schedules them (pipelined stages overlap).
  virtual double simulated_seconds_for(int64_t micro_batches) const {
    return simulated_seconds() * static_cast<double>(micro_batches);
  }
  // Modelled time to all-reduce `bytes` of gradients across `replicas` devices.
  virtual double allreduce_seconds(size_t bytes, int64_t replicas) const = 0;
};

}  // namespace ipuml::backend
