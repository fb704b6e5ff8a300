// The CPU executor's op profile (IPUML_OP_PROFILE=1), per step: what the benchmarks print with
// --profile to show where a step's time goes.
#pragma once

#include <cstdio>

#include <ipuml/backends/cpu/op_profile.hpp>

// Ops taking at least 0.2 % of the executor's time, in ms per step, over `steps` steps.
inline void print_op_profile(double steps) {
  auto rows = ipuml::cpu::op_profile();
  double total = 0;
  for (const auto& r : rows) total += r.seconds;
  std::printf("  op profile (ms per step, %% of the executor's time):\n");
  for (const auto& r : rows)
    if (r.seconds / total >= 0.002)
      std::printf("  %-40s %9.2f ms %5.1f%% %6lld calls\n", r.name.c_str(), 1e3 * r.seconds / steps,
                  100.0 * r.seconds / total, static_cast<long long>(r.calls / steps));
  std::printf("  %-40s %9.2f ms\n", "total", 1e3 * total / steps);
}
