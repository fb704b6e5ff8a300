// Parallel loops over oneTBB with partitions that never change results: work is split only
// over independent outputs, so results are bit-identical whatever the thread count.
#pragma once

#include <cstdint>
#include <memory>

#include <ipuml/core/denormals.hpp>

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

namespace ipuml {

// Limits ipuml (and all oneTBB work in the process) to n threads; n <= 0 restores the default.
inline void set_num_threads(int n) {
  static std::unique_ptr<tbb::global_control> control;
  control.reset();
  if (n > 0)
    control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    static_cast<size_t>(n));
}

inline int get_num_threads() {
  return static_cast<int>(
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

// Calls fn(begin, end) over [0, n) in chunks of at least `grain`; runs inline when small.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      detail::apply_denormal_mode();
                      fn(r.begin(), r.end());
                    });
}

}  // namespace ipuml
