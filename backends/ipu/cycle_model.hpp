// The cycle model: cycles of a vertex, an exchange, a sync, host transfers and a replica
// all-reduce, derived only from Target parameters (never fitted to published benchmarks).
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
// Cycles to move `bytes` from one IPU to another over the IPU-Links.
double inter_ipu_cycles(const Target& t, double bytes);
// Cycles (at the tile clock) to stream `bytes` between host and device.
double host_cycles(const Target& t, double bytes);
// Cycles of a ring all-reduce of `bytes` over `replicas` IPUs: 2(R-1) steps, each moving B/R
// over the links and paying a global sync.
double allreduce_cycles(const Target& t, double bytes, int64_t replicas);

// Cycles a program spends, per IPU, by BSP phase.
struct IpuCycles {
  double compute = 0, exchange = 0, sync = 0, host = 0;
  double total() const { return compute + exchange + sync + host; }
};
struct RunCycles {
  std::vector<IpuCycles> per_ipu;
  double total = 0;  // the step's cycles: IPUs of a sharded program run one after another
  double simulated_seconds = 0;  // total / clock
};

}  // namespace ipuml::ipu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/ipu/cycle_model_impl.hpp>
#endif
