// The cycle model: cycles of a vertex, an exchange, a sync, host transfers and a replica
// all-reduce over the IPU system's topology, derived only from Target parameters (their sources
// and the calibration against published figures are in docs/targets.md).
#pragma once

#include <cstdint>
#include <vector>

#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/core/dtype.hpp>

namespace ipuml::ipu {

// Cycles one tile spends on `flops` floating-point operations touching `bytes` of tile memory,
// spread over `parallel_items` independent pieces of work (at most worker_contexts run at once).
// `matrix` selects the AMP (matmul/conv) rate instead of the vector units.
double vertex_cycles(const Target& t, double flops, double bytes, DType dtype, bool matrix,
                     int64_t parallel_items);

// Cycles to move `bytes_per_tile` into the busiest tile over the IPU's exchange.
double exchange_cycles(const Target& t, double bytes_per_tile);
// Cycles to move `bytes` from one IPU to the other IPU of its pair over the links between them
// (ipu_links_per_pair at ipu_link_bytes_per_second x ipu_link_efficiency, one direction).
double inter_ipu_cycles(const Target& t, double bytes);
// IPUs that stream over one host link at the same time when `replicas` replicas of
// t.num_ipus IPUs each run side by side: the replicas of one machine share its link.
int64_t host_link_streams(const Target& t, int64_t replicas);
// Cycles (at the tile clock) to stream `bytes` between host and one IPU, one direction, while
// the other replicas on its host link stream as much.
double host_cycles(const Target& t, double bytes, int64_t replicas = 1);
// Cycles of one host sync (t.host_sync_seconds at the tile clock).
double host_sync_cycles(const Target& t);

// Cycles of the gradient all-reduce of `bytes` (one replica's gradients) over `replicas`
// replicas of `ipus_per_replica` IPUs each, hierarchical as the system is built: the replicas of
// one machine reduce-scatter over its IPU-Link ring, the machines of a POD all-reduce their
// shares over the IPU-Links between machines, PODs over the GW-Links (shared by a machine's
// IPUs), then the machines all-gather. Each ring step pays a barrier across the IPUs it spans.
// The IPUs of a replica reduce their own shares side by side. docs/targets.md, "Collectives".
double allreduce_cycles(const Target& t, double bytes, int64_t replicas,
                        int64_t ipus_per_replica = 1);

// The ring levels of allreduce_cycles: members of a ring inside a machine, machines per POD
// ring, PODs; their product covers `replicas`.
struct CollectiveShape {
  int64_t in_machine = 1, machines = 1, pods = 1;
};
CollectiveShape collective_shape(const Target& t, int64_t replicas, int64_t ipus_per_replica = 1);

}  // namespace ipuml::ipu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/ipu/cycle_model_impl.hpp>
#endif
