// The schedule of micro-batches on a model-parallel program. Sharded: each micro-batch runs the
// whole program, its devices one after another. Pipelined (PopART's continuous pipelining): the
// program's stages (ir/stages.hpp) run in lockstep pipeline cycles; in cycle c stage s works
// on micro-batch c - s, every device runs the stages it holds for that cycle, and a cycle lasts as
// long as its busiest device plus the global sync and inter-device copies that end it. G
// micro-batches through S stages take G + S - 1 cycles: S - 1 of ramp-up and ramp-down, and in the
// steady state the device with the most work sets the rate.
#pragma once

#include <algorithm>
#include <vector>

#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/ir/graph.hpp>
#include <ipuml/ir/stages.hpp>

namespace ipuml::emu {

// Cycles of each stage on each device ([stage][device]) from the plan's supersteps; a device's host
// transfers join the first stage it runs, the state write-back the last stage.
inline std::vector<std::vector<double>> stage_cycles(const ir::Graph& g, const Plan& p) {
  const int stages = ir::stage_count(g);
  const size_t devices = static_cast<size_t>(p.machine.devices);
  std::vector<std::vector<double>> c(static_cast<size_t>(stages),
                                     std::vector<double>(devices, 0.0));
  std::vector<int> first_stage(devices, -1);
  for (auto& s : p.supersteps) {
    int st = stages - 1;
    if (s.node >= 0) st = std::max(g.nodes[static_cast<size_t>(s.node)].stage, 0);
    const size_t i = static_cast<size_t>(s.device);
    c[static_cast<size_t>(st)][i] += s.compute + s.exchange + s.sync;
    if (s.node >= 0 && (first_stage[i] < 0 || st < first_stage[i])) first_stage[i] = st;
  }
  for (size_t i = 0; i < devices && i < p.cycles.per_device.size(); ++i) {
    const auto& pc = p.cycles.per_device[i];
    // What the supersteps do not hold: host transfers and their syncs.
    double rest = pc.host + pc.sync;
    for (auto& s : p.supersteps)
      if (static_cast<size_t>(s.device) == i) rest -= s.sync;
    c[static_cast<size_t>(std::max(first_stage[i], 0))][i] += std::max(rest, 0.0);
  }
  return c;
}

// Cycles of `micro_batches` micro-batches through the stages in lockstep (see above).
inline double pipelined_cycles(const std::vector<std::vector<double>>& stage_device,
                               const emu::TargetModel& t, int64_t micro_batches) {
  const int64_t S = static_cast<int64_t>(stage_device.size());
  if (S == 0 || micro_batches <= 0) return 0.0;
  const size_t devices = stage_device[0].size();
  double total = 0;
  std::vector<double> work(devices);
  for (int64_t cyc = 0; cyc < micro_batches + S - 1; ++cyc) {
    std::fill(work.begin(), work.end(), 0.0);
    for (int64_t s = 0; s < S; ++s) {
      const int64_t mb = cyc - s;
      if (mb < 0 || mb >= micro_batches) continue;
      for (size_t i = 0; i < devices; ++i) work[i] += stage_device[static_cast<size_t>(s)][i];
    }
    total += *std::max_element(work.begin(), work.end());
    if (S > 1) total += t.device_sync_cycles();
  }
  return total;
}
}  // namespace ipuml::emu
