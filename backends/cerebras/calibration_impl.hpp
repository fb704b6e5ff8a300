// Bodies of the Cerebras calibration microbenchmarks (compiled once in
// src/lib/cerebras_calibration.cpp).
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>

#include <ipuml/backends/cerebras/calibration.hpp>
#include <ipuml/backends/cerebras/wse_model.hpp>
#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml::cerebras {

namespace caldetail {

// Weights on the wafer (the pipelined mode's placement): what the published kernels measure.
inline emu::Plan plan_of(const ir::Trace& tr, const Target& t) {
  emu::CompileOptions o;
  o.progress = false;
  o.allow_out_of_memory = true;  // a microbenchmark measures time, whatever it holds
  return emu::plan_graph(tr.graph, std::make_shared<const WseModel>(t, ExecutionMode::Pipelined),
                         o);
}

inline const emu::NodePlan& busiest(const emu::Plan& p,
                                    const std::function<double(const emu::NodePlan&)>& what) {
  size_t best = 0;
  for (size_t i = 1; i < p.nodes.size(); ++i)
    if (what(p.nodes[i]) > what(p.nodes[best])) best = i;
  return p.nodes[best];
}

inline double node_seconds(const emu::NodePlan& np, const Target& t) {
  return (np.compute_cycles + np.exchange_cycles + np.sync_cycles) / t.clock_hz;
}

// SRAM bandwidth: z = x + y in fp16 over 2048 elements a PE (12 KB of its 48), every PE busy; the
// four fp16 lanes read 16 and write 8 bytes a cycle. Bytes the op reads and writes over its
// compute.
inline emu::CalibrationCase sram_bandwidth(const std::string& preset, double published,
                                           const std::string& source) {
  const Target t = target_preset(preset);
  const int64_t n = 2048 * t.blocks() * t.pes_per_block();
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{n}, kFloat16}, "x");
  Tensor y = tr.input(ir::TensorMeta{{n}, kFloat16}, "y");
  const emu::Plan p = plan_of(tr.finish({add(x, y)}), t);
  const auto& np = busiest(p, [](const emu::NodePlan& q) { return q.compute_cycles; });
  return {"sram_bw_add_fp16_" + preset,
          preset,
          "PB/s",
          6.0 * static_cast<double>(n) / (np.compute_cycles / t.clock_hz) / 1e15,
          published,
          source};
}

// A matrix-vector product [1, n] x [n, n] in fp16 with the matrix resident on the wafer: the
// products spread over the PEs, then the partial sums reduced across the mesh.
inline emu::CalibrationCase gemv(const std::string& preset, int64_t n, double published_us,
                                 const std::string& source) {
  const Target t = target_preset(preset);
  Tensor w = expand(zeros({1, 1}, kFloat16), {n, n}).detach();  // a state: made before tracing
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{1, n}, kFloat16}, "x");
  tr.name_state(w, "w");
  const emu::Plan p = plan_of(tr.finish({matmul(x, w)}), t);
  const auto& np = busiest(p, [](const emu::NodePlan& q) { return q.flops; });
  return {"gemv_fp16_" + std::to_string(n / 1024) + "k_" + preset,
          preset,
          "us",
          node_seconds(np, t) * 1e6,
          published_us,
          source};
}

// A square fp16 GEMM on the wafer: the achieved share of the wafer's fp16 peak.
inline emu::CalibrationCase gemm(const std::string& preset, int64_t n) {
  const Target t = target_preset(preset);
  Tensor w = expand(zeros({1, 1}, kFloat16), {n, n}).detach();
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{n, n}, kFloat16}, "x");
  tr.name_state(w, "w");
  const emu::Plan p = plan_of(tr.finish({matmul(x, w)}), t);
  const auto& np = busiest(p, [](const emu::NodePlan& q) { return q.flops; });
  const double peak = static_cast<double>(t.pes()) * t.flops_per_cycle_fp16 * t.clock_hz;
  const double achieved = np.flops / node_seconds(np, t);
  char src[200];
  std::snprintf(src, sizeof src,
                "informational: %.0f%% of the %.2f PFLOP/s fp16 peak; [OSDI25] measured over 70%% "
                "for its MeshGEMM at 720 x 720 PEs (sizes not given)",
                100.0 * achieved / peak, peak / 1e15);
  return {
      "gemm_fp16_" + std::to_string(n) + "_" + preset, preset, "PFLOP/s", achieved / 1e15, 0, src};
}

// A sum of one value a PE over the whole wafer: a reduction across the mesh, whose cost is
// its diameter in hops and the ramps.
inline emu::CalibrationCase wafer_reduce(const std::string& preset, double published_cycles,
                                         const std::string& source) {
  const Target t = target_preset(preset);
  const int64_t n = t.blocks() * t.pes_per_block();
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{n}, kFloat32}, "x");
  const emu::Plan p = plan_of(tr.finish({sum(add(x, 1.0))}), t);
  // The reduction's own steps: every node after the elementwise add.
  double cycles = 0;
  bool past_add = false;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const auto& np = p.nodes[i];
    if (past_add) cycles += np.compute_cycles + np.exchange_cycles + np.sync_cycles;
    if (np.flops > 0 && !past_add) past_add = true;
  }
  return {"wafer_reduce_" + preset, preset, "cycles", cycles, published_cycles, source};
}

}  // namespace caldetail

IPUML_INLINE std::vector<emu::CalibrationCase> run_calibration() {
  using namespace caldetail;
  std::vector<emu::CalibrationCase> v;
  v.push_back(sram_bandwidth("wse2", 20.0,
                             "[MJ21] 20 PB/s memory bandwidth (850,000 PEs; 16 B read + 8 B "
                             "write a PE a cycle [SC22])"));
  v.push_back(
      gemv("wse2", 16384, 0.0012e3, "[OSDI25] Table 6, MeshGEMV [1,16K] x [16K,16K]: 0.0012 ms"));
  v.push_back(
      gemv("wse2", 32768, 0.00203e3, "[OSDI25] Table 6, MeshGEMV [1,32K] x [32K,32K]: 0.00203 ms"));
  const Target t = target_preset("wse2");
  const double diameter = static_cast<double>(t.fabric_columns + t.fabric_rows - 2);
  v.push_back(wafer_reduce("wse2", 1.1 * diameter,
                           "[SC20] as quoted: an AllReduce in about 10% more cycles than the "
                           "mesh diameter"));
  for (int64_t n : {4096, 16384}) v.push_back(gemm("wse2", n));
  return v;
}

}  // namespace ipuml::cerebras
