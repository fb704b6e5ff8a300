// Gradient all-reduce across processes: ipuml's deterministic Communicator::allreduce_sum
// (reduce-scatter in rank order, then all-gather) against MPI_Allreduce, the call a user of MPI
// would make (whose summation order MPI does not promise). Run under MPI:
//   mpirun -np 2 --oversubscribe --allow-run-as-root build/benchmarks/bench_allreduce
// Prints, per message size, the time per call of each and the ratio MPI / ipuml (> 1: ours is
// faster). 425,347 floats is the Neuron-Inverter hpar_dev gradient.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <ipuml/ipuml.hpp>

#ifdef IPUML_BENCH_WITH_MPI
#include <mpi.h>
#endif

int main() {
  const auto world = ipuml::dist::world();
  auto& comm = *world;
  if (comm.size() < 2) {
    std::printf(
        "bench_allreduce: 1 process; run it under mpirun -np 2 (or more) to time the "
        "all-reduce\n");
    return 0;
  }
  const bool root = comm.rank() == 0;
  if (root)
    std::printf("%d processes (%s)\n%12s %14s %14s %8s\n", comm.size(), comm.backend().c_str(),
                "floats", "ipuml us", "MPI us", "ratio");
  for (int64_t n : {int64_t{1} << 10, int64_t{1} << 14, int64_t{1} << 17, int64_t{425347},
                    int64_t{1} << 21, int64_t{1} << 23}) {
    // Ranks hold x and -x, so repeated sums stay 0 (values that doubled each call would reach
    // inf, and the timings would depend on how many calls came before).
    std::vector<float> a(static_cast<size_t>(n), comm.rank() % 2 ? -0.5f : 0.5f);
    // Every rank must make the same calls: five warm-up calls everywhere, then rank 0 picks the
    // count for about 0.3 s from their time and tells the others.
    auto timed = [&](int64_t reps) {
      comm.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < reps; ++i) comm.allreduce_sum(a.data(), n);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
             static_cast<double>(reps);
    };
    int64_t reps = std::max<int64_t>(5, static_cast<int64_t>(0.3 / timed(5)));
    comm.broadcast(&reps, sizeof reps, 0);
    const double ours = timed(reps);
    double theirs = 0;
#ifdef IPUML_BENCH_WITH_MPI
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < reps; ++i)
      MPI_Allreduce(MPI_IN_PLACE, a.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    theirs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
             static_cast<double>(reps);
#endif
    if (root) {
      if (theirs > 0)
        std::printf("%12lld %14.1f %14.1f %7.2fx\n", static_cast<long long>(n), ours * 1e6,
                    theirs * 1e6, theirs / ours);
      else
        std::printf("%12lld %14.1f %14s\n", static_cast<long long>(n), ours * 1e6, "-");
    }
  }
  return 0;
}
