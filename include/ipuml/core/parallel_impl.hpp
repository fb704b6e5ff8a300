// Bodies of <ipuml/core/parallel.hpp> over oneTBB (compiled once in src/lib/core_parallel.cpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

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
  const LoopAccount account((n + grain - 1) / grain);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      const InLoopBody inside;
                      detail::apply_denormal_mode();
                      body(fn, r.begin(), r.end());
                    });
}

namespace detail {
struct LoopAccounting {
  std::atomic<bool> on{false};
  std::mutex mutex;
  LoopTotals totals;
};
IPUML_INLINE LoopAccounting& loop_accounting_state() {
  static LoopAccounting s;
  return s;
}
IPUML_INLINE int& loop_depth() {
  thread_local int depth = 0;
  return depth;
}
IPUML_INLINE int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace detail

IPUML_INLINE void detail::set_loop_accounting(bool on) { loop_accounting_state().on.store(on); }
IPUML_INLINE bool detail::loop_accounting() {
  return loop_accounting_state().on.load(std::memory_order_relaxed);
}
IPUML_INLINE detail::LoopTotals detail::take_loop_totals() {
  auto& s = loop_accounting_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return std::exchange(s.totals, LoopTotals{});
}
IPUML_INLINE detail::LoopAccount::LoopAccount(int64_t pieces) : pieces_(pieces) {
  if (loop_accounting() && loop_depth() == 0) start_ns_ = now_ns();
}
IPUML_INLINE detail::LoopAccount::~LoopAccount() {
  if (start_ns_ < 0) return;
  const double wall = 1e-9 * static_cast<double>(now_ns() - start_ns_);
  // The loop ran on as many cores as it had pieces, threads and cores for.
  const auto threads = static_cast<double>(std::max(1, get_num_threads()));
  const double cores =
      std::min(threads, static_cast<double>(std::max(1u, std::thread::hardware_concurrency())));
  const double pieces = static_cast<double>(std::max<int64_t>(pieces_, 1));
  const double work = wall * std::min(pieces, cores);
  auto& s = loop_accounting_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.totals.seconds += wall;
  s.totals.work += work;
  s.totals.least += work / std::min(pieces, threads);
}
IPUML_INLINE detail::InLoopBody::InLoopBody() { ++loop_depth(); }
IPUML_INLINE detail::InLoopBody::~InLoopBody() { --loop_depth(); }

}  // namespace ipuml
