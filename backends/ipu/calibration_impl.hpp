// Bodies of the calibration microbenchmarks (compiled once in src/lib/ipu_calibration.cpp).
#pragma once

#include <cstdio>
#include <functional>

#include <ipuml/backends/ipu/calibration.hpp>
#include <ipuml/backends/ipu/compile.hpp>
#include <ipuml/backends/ipu/cycle_model.hpp>
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/tensor/ops.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::ipu {

namespace caldetail {

inline Plan plan_of(const ir::Trace& tr, const Target& t, int64_t replicas = 1) {
  CompileOptions o;
  o.progress = false;
  o.replication_factor = replicas;
  o.allow_out_of_memory = true;  // a microbenchmark measures time, whatever it holds
  return plan_graph(tr.graph, t, o);
}

inline Target on(const std::string& preset, int64_t ipus = 1) {
  Target t = target_preset(preset);
  t.num_ipus = ipus;
  return t;
}

// The node of `p` that did the most of `what` (the microbenchmark's op, not its set-up).
inline const NodePlan& busiest(const Plan& p, const std::function<double(const NodePlan&)>& what) {
  size_t best = 0;
  for (size_t i = 1; i < p.nodes.size(); ++i)
    if (what(p.nodes[i]) > what(p.nodes[best])) best = i;
  return p.nodes[best];
}

// Tile-memory bandwidth: z = x + y over `per_tile` fp32 elements a tile, every tile busy. The
// vertex reads 8 and writes 4 bytes an element; bandwidth counts those bytes over the compute.
inline CalibrationCase memory_bandwidth(const std::string& preset, int64_t per_tile,
                                        double published, const std::string& source,
                                        DType dt = kFloat32) {
  const Target t = on(preset);
  const int64_t n = per_tile * t.tiles_per_ipu;
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{n}, dt}, "x");
  Tensor y = tr.input(ir::TensorMeta{{n}, dt}, "y");
  const Plan p = plan_of(tr.finish({add(x, y)}), t);
  const NodePlan& np = busiest(p, [](const NodePlan& q) { return q.compute_cycles; });
  const double seconds = np.compute_cycles / t.clock_hz;
  const double es = static_cast<double>(dtype_size(dt));
  return {std::string("mem_bw_add_") + (dt == kFloat16 ? "fp16_" : "fp32_") + preset,
          preset,
          "TB/s",
          3.0 * es * static_cast<double>(n) / seconds / 1e12,
          published,
          source};
}

// On-chip exchange: `x + 1` lands flat (rows) over the tiles; the transpose that follows needs
// columns, so every tile receives a share from every other tile (an all-to-all re-layout).
// Bandwidth: the bytes the exchange moved, all tiles together, over the op's exchange phase.
inline CalibrationCase exchange_all_to_all(const std::string& preset, double published,
                                           const std::string& source) {
  const Target t = on(preset);
  const int64_t r = 2048, c = t.tiles_per_ipu * 2;
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{r, c}, kFloat32}, "x");
  Tensor y = permute(add(x, 1.0), {1, 0});
  const Plan p = plan_of(tr.finish({add(y, 1.0)}), t);
  const NodePlan& np = busiest(p, [](const NodePlan& q) { return q.exchange_bytes; });
  const double seconds = np.exchange_cycles / t.clock_hz;
  return {"exchange_all_to_all_" + preset,    preset,    "TB/s",
          np.exchange_bytes / seconds / 1e12, published, source};
}

// One-to-many: a [1, c] row computed on a few tiles, then added to every row of a [r, c] matrix
// spread over all tiles: each tile receives the row (a broadcast). Bytes received by all tiles
// together over the exchange phase.
inline CalibrationCase exchange_broadcast(const std::string& preset) {
  const Target t = on(preset);
  const int64_t r = t.tiles_per_ipu * 4, c = 4096;
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{r, c}, kFloat32}, "x");
  Tensor v = tr.input(ir::TensorMeta{{1, c}, kFloat32}, "v");
  Tensor row = mul(v, 2.0);
  const Plan p = plan_of(tr.finish({add(add(x, 1.0), row)}), t);
  const NodePlan& np = busiest(p, [](const NodePlan& q) { return q.exchange_bytes; });
  const double seconds = np.exchange_cycles / t.clock_hz;
  return {"exchange_broadcast_" + preset,
          preset,
          "TB/s",
          np.exchange_bytes / std::max(seconds, 1e-12) / 1e12,
          0,
          "informational: no published broadcast figure (poplibs' planner doubles the rate for "
          "two tiles on one exchange bus, which the emulator does not model)"};
}

// Neighbour: a [t, c] matrix laid out one row a tile, then its rows shifted by one (a slice and a
// cat): each tile receives its neighbour's row.
inline CalibrationCase exchange_neighbour(const std::string& preset) {
  const Target t = on(preset);
  const int64_t r = t.tiles_per_ipu, c = 8192;
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{r, c}, kFloat32}, "x");
  Tensor y = add(x, 1.0);
  Tensor shifted = cat({narrow(y, 0, 1, r - 1), narrow(y, 0, 0, 1)}, 0);
  const Plan p = plan_of(tr.finish({add(shifted, y)}), t);
  const NodePlan& np = busiest(p, [](const NodePlan& q) { return q.exchange_bytes; });
  const double seconds = np.exchange_cycles / t.clock_hz;
  return {"exchange_neighbour_" + preset,
          preset,
          "TB/s",
          np.exchange_bytes / std::max(seconds, 1e-12) / 1e12,
          0,
          "informational: no published neighbour-exchange figure"};
}

// Sync latency: a chain of 64 x 2 tiny dependent ops on one tile each; the time per op is one
// superstep of a one-element vertex (its sync, exchange and vertex overhead). Their number
// operands are graph constants, which take no superstep of their own.
inline CalibrationCase sync_chain(const std::string& preset) {
  const Target t = on(preset);
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{1}, kFloat32}, "x");
  const int steps = 64;
  for (int i = 0; i < steps; ++i) x = mul(add(x, 1.0), 0.5);
  const Plan p = plan_of(tr.finish({x}), t);
  double cycles = 0;
  for (auto& np : p.nodes) cycles += np.compute_cycles + np.exchange_cycles + np.sync_cycles;
  return {"superstep_tiny_op_" + preset,
          preset,
          "us",
          cycles / static_cast<double>(2 * steps) / t.clock_hz * 1e6,
          0,
          "informational: sync_cycles and vertex_overhead_cycles (poplibs BinaryOp1D estimate); "
          "no published IPU-internal sync latency found"};
}

// A Sync-Link barrier across `ipus` IPUs beyond the internal one, against the latency poplibs'
// IPU model assigns (15 ns a hop, 1 + ipus/4 hops, there and back).
inline CalibrationCase global_sync(const std::string& preset, int64_t ipus) {
  const Target t = on(preset, ipus);
  const double published = 2.0 * 15e-9 * static_cast<double>(1 + ipus / 4) * 1e9;
  return {"sync_link_" + std::to_string(ipus) + "ipus_" + preset,
          preset,
          "ns",
          sync_hop_cycles(t, ipus) / t.clock_hz * 1e9,
          published,
          "poplibs lib/poplibs_test/Util.cpp setGlobalSyncLatency (IPUModel globalSyncCycles)"};
}

// IPU-Link between the two IPUs of a pair: an op on IPU 1 reads a 64 MB value made on IPU 0.
inline CalibrationCase ipu_link_pair(const std::string& preset, double published,
                                     const std::string& source) {
  const Target t = on(preset, 2);
  const int64_t n = 16 << 20;
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{n}, kFloat32}, "x");
  Tensor y;
  {
    ir::PlacementGuard g0(0);
    y = mul(x, 2.0);
  }
  Tensor z;
  {
    ir::PlacementGuard g1(1);
    z = add(y, 1.0);
  }
  const Plan p = plan_of(tr.finish({z}), t);
  const NodePlan& np = busiest(p, [](const NodePlan& q) { return q.inter_device_bytes; });
  const double seconds = np.inter_device_cycles / t.clock_hz;
  return {"ipu_link_pair_" + preset,
          preset,
          "GB/s",
          np.inter_device_bytes / seconds / 1e9,
          published,
          source};
}

// The link fields added up against a datasheet total: `links` links of the pair and the ladder,
// both directions, raw (no efficiency). Guards against charging one pair with every link.
inline CalibrationCase link_total(const std::string& preset, const std::string& name, double links,
                                  double published, const std::string& source) {
  const Target t = on(preset);
  return {name + "_" + preset, preset, "GB/s", links * 2.0 * t.ipu_link_bytes_per_second / 1e9,
          published,           source};
}

// GW-Links: two PODs of one machine each (ipus_per_pod = 4) all-reducing 100 MB; the machine's
// GW traffic (one replica's bytes, in 2 steps) over the time the POD level adds.
inline CalibrationCase gw_link(const std::string& preset, double published,
                               const std::string& source) {
  Target t = on(preset, 8);
  t.ipus_per_pod = t.ipus_per_machine;
  const double bytes = 100e6;
  const double pod_level = allreduce_cycles(t, bytes, 2 * t.ipus_per_machine) -
                           allreduce_cycles(t, bytes, t.ipus_per_machine);
  return {"gw_link_machine_" + preset,
          preset,
          "GB/s",
          bytes / (pod_level / t.clock_hz) / 1e9,
          published,
          source};
}

// Host transfer: a 256 MB input streamed in (one direction) to each of `replicas` one-IPU
// replicas, which share their machine's host link.
inline CalibrationCase host_link(const std::string& preset, int64_t replicas, double published,
                                 const std::string& source) {
  const Target t = on(preset);
  const int64_t n = 64 << 20;
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{n}, kFloat32}, "x");
  Tensor s = sum(x);
  const Plan p = plan_of(tr.finish({s}), t, replicas);
  // The inbound stream only: less the outbound scalar and the two streams' host syncs.
  const double in_cycles = p.cycles.per_device[0].host -
                           host_cycles(t, p.host_out_bytes, replicas) - 2 * host_sync_cycles(t);
  return {"host_in_" + std::to_string(replicas) + "replica" + (replicas == 1 ? "_" : "s_") + preset,
          preset,
          "GB/s",
          p.host_in_bytes / (in_cycles / t.clock_hz) / 1e9,
          published,
          source};
}

// A step's host syncs: a one-element program's host time less its two one-element streams,
// per stream.
inline CalibrationCase host_sync(const std::string& preset, double published,
                                 const std::string& source) {
  const Target t = on(preset);
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{1}, kFloat32}, "x");
  const Plan p = plan_of(tr.finish({mul(x, x)}), t);
  const double syncs = p.cycles.per_device[0].host - host_cycles(t, p.host_in_bytes) -
                       host_cycles(t, p.host_out_bytes);
  return {"host_sync_" + preset, preset, "us", syncs / 2 / t.clock_hz * 1e6, published, source};
}

// The gradient all-reduce of one replica's 100 MB over `replicas` single-IPU replicas: the
// algorithm bandwidth (bytes / time) of the collective model.
inline CalibrationCase allreduce(const std::string& preset, int64_t replicas) {
  const Target t = on(preset, replicas);
  const double bytes = 100e6;
  const double seconds = allreduce_cycles(t, bytes, replicas) / t.clock_hz;
  const CollectiveShape s = collective_shape(t, replicas);
  char what[160];
  std::snprintf(what, sizeof what,
                "informational: rings of %lld in a machine x %lld machines x %lld PODs; no "
                "published all-reduce figure found",
                static_cast<long long>(s.in_machine), static_cast<long long>(s.machines),
                static_cast<long long>(s.pods));
  return {"allreduce_100MB_" + std::to_string(replicas) + "ipus_" + preset,
          preset,
          "GB/s",
          bytes / seconds / 1e9,
          0,
          what};
}

// A square GEMM on one IPU: x[n, n] (streamed) @ w[n, n] (state), in `dt`; throughput over the
// op's compute, exchange and sync, against the published peak (an upper bound: no measured
// GEMM figure of the IPU was at hand, docs/targets.md).
inline CalibrationCase gemm(const std::string& preset, int64_t n, DType dt, double published,
                            const std::string& source) {
  const Target t = on(preset);
  ir::Tracer tr;
  Tensor x = tr.input(ir::TensorMeta{{n, n}, dt}, "x");
  Tensor w = zeros({n, n}, dt).detach();
  tr.name_state(w, "w");
  const Plan p = plan_of(tr.finish({matmul(x, w)}), t);
  const NodePlan& np = busiest(p, [](const NodePlan& q) { return q.flops; });
  const double seconds = (np.compute_cycles + np.exchange_cycles + np.sync_cycles) / t.clock_hz;
  const std::string type = dt == kFloat16 ? "fp16" : "fp32";
  return {"gemm_" + type + "_" + std::to_string(n) + "_" + preset,
          preset,
          "TFLOP/s",
          np.flops / seconds / 1e12,
          published,
          source};
}

}  // namespace caldetail

IPUML_INLINE std::vector<CalibrationCase> run_calibration() {
  using namespace caldetail;
  const std::string gc200 = "Graphcore GC200 IPU product page / IPU-M2000 datasheet: ";
  const std::string gc2 = "Jia et al. 2019 (arXiv 1912.03413) sec. 1-2, GC2 nominal: ";
  std::vector<CalibrationCase> v;
  v.push_back(memory_bandwidth("ipu2", 16384, 47.5, gc200 + "47.5 TB/s memory bandwidth per IPU"));
  v.push_back(memory_bandwidth("ipu2", 16384, 47.5, gc200 + "47.5 TB/s memory bandwidth per IPU",
                               kFloat16));
  v.push_back(memory_bandwidth("ipu1", 8192, 45.0, gc2 + "45 TB/s aggregate memory bandwidth"));
  v.push_back(exchange_all_to_all("ipu2", 8.0, gc200 + "IPU-Exchange 8 TB/s all-to-all"));
  v.push_back(exchange_broadcast("ipu2"));
  v.push_back(exchange_neighbour("ipu2"));
  v.push_back(sync_chain("ipu2"));
  v.push_back(global_sync("ipu2", 4));
  v.push_back(global_sync("ipu2", 16));
  v.push_back(ipu_link_pair(
      "ipu2", 4 * 128.0 * 1024 * 1024 * 1024 / 8 * 0.85 / 1e9,
      "poplibs lib/poplibs_test/Util.cpp IPU model: 4 links x 128 Gibit/s x 0.85 between a pair"));
  v.push_back(ipu_link_pair(
      "ipu1", 64.0, gc2 + "2 intra-board IPU-Links of 64 GB/s bidirectional (32 GB/s each way)"));
  v.push_back(link_total("ipu2", "ipu_links_all", 4 + 3 * 2, 320.0,
                         gc200 + "10 IPU-Links, 320 GB/s (4 to the pair, 2 across, 2 up, 2 down "
                                 "[poplibs IPU model])"));
  v.push_back(
      link_total("bow", "ipu_link_cable", 2, 64.0,
                 "Bow-2000 datasheet: IPU-Link 512 Gbit/s (one cable: 2 links, both ways)"));
  v.push_back(
      gw_link("ipu2", 25.0, "Bow-2000 datasheet / IPU-POD DA guide: GW-Link 2 x 100 Gbit/s"));
  const std::string da = "IPU-POD DA guide: an IPU-M2000 reaches its host over 1 x 100 GbE RoCEv2";
  v.push_back(host_link("ipu2", 1, 12.5, da + ": 12.5 GB/s each way"));
  v.push_back(host_link("ipu2", 4, 3.125, da + ", shared by its 4 IPUs: 3.125 GB/s each"));
  v.push_back(host_link("ipu1", 1, 32.0,
                        "C2 card: PCIe Gen4 x16, 64 GB/s counting both directions (assumed, as "
                        "GC200's; docs/targets.md)"));
  v.push_back(host_sync("ipu2", 1485.0 / 4095,
                        "Graphcore Command Line Tools guide 1.2.3, gc-hostsynclatencytest: 4095 "
                        "host syncs took 1485 us"));
  v.push_back(allreduce("ipu2", 2));
  v.push_back(allreduce("ipu2", 4));
  v.push_back(allreduce("ipu2", 16));
  v.push_back(allreduce("ipu2", 128));
  // GEMM: against the published peaks, informational (a peak is an upper bound, not a measured
  // GEMM; docs/targets.md).
  auto gemm_row = [&](const std::string& preset, int64_t n, DType dt, double peak,
                      const std::string& src) {
    CalibrationCase c = gemm(preset, n, dt, 0, "");
    char buf[200];
    std::snprintf(buf, sizeof buf, "informational: %.0f%% of the %g TFLOP/s peak (%s)",
                  100.0 * c.simulated / peak, peak, src.c_str());
    c.source = buf;
    v.push_back(c);
  };
  for (int64_t n : {512, 1024, 2048}) gemm_row("ipu2", n, kFloat32, 62.5, "GC200 FP32");
  for (int64_t n : {1024, 2048, 4096, 8192}) gemm_row("ipu2", n, kFloat16, 250.0, "GC200 FP16.16");
  gemm_row("ipu1", 2048, kFloat32, 31.1, "GC2 single precision, Jia et al.");
  gemm_row("ipu1", 4096, kFloat16, 124.5, "GC2 mixed precision, Jia et al.");
  gemm_row("bow", 4096, kFloat16, 350.0, "Bow-2000 datasheet: 1.4 PFLOPS / 4 IPUs");
  return v;
}

}  // namespace ipuml::ipu
