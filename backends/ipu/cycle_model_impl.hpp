// Bodies of the cycle model (compiled once in src/lib/ipu_cycle_model.cpp).
#pragma once

#include <algorithm>
#include <cmath>

#include <ipuml/backends/ipu/cycle_model.hpp>

namespace ipuml::ipu {

IPUML_INLINE double vertex_cycles(const Target& t, double flops, double bytes, DType dtype,
                                  bool matrix, int64_t parallel_items) {
  const bool half = dtype == DType::Float16 || dtype == DType::BFloat16;
  double rate = matrix ? (half ? t.flops_per_cycle_fp16 : t.flops_per_cycle_fp32)
                       : (half ? t.vector_flops_per_cycle_fp16 : t.vector_flops_per_cycle_fp32);
  double mem = t.load_store_bytes_per_cycle;
  // The barrel issues one worker per cycle: with fewer independent items than worker contexts
  // some issue slots stay empty.
  const double workers = static_cast<double>(t.worker_contexts);
  const double busy =
      std::clamp(static_cast<double>(std::max<int64_t>(parallel_items, 1)), 1.0, workers) / workers;
  rate *= busy;
  mem *= busy;
  const double work = std::max(flops / rate, bytes / mem);
  return static_cast<double>(t.vertex_overhead_cycles) + std::ceil(work);
}

IPUML_INLINE double exchange_cycles(const Target& t, double bytes_per_tile) {
  return bytes_per_tile <= 0 ? 0.0 : std::ceil(bytes_per_tile / t.exchange_bytes_per_cycle);
}

IPUML_INLINE double inter_ipu_cycles(const Target& t, double bytes) {
  return bytes <= 0 ? 0.0 : std::ceil(bytes / t.inter_ipu_bytes_per_cycle);
}

IPUML_INLINE double host_cycles(const Target& t, double bytes) {
  return bytes <= 0 ? 0.0 : std::ceil(bytes / t.host_bytes_per_second * t.clock_hz);
}

IPUML_INLINE double allreduce_cycles(const Target& t, double bytes, int64_t replicas) {
  if (replicas <= 1 || bytes <= 0) return 0.0;
  const double r = static_cast<double>(replicas);
  const double steps = 2.0 * (r - 1.0);
  return steps * (inter_ipu_cycles(t, bytes / r) + static_cast<double>(t.global_sync_cycles));
}

}  // namespace ipuml::ipu
