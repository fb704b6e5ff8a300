// Parallel loops with partitions that never change results: work is split only over
// independent outputs, so results are bit-identical whatever the thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

#include <ipuml/core/config.hpp>

namespace ipuml {

// Limits ipuml (and all oneTBB work in the process) to n threads; n <= 0 restores the default.
void set_num_threads(int n);
int get_num_threads();

namespace detail {
// The loop itself, over oneTBB, compiled once (core/parallel_impl.hpp): oneTBB's headers are
// large and would otherwise be parsed by every translation unit that includes ipuml. Runs
// body(fn, begin, end) over [0, n) in chunks of at least `grain` (n > grain).
using ChunkBody = void (*)(void* fn, int64_t begin, int64_t end);
void parallel_for_chunks(int64_t n, int64_t grain, ChunkBody body, void* fn);
}  // namespace detail

// Calls fn(begin, end) over [0, n) in chunks of at least `grain`; runs inline when small.
template <typename Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  using F = std::remove_reference_t<Fn>;
  detail::parallel_for_chunks(
      n, grain, [](void* f, int64_t begin, int64_t end) { (*static_cast<F*>(f))(begin, end); },
      const_cast<void*>(static_cast<const void*>(std::addressof(fn))));
}

}  // namespace ipuml

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/core/parallel_impl.hpp>
#endif
