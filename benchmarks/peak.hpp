// The machine as a peer: this CPU's fp32 peak for the instruction set the kernels use, measured
// by a register-only FMA loop (independent accumulators, no memory operand), and a traced step's
// FLOPs as the op catalogue counts them (ir::op_flops), so that a benchmark can print what
// fraction of the peak a training step reaches. The clock of a shared machine drifts by tens of
// percent over seconds: measure the peak right beside the step it divides.
#pragma once

#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/ir/graph.hpp>
#include <ipuml/ir/op_catalogue.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace bench {

// Accumulators per loop: enough independent chains to cover the FMA latency (4 cycles) on two
// FMA ports, and no more than the registers hold beside the two operands.
constexpr int kPeakChains = 12;

// Runs `iters` rounds of kPeakChains multiply-adds on vectors V (GCC's vector extension) and
// returns a value that depends on every accumulator, so that nothing is optimised away. Inlined
// into a function compiled for the ISA, where GCC contracts each multiply-add into one FMA.
template <class V>
__attribute__((always_inline)) inline float fma_chains(int64_t iters) {
  V acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = V{} + (1.0f + 1e-3f * float(i));
  const V m = V{} + 0.999999f, c = V{} + 1e-7f;
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < kPeakChains; ++i) acc[i] = acc[i] * m + c;
  }
  V s = acc[0];
  for (int i = 1; i < kPeakChains; ++i) s += acc[i];
  return s[0] + s[sizeof(V) / sizeof(float) - 1];
}
typedef float Vec4 __attribute__((vector_size(16)));
#if defined(__x86_64__) || defined(__i386__)
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16f __attribute__((vector_size(64)));
__attribute__((target("avx512f"))) inline float fma_loop_avx512(int64_t iters) {
  return fma_chains<Vec16f>(iters);
}
__attribute__((target("avx2,fma"))) inline float fma_loop_avx2(int64_t iters) {
  return fma_chains<Vec8>(iters);
}
#endif
// Portable: 4-float vectors, a multiply and an add (no FMA without -m flags).
inline float fma_loop_generic(int64_t iters) { return fma_chains<Vec4>(iters); }

// FLOPs per round of fma_loop_* for the ISA.
inline double flops_per_round(ipuml::cpu::Isa isa) {
  const int lanes = isa == ipuml::cpu::Isa::avx512 ? 16 : isa == ipuml::cpu::Isa::avx2 ? 8 : 4;
  return 2.0 * lanes * kPeakChains;
}

inline float run_fma_loop(ipuml::cpu::Isa isa, int64_t iters) {
#if defined(__x86_64__) || defined(__i386__)
  if (isa == ipuml::cpu::Isa::avx512) return fma_loop_avx512(iters);
  if (isa == ipuml::cpu::Isa::avx2) return fma_loop_avx2(iters);
#endif
  return fma_loop_generic(iters);
}

// GFLOP/s of `threads` cores together, each running the loop for about `seconds` (one OS thread
// per core, started together: the peak of that many cores at once, as a parallel step sees it).
// More threads than the machine has cores share them: the peak is the cores' (threads time-sliced
// on a core would each count the whole of it).
inline double fp32_peak_gflops(int threads, double seconds = 0.2,
                               ipuml::cpu::Isa isa = ipuml::cpu::active_isa()) {
  threads = std::min(threads, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const int64_t iters = 1 << 20;
  std::vector<double> rates(size_t(threads), 0.0);
  std::vector<float> sinks(size_t(threads), 0.0f);
  auto work = [&](int t) {
    int64_t rounds = 0;
    const auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      sinks[size_t(t)] += run_fma_loop(isa, iters);
      rounds += iters;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < seconds);
    rates[size_t(t)] = flops_per_round(isa) * double(rounds) / elapsed / 1e9;
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  double total = 0;
  for (double r : rates) total += r;
  if (sinks[0] == 12345.0f) std::puts("");  // keeps the loops' results alive
  return total;
}

// FLOPs of one run of a traced graph, as ir::op_flops counts each op.
inline double graph_flops(const ipuml::ir::Graph& g) {
  double total = 0;
  std::vector<ipuml::ir::TensorMeta> ins, outs;
  for (const auto& n : g.nodes) {
    ins.clear();
    outs.clear();
    for (auto v : n.inputs) ins.push_back(g.meta(v));
    for (auto v : n.outputs) outs.push_back(g.meta(v));
    total += ipuml::ir::op_flops(n.kind, n.attrs, ins, outs);
  }
  return total;
}

// "ipuml NAME machine ... gflops=X peak_gflops=Y peak_fraction=Z": a step's achieved rate against
// the peak of the cores it ran on, measured now.
inline void print_peak_fraction(const char* name, double flops_per_step, double steps_per_second,
                                int threads) {
  const double gflops = flops_per_step * steps_per_second / 1e9;
  // oneTBB's workers spin for a while after the step's last parallel loop, holding a core that
  // the peak loop would then share: let them go to sleep first.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double peak = fp32_peak_gflops(threads);
  std::printf(
      "ipuml %s vs machine isa=%s threads=%d step_gflop=%.3f gflops=%.1f peak_gflops=%.1f "
      "peak_fraction=%.3f\n",
      name, ipuml::cpu::gemm_isa_name(), threads, flops_per_step / 1e9, gflops, peak,
      gflops / peak);
}

}  // namespace bench
