// The CPU executor's op profile (IPUML_OP_PROFILE=1), per step: what the benchmarks print with
// --profile to show where a step's time goes.
#pragma once

#include <cstdio>

#include <ipuml/backends/cpu/op_profile.hpp>

#include "timing.hpp"

// Ops taking at least 0.2 % of the executor's time, in ms per step, over `steps` steps; beside
// each, the most of the ideal speed-up on one core per thread that its loops' pieces of work
// allow, and the same for the whole step (run with --threads 16 for a 16-core node's partition).
inline void print_op_profile(double steps) {
  auto rows = ipuml::cpu::op_profile();
  ipuml::cpu::OpProfileRow all;
  for (const auto& r : rows) {
    all.seconds += r.seconds;
    all.work += r.work;
    all.least += r.least;
    all.threads = r.threads;
  }
  std::printf(
      "  op profile (ms per step, %% of the executor's time, the most of the ideal speed-up\n"
      "  on %d cores that the op's pieces of work allow):\n",
      all.threads);
  for (const auto& r : rows)
    if (r.seconds / all.seconds >= 0.002)
      std::printf("  %-40s %9.2f ms %5.1f%% %6lld calls %4.0f%%\n", r.name.c_str(),
                  1e3 * r.seconds / steps, 100.0 * r.seconds / all.seconds,
                  static_cast<long long>(r.calls / steps), 100.0 * r.bound());
  std::printf("  %-40s %9.2f ms %20s %4.0f%%\n", "total", 1e3 * all.seconds / steps, "",
              100.0 * all.bound());
}

// time_repeated(step, seconds, reps), with the op profile on when `profile`: the first call
// (which compiles the traced step) runs before it, outside the profile.
template <typename Step>
double time_profiled(Step&& step, double seconds, int64_t& reps, bool profile) {
  if (profile) {
    step();
    ipuml::cpu::reset_op_profile();
    ipuml::cpu::set_op_profiling(true);
  }
  const double elapsed = time_repeated(step, seconds, reps);
  ipuml::cpu::set_op_profiling(false);
  return elapsed;
}
