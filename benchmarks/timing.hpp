// The timing loop the benchmarks share: one warm-up call, then repeats for at least `seconds`.
#pragma once

#include <chrono>
#include <cstdint>

// Returns the seconds the timed calls took; sets `reps` to their number.
template <class Step>
double time_repeated(Step&& step, double seconds, int64_t& reps) {
  step();  // warm-up (and compilation for the graph modes)
  reps = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    step();
    ++reps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed < seconds);
  return elapsed;
}
