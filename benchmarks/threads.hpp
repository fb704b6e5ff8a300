// A benchmark's --threads T: ipuml's kernels see T threads and split their work for T, as they
// would on a T-core node, even where the machine has fewer cores (oneTBB's implicit arena has
// one slot per core, so a thread limit alone cannot raise the parallelism a kernel sees).
#pragma once

#include <utility>

#include <tbb/task_arena.h>

#include <ipuml/core/parallel.hpp>

namespace bench {

// Runs f() with at most `threads` threads and an arena of that many slots.
template <class F>
auto with_threads(int threads, F&& f) {
  ipuml::set_num_threads(threads);
  tbb::task_arena arena(threads);
  return arena.execute(std::forward<F>(f));
}

}  // namespace bench
