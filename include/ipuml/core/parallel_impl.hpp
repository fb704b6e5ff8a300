// Bodies of <ipuml/core/parallel.hpp> over oneTBB (compiled once in src/lib/core_parallel.cpp).
#pragma once

#include <memory>

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <ipuml/core/denormals.hpp>
#include <ipuml/core/parallel.hpp>

namespace ipuml {

IPUML_INLINE void set_num_threads(int n) {
  static std::unique_ptr<tbb::global_control> control;
  control.reset();
  if (n > 0)
    control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    static_cast<size_t>(n));
}

IPUML_INLINE int get_num_threads() {
  return static_cast<int>(
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

// oneTBB's default (auto) partitioner over a blocked_range of the given grain, as the loop was
// when it was a template in the header: the chunks, and so the results, are the same.
IPUML_INLINE void detail::parallel_for_chunks(int64_t n, int64_t grain, ChunkBody body, void* fn) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      detail::apply_denormal_mode();
                      body(fn, r.begin(), r.end());
                    });
}

}  // namespace ipuml
