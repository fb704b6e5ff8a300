// What the runtime tells a backend about a program besides its graph: how it will be run
// (replicas, devices per replica, pipelining, accumulation), its name in reports, precision
// policy and where caches and reports go. Every backend receives these and uses what applies to
// it; options only one backend understands (the IPU's target, memory proportion) travel
// separately as text, parsed by that backend (backend::CompileOptions).
#pragma once

#include <cstdint>
#include <string>

#include <ipuml/core/dtype.hpp>

namespace ipuml::backend {

struct ProgramOptions {
  // Names the program in reports: "training", "weight_update", "inference", or the model's
  // name (PopTorch's modelName).
  std::string name = "program";
  bool training = false;
  // Replicas of the program, each on its own devices; the runtime runs them and reduces their
  // gradients, the backend only accounts for them (devices needed, collective costs).
  int64_t replicas = 1;
  // Devices one replica spans: one more than the largest node placement.
  int64_t devices_per_replica = 1;
  // Model-parallel stages overlap (pipelined) rather than run one after another (sharded).
  bool pipelined = false;
  int64_t gradient_accumulation = 1;
  int64_t device_iterations = 1;
  // Finish the compile even when device memory overflows (its report says so).
  bool allow_out_of_memory = false;
  // A compilation progress line on a terminal.
  bool progress = true;
  // Where compiled plans are cached and reports written ("": nowhere).
  std::string cache_dir;
  std::string report_dir;
  // Precision policy: the type of matrix ops' partial sums, and stochastic rounding of half
  // results from counter-based random bits of `seed`.
  DType partials_type = DType::Float32;
  bool stochastic_rounding = false;
  uint64_t seed = 0;
};

}  // namespace ipuml::backend
