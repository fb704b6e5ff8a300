// Bodies of the cycle model (compiled once in src/lib/ipu_cycle_model.cpp).
#pragma once

#include <algorithm>
#include <cmath>

#include <ipuml/backends/ipu/cycle_model.hpp>

namespace ipuml::ipu {

IPUML_INLINE double vertex_cycles(const Target& t, double flops, double bytes, DType dtype,
                                  bool matrix, int64_t parallel_items) {
  const bool half = is_half(dtype);
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
  const double bw = static_cast<double>(t.ipu_links_per_pair) * t.ipu_link_bytes_per_second *
                    t.ipu_link_efficiency;
  return bytes <= 0 ? 0.0 : std::ceil(bytes / bw * t.clock_hz);
}

IPUML_INLINE int64_t host_link_streams(const Target& t, int64_t replicas) {
  const int64_t per_link =
      std::max<int64_t>(1, t.ipus_per_host_link / std::max<int64_t>(t.num_ipus, 1));
  return std::clamp<int64_t>(replicas, 1, per_link);
}

IPUML_INLINE double host_cycles(const Target& t, double bytes, int64_t replicas) {
  const double rate = t.host_bytes_per_second / static_cast<double>(host_link_streams(t, replicas));
  return bytes <= 0 ? 0.0 : std::ceil(bytes / rate * t.clock_hz);
}

IPUML_INLINE double host_sync_cycles(const Target& t) {
  return std::ceil(t.host_sync_seconds * t.clock_hz);
}

IPUML_INLINE CollectiveShape collective_shape(const Target& t, int64_t replicas,
                                              int64_t ipus_per_replica) {
  CollectiveShape s;
  const int64_t r = std::max<int64_t>(replicas, 1), k = std::max<int64_t>(ipus_per_replica, 1);
  const auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  s.in_machine = std::min(r, std::max<int64_t>(1, t.ipus_per_machine / k));
  const int64_t groups = ceil_div(r, s.in_machine);
  const int64_t per_pod = std::max<int64_t>(1, t.ipus_per_pod / (k * s.in_machine));
  s.machines = std::min(groups, per_pod);
  s.pods = ceil_div(groups, s.machines);
  return s;
}

IPUML_INLINE double allreduce_cycles(const Target& t, double bytes, int64_t replicas,
                                     int64_t ipus_per_replica) {
  if (replicas <= 1 || bytes <= 0) return 0.0;
  const int64_t k = std::max<int64_t>(ipus_per_replica, 1);
  const CollectiveShape s = collective_shape(t, replicas, k);
  const double link = t.ipu_link_bytes_per_second * t.ipu_link_efficiency;
  // A ring of two is the pair's own links; a longer ring inside a machine also crosses the
  // links between pairs, which are fewer and set its pace.
  const double bw_machine =
      link * static_cast<double>(s.in_machine == 2 && k == 1 ? t.ipu_links_per_pair
                                                             : t.ipu_links_between_pairs);
  const double bw_pod = link * static_cast<double>(t.ipu_links_between_pairs);
  const double bw_gw = t.gw_link_bytes_per_second / static_cast<double>(t.ipus_per_machine);
  const auto xfer = [&](double b, double bw) { return std::ceil(b / bw * t.clock_hz); };
  const auto sync = [&](int64_t ipus) {
    return static_cast<double>(t.sync_cycles) + sync_hop_cycles(t, ipus);
  };
  const double share = bytes / static_cast<double>(k);  // each IPU of a replica reduces its own
  const double g = static_cast<double>(s.in_machine), m = static_cast<double>(s.machines),
               q = static_cast<double>(s.pods);
  double cycles = 0;
  // Reduce-scatter and, at the end, all-gather inside the machine: 2(g-1) steps of share/g.
  if (s.in_machine > 1)
    cycles += 2.0 * (g - 1.0) *
              (xfer(share / g, bw_machine) + sync(std::min(t.ipus_per_machine, s.in_machine * k)));
  // The machines of a POD all-reduce their 1/g shares: 2(m-1) steps of share/(g m).
  if (s.machines > 1)
    cycles += 2.0 * (m - 1.0) *
              (xfer(share / (g * m), bw_pod) +
               sync(std::min(t.ipus_per_pod, s.in_machine * k * s.machines)));
  // PODs all-reduce their 1/(g m) shares over the GW-Links: 2(q-1) steps of share/(g m q).
  if (s.pods > 1)
    cycles += 2.0 * (q - 1.0) * (xfer(share / (g * m * q), bw_gw) + sync(replicas * k));
  return cycles;
}

}  // namespace ipuml::ipu
