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

// Loop accounting for the CPU executor's op profile (off unless it profiles): every outermost
// parallel loop's wall time and pieces of work, from which the profile bounds how far an op's
// partition spreads over the threads it was made for (get_num_threads(); more than this
// machine's cores when oversubscribed, as by a benchmark's --threads 16).
struct LoopTotals {
  double seconds = 0;  // wall time inside outermost loops
  double work = 0;     // their work in core-seconds: wall x min(pieces, cores used)
  double least = 0;    // their least time on one core per thread: work / min(pieces, threads)
};
void set_loop_accounting(bool on);
bool loop_accounting();
// The totals since the last call, which starts new ones.
LoopTotals take_loop_totals();
// Times an outermost loop of `pieces` pieces while accounting is on; a loop started inside
// another loop's body (InLoopBody) is part of that loop's work.
class LoopAccount {
 public:
  explicit LoopAccount(int64_t pieces);
  ~LoopAccount();
  LoopAccount(const LoopAccount&) = delete;
  LoopAccount& operator=(const LoopAccount&) = delete;

 private:
  int64_t pieces_ = 0;
  int64_t start_ns_ = -1;  // -1: not timed
};
// Marks a loop body running on this thread.
class InLoopBody {
 public:
  InLoopBody();
  ~InLoopBody();
  InLoopBody(const InLoopBody&) = delete;
  InLoopBody& operator=(const InLoopBody&) = delete;
};
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
