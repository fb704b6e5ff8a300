// The optional profiling interface of a compiled program: what a backend that models its device
// (the IPU emulator) reports about it — a JSON report, a terminal summary and the modelled device
// time. Backends without a model (the CPU) do not implement it; Executable::profiling() is then
// null and callers report wall-clock time only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace ipuml::backend {

// Where a compiled program's bytes live on the modelled machine: its devices (IPUs), each made of
// units of memory (an IPU's tiles) of which the fullest decides whether it fits.
struct MemoryFit {
  std::string device = "device", unit = "unit";             // what a device and a unit are called
  int64_t unit_bytes = 0;                                   // the memory of one unit
  std::vector<int64_t> fullest_unit;                        // per device: its fullest unit's bytes
  std::vector<int64_t> device_bytes;                        // per device: all its units' bytes
  std::vector<std::pair<std::string, int64_t>> categories;  // all devices, by what they hold
  bool fits = true;
  std::string message;  // when it does not fit: what overflows and what would help
};

// Where one run of a program spends its modelled time, in seconds summed over the devices it
// spans: computing, exchanging between units and devices, at barriers, and with the host (its
// streams, syncs and off-chip memory).
struct TimeSplit {
  double compute = 0, exchange = 0, sync = 0, host = 0;
  double total() const { return compute + exchange + sync + host; }
};

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
  // The program's memory on the modelled devices (with its weight update, where the backend
  // holds both in one image), known from compiling alone.
  virtual MemoryFit memory_fit() const { return {}; }
  // Where one run's modelled time goes (all zero: the backend does not say).
  virtual TimeSplit time_split() const { return {}; }
  // The modelled clock, to state times in cycles (0: the backend counts no cycles).
  virtual double clock_hz() const { return 0; }
  // A one-line description of the modelled machine (e.g. "ipu2: 4 IPUs x 1472 tiles ...").
  virtual std::string target_description() const { return {}; }
};

}  // namespace ipuml::backend
