// Bodies of the DataLoader's non-template parts: the oneTBB prefetcher and collation
// (compiled once in src/lib/data_loader.cpp; TBB stays out of the public header).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>

#include <tbb/task_group.h>

#include <ipuml/data/dataloader.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::data::detail {

struct BatchPrefetcher::State {
  enum : int { kQueued = 0, kRunning = 1, kDone = 2 };
  struct Slot {
    std::atomic<int> state{kQueued};
    Example value;
    std::exception_ptr error;
  };

  State(int64_t n, int64_t d, Produce p)
      : produce(std::move(p)), count(n), depth(d), slots(static_cast<size_t>(n)) {}

  // Assembles batch b unless someone else already claimed it. Never throws and never blocks,
  // so a worker (or the consumer helping out in tg.wait()) cannot get stuck in here.
  void run(int64_t b, bool on_consumer) {
    Slot& s = slots[static_cast<size_t>(b)];
    int expected = kQueued;
    if (!s.state.compare_exchange_strong(expected, kRunning)) return;
    if (!cancelled.load(std::memory_order_acquire) || on_consumer) {
      try {
        s.value = produce(b);
      } catch (...) {
        s.error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      s.state.store(kDone, std::memory_order_release);
    }
    cv.notify_all();
  }

  Produce produce;
  int64_t count;
  int64_t depth;
  std::vector<Slot> slots;
  int64_t next_take = 0;
  int64_t next_schedule = 0;
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::condition_variable cv;
  tbb::task_group tg;  // declared last: destroyed first, after ~BatchPrefetcher waited on it
};

IPUML_INLINE BatchPrefetcher::BatchPrefetcher(int64_t count, int64_t depth, Produce produce)
    : s_(std::make_unique<State>(count, depth, std::move(produce))) {}

IPUML_INLINE BatchPrefetcher::~BatchPrefetcher() {
  s_->cancelled.store(true, std::memory_order_release);
  s_->tg.cancel();
  try {
    s_->tg.wait();
  } catch (...) {
    // Tasks catch their own exceptions; a cancellation report is all that could arrive here.
  }
}

IPUML_INLINE int64_t BatchPrefetcher::count() const { return s_->count; }

IPUML_INLINE Example BatchPrefetcher::take() {
  State& st = *s_;
  IPUML_CHECK(st.next_take < st.count, "DataLoader: no batch left in this epoch (", st.count,
              " taken)");
  const int64_t b = st.next_take++;
  // Keep batches b+1 .. b+depth in flight.
  while (st.next_schedule < st.count && st.next_schedule <= b + st.depth) {
    const int64_t k = st.next_schedule++;
    if (k == b) continue;  // wanted now: assembled below on this thread
    State* sp = &st;
    st.tg.run([sp, k] { sp->run(k, false); });
  }
  State::Slot& s = st.slots[static_cast<size_t>(b)];
  st.run(b, true);  // no-op when a worker claimed it first
  {
    std::unique_lock<std::mutex> lock(st.mu);
    st.cv.wait(lock, [&] { return s.state.load(std::memory_order_acquire) == State::kDone; });
  }
  Example out = std::move(s.value);
  s.value = Example{};
  if (s.error) {
    std::exception_ptr e = std::exchange(s.error, nullptr);
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      fail("DataLoader: assembling batch ", b, " failed: ", ex.what());
    } catch (...) {
      fail("DataLoader: assembling batch ", b, " failed with a non-standard exception");
    }
  }
  return out;
}

// Copies `part`'s values into row `row` of `batch` (both contiguous, same dtype).
IPUML_INLINE void copy_row(Tensor& batch, const Tensor& part, int64_t row) {
  const Tensor src = part.contiguous();
  const size_t bytes = static_cast<size_t>(src.numel()) * dtype_size(src.dtype());
  if (bytes == 0) return;
  std::memcpy(static_cast<char*>(batch.raw_data()) + static_cast<size_t>(row) * bytes,
              src.raw_data(), bytes);
}

IPUML_INLINE Tensor stack_field(const std::vector<Example>& samples, bool data) {
  const auto field = [&](size_t i) -> const Tensor& {
    return data ? samples[i].data : samples[i].target;
  };
  const char* what = data ? "data" : "target";
  const bool defined = field(0).defined();
  for (size_t i = 0; i < samples.size(); ++i)
    IPUML_CHECK(field(i).defined() == defined, "DataLoader: sample ", i, " of the batch ",
                field(i).defined() ? "has" : "lacks", " a ", what, " tensor and sample 0 ",
                defined ? "has" : "lacks", " one");
  if (!defined) return Tensor();
  const Tensor& first = field(0);
  for (size_t i = 1; i < samples.size(); ++i)
    IPUML_CHECK(field(i).shape() == first.shape() && field(i).dtype() == first.dtype(),
                "DataLoader: cannot stack sample ", i, "'s ", what, " (",
                dtype_name(field(i).dtype()), " ", shape_str(field(i).shape()),
                ") with sample 0's (", dtype_name(first.dtype()), " ", shape_str(first.shape()),
                ")");
  Shape shape = first.shape();
  shape.insert(shape.begin(), static_cast<int64_t>(samples.size()));
  Tensor batch = empty(shape, first.dtype());
  for (size_t i = 0; i < samples.size(); ++i) copy_row(batch, field(i), static_cast<int64_t>(i));
  return batch;
}

IPUML_INLINE Example collate(const std::vector<Example>& samples) {
  IPUML_CHECK(!samples.empty(), "DataLoader: cannot collate an empty batch");
  return Example{stack_field(samples, true), stack_field(samples, false)};
}

}  // namespace ipuml::data::detail
