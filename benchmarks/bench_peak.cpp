// This CPU's fp32 peak for the instruction set the kernels use (IPUML_CPU_ISA, or --isa), from a
// register-only FMA loop: "peak isa=I threads=T gflops=X". scripts/bench-vs-peers.sh prints it
// first, as the ceiling the zoo steps' peak_fraction lines divide by.
// Usage: bench_peak [--threads T ...] [--isa avx512|avx2|generic] [--seconds S]
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <ipuml/backends/cpu/cpu_features.hpp>

#include "peak.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ipuml: this CPU's fp32 FMA peak"};
  std::vector<int> threads{1, 2};
  std::string isa;
  double seconds = 0.5;
  app.add_option("--threads", threads, "thread counts")->check(CLI::PositiveNumber);
  app.add_option("--isa", isa, "avx512, avx2 or generic (default: the kernels' own)");
  app.add_option("--seconds", seconds, "time per measurement");
  CLI11_PARSE(app, argc, argv);
  if (!isa.empty()) ipuml::cpu::set_gemm_isa(isa.c_str());
  for (int t : threads)
    std::printf("peak isa=%s threads=%d gflops=%.1f\n", ipuml::cpu::gemm_isa_name(), t,
                bench::fp32_peak_gflops(t, seconds));
  return 0;
}
