// The compile-only estimate: what a traced and compiled model would do on the modelled machine,
// known without executing a kernel — whether it fits, and how fast the whole configuration
// (micro-batch x gradient accumulation x replicas x device iterations) would run.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include <ipuml/backend/profiling.hpp>
#include <ipuml/core/config.hpp>

namespace ipuml::runtime {

struct Estimate {
  std::string program;  // "training" or "inference"
  std::string target;   // the modelled machine, one line
  int64_t micro_batch = 0, gradient_accumulation = 1, replicas = 1, device_iterations = 1;
  int64_t instances = 1;            // data-parallel processes (Options.Distributed)
  int64_t devices_per_replica = 1;  // IPUs one replica spans
  bool pipelined = false;
  backend::MemoryFit memory;  // the step and its weight update as one image
  double clock_hz = 0;
  // Modelled seconds: one micro-batch through the step program alone; the step program over one
  // weight update's micro-batches as it schedules them (a pipeline's ramp included); the weight
  // update program (0 where the step runs the optimizer itself); the gradients' all-reduce
  // across every replica of every instance, once per update.
  double micro_batch_seconds = 0, accumulation_seconds = 0, update_seconds = 0;
  double allreduce_seconds = 0;
  // Where one run of the step program and of the update program spend their time (summed over
  // a replica's devices): the shares "where the time goes" prints.
  backend::TimeSplit step_split, update_split;
  // One host call (deviceIterations weight updates, or micro-batches in inference) as executing
  // it reports (RunStats::simulated_seconds), and the samples it consumes on this instance.
  double call_seconds = 0;
  int64_t samples_per_call = 0;
  double wall_seconds = 0;  // what tracing and compiling took on this host

  double iteration_seconds() const {
    return accumulation_seconds + update_seconds + allreduce_seconds;
  }
  // Every instance's samples: the whole configuration's throughput.
  double samples_per_second() const {
    return call_seconds > 0 ? static_cast<double>(samples_per_call * instances) / call_seconds : 0;
  }
  double cycles(double seconds) const { return seconds * clock_hz; }
};

// The estimate as a user reads it: fit per device with the fullest unit, memory by category,
// cycles per micro-batch and per weight update, and the projected throughput.
void print_estimate(std::ostream& os, const Estimate& e);
// The estimate's body alone (configuration, memory, times, projected throughput), without the
// compile-only heading and wall-clock line: what a run's profile summary ends with.
void print_configuration(std::ostream& os, const Estimate& e);

}  // namespace ipuml::runtime

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/runtime/estimate_impl.hpp>
#endif
