// The CPU executor's op profile and the loop accounting under it (core/parallel.hpp): how much of
// the ideal speed-up on the threads it ran with each op's partition allows, for the benchmarks'
// --profile and scripts/bench-vs-peers.sh --only threads.
#include <atomic>
#include <cmath>

#include <catch2/catch.hpp>

#include <ipuml/backends/cpu/op_profile.hpp>
#include <ipuml/ipuml.hpp>

using namespace ipuml;

namespace {
// Some arithmetic per index that the compiler cannot drop.
double spin(int64_t begin, int64_t end) {
  double s = 0;
  for (int64_t i = begin; i < end; ++i)
    for (int j = 0; j < 2000; ++j) s += std::sqrt(static_cast<double>(i + j));
  return s;
}
struct ThreadsReset {
  ~ThreadsReset() {
    set_num_threads(0);
    detail::set_loop_accounting(false);
  }
};
}  // namespace

TEST_CASE("loop accounting: a loop's pieces bound its speed-up and nested loops are its own",
          "[parallel]") {
  ThreadsReset reset;
  set_num_threads(16);
  std::atomic<double> sink{0};
  detail::set_loop_accounting(false);
  detail::take_loop_totals();
  parallel_for(4000, 1000, [&](int64_t b, int64_t e) { sink = sink + spin(b, e); });
  const auto off = detail::take_loop_totals();
  CHECK(off.seconds == 0);
  CHECK(off.work == 0);

  detail::set_loop_accounting(true);
  // 4 pieces of work: on 16 threads at best 4 run at once.
  parallel_for(4000, 1000, [&](int64_t b, int64_t e) {
    sink = sink + spin(b, e);
    // A loop inside a body is part of the outer loop's work, not one of its own.
    parallel_for(64, 1, [&](int64_t b2, int64_t e2) { sink = sink + spin(b2, e2); });
  });
  const auto four = detail::take_loop_totals();
  REQUIRE(four.seconds > 0);
  CHECK(four.least == Approx(four.work / 4));
  // The work counts each core the loop could use: no more than its pieces, threads and cores.
  CHECK(four.work <= four.seconds * 4 * (1 + 1e-9));
  CHECK(four.work >= four.seconds * (1 - 1e-9));
  // Totals start again after each take; a loop small enough to run inline is not a loop.
  parallel_for(10, 1000, [&](int64_t b, int64_t e) { sink = sink + spin(b, e); });
  CHECK(detail::take_loop_totals().seconds == 0);
  // 64 pieces: 16 threads each have their own.
  parallel_for(64, 1, [&](int64_t b, int64_t e) { sink = sink + spin(b, e); });
  const auto wide = detail::take_loop_totals();
  CHECK(wide.least == Approx(wide.work / 16));
}

TEST_CASE("op profile: the traced step's ops with their work and least time on its threads",
          "[parallel]") {
  ThreadsReset reset;
  set_num_threads(16);
  manual_seed(1);
  nn::Linear fc(256, 256);
  optim::SGD sgd(fc->parameters(), optim::SGDOptions(0.1));
  Tensor x = randn({512, 256});
  Tensor y = randn({512, 256});
  auto mse = [](const Tensor& out, const Tensor& t) { return (out - t).pow(2).mean(); };
  runtime::TrainingModel tm(
      fc.ptr(), Options().useIpuModel(false).showCompilationProgressBar(false), sgd, mse);
  tm(x, y);  // compiles
  cpu::reset_op_profile();
  cpu::set_op_profiling(true);
  tm(x, y);
  cpu::set_op_profiling(false);
  const auto rows = cpu::op_profile();
  REQUIRE_FALSE(rows.empty());
  bool matmul = false;
  for (const auto& r : rows) {
    INFO(r.name << ": " << r.seconds << " s, work " << r.work << ", least " << r.least);
    CHECK(r.threads == 16);
    CHECK(r.calls >= 1);
    // Work is at least the op's wall time, least time at most it, the bound a share.
    CHECK(r.work >= r.seconds * (1 - 1e-9));
    CHECK(r.least <= r.seconds * (1 + 1e-9));
    CHECK(r.bound() > 0);
    CHECK(r.bound() <= 1 + 1e-9);
    matmul = matmul || r.name == "MatMul";
  }
  CHECK(matmul);
  // Off again: nothing more is recorded.
  tm(x, y);
  CHECK(cpu::op_profile().size() == rows.size());
  CHECK(cpu::op_profile()[0].calls == rows[0].calls);
}
