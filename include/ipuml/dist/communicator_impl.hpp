// Bodies of the communicators (compiled once in src/lib/dist.cpp, where IPUML_WITH_MPI brings
// in MPI when the build found it; header-only builds get the single-process communicator).
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <unistd.h>

#include <ipuml/core/error.hpp>
#include <ipuml/dist/communicator.hpp>

#ifdef IPUML_WITH_MPI
#include <mpi.h>
#endif

namespace ipuml::dist {

namespace detail {

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "single"; }
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_sum(double*, int64_t) override {}
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

// Whether a launcher (mpirun, srun, a PMI server) started this process as one of several.
inline int launched_instances() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  return 1;
}

inline double timeout_from_env() {
  if (const char* v = std::getenv("IPUML_DIST_TIMEOUT")) {
    const double s = std::atof(v);
    IPUML_CHECK(s > 0, "dist: IPUML_DIST_TIMEOUT must be a positive number of seconds, got '", v,
                "'");
    return s;
  }
  return 600.0;
}

#ifdef IPUML_WITH_MPI

// The message a rank prints when the launcher stops it because another rank failed (mpirun
// sends SIGTERM to the survivors). Formatted before the handler is installed: async-signal-safe.
inline char g_term_message[256];

extern "C" inline void ipuml_dist_on_term(int) {
  const ssize_t r = ::write(2, g_term_message, std::strlen(g_term_message));
  (void)r;
  std::_Exit(143);
}

inline void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class Mpi final : public Communicator {
 public:
  Mpi() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        fail("dist: MPI_Init_thread failed");
      std::atexit(finalize_mpi);
    }
    // Errors come back as codes so that they become ipuml::Error, not an abort inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    std::snprintf(g_term_message, sizeof g_term_message,
                  "ipuml: rank %d of %d stopped by the launcher (SIGTERM): another rank of the "
                  "job failed or was killed\n",
                  rank_, size_);
    std::signal(SIGTERM, ipuml_dist_on_term);
    timeout_ = timeout_from_env();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  void allreduce_sum(float* data, int64_t n) override { sum(data, n, MPI_FLOAT); }
  void allreduce_sum(double* data, int64_t n) override { sum(data, n, MPI_DOUBLE); }
  void broadcast(void* data, int64_t bytes, int root) override {
    IPUML_CHECK(bytes >= 0 && bytes <= INT_MAX, "dist: broadcast of ", bytes,
                " bytes (expected 0..", INT_MAX, ")");
    MPI_Request req;
    check(MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &req),
          "broadcast");
    wait(req, "broadcast");
  }
  void barrier() override {
    MPI_Request req;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "barrier");
    wait(req, "barrier");
  }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  void check(int rc, const char* what) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    fail("dist: ", what, " on rank ", rank_, " of ", size_, " failed: ", std::string(text, len),
         " (another rank died?)");
  }
  // Polls instead of blocking, so a peer that died without the launcher noticing is reported
  // after timeout_ seconds. Non-blocking collectives only progress inside MPI calls, so for the
  // first 20 ms it tests back to back, yielding the core between tests (ranks sharing cores
  // still run); only a longer wait backs off to sleeping. Sleeping from the start (200 tests,
  // then up to 1 ms naps) made a 1.7 MB gradient all-reduce cost about as much as the 2 ms
  // training step it followed (Neuron-Inverter hpar_dev: 2 processes 1.0x of one, now 1.4x).
  void wait(MPI_Request& req, const char* what) {
    const auto t0 = std::chrono::steady_clock::now();
    int done = 0;
    for (;;) {
      check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (waited > timeout_)
        fail("dist: ", what, " on rank ", rank_, " of ", size_, ": no answer from the other ranks ",
             "after ", timeout_, " s (a rank died, hangs, or made different collective calls; ",
             "IPUML_DIST_TIMEOUT sets the limit)");
      if (waited < 0.02)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(waited < 0.2 ? 100 : 1000));
    }
  }
  // Reduce-scatter in rank order, then all-gather: rank j sums chunk j of every rank's data,
  // r = 0, 1, ... in turn, and sends the sum to all.
  template <typename T>
  void sum(T* data, int64_t n, MPI_Datatype type) {
    if (size_ == 1 || n == 0) return;
    IPUML_CHECK(n > 0 && n <= INT_MAX, "dist: allreduce of ", n, " values (expected 1..", INT_MAX,
                ")");
    const int p = size_;
    std::vector<int> counts(static_cast<size_t>(p)), displs(static_cast<size_t>(p));
    for (int j = 0; j < p; ++j) {
      const int64_t lo = n * j / p, hi = n * (j + 1) / p;
      displs[static_cast<size_t>(j)] = static_cast<int>(lo);
      counts[static_cast<size_t>(j)] = static_cast<int>(hi - lo);
    }
    const int mine = counts[static_cast<size_t>(rank_)];
    // Kept between calls: a fresh buffer of this size is a fresh mmap and page faults each step.
    const size_t elems = static_cast<size_t>(mine) * static_cast<size_t>(p);
    if (scratch_.size() * sizeof(double) < elems * sizeof(T))
      scratch_.resize((elems * sizeof(T) + sizeof(double) - 1) / sizeof(double));
    T* parts = reinterpret_cast<T*>(scratch_.data());
    std::vector<int> rcounts(static_cast<size_t>(p), mine), rdispls(static_cast<size_t>(p));
    for (int j = 0; j < p; ++j) rdispls[static_cast<size_t>(j)] = j * mine;
    MPI_Request req;
    check(MPI_Ialltoallv(data, counts.data(), displs.data(), type, parts, rcounts.data(),
                         rdispls.data(), type, MPI_COMM_WORLD, &req),
          "allreduce (reduce-scatter)");
    wait(req, "allreduce (reduce-scatter)");
    T* out = data + displs[static_cast<size_t>(rank_)];
    for (int i = 0; i < mine; ++i) {
      T s = parts[static_cast<size_t>(i)];
      for (int r = 1; r < p; ++r) s += parts[static_cast<size_t>(r * mine + i)];
      out[i] = s;
    }
    check(MPI_Iallgatherv(MPI_IN_PLACE, 0, type, data, counts.data(), displs.data(), type,
                          MPI_COMM_WORLD, &req),
          "allreduce (all-gather)");
    wait(req, "allreduce (all-gather)");
  }

  int rank_ = 0, size_ = 1;
  std::vector<double> scratch_;  // the reduce-scatter's receive buffer (float or double)
};

#endif  // IPUML_WITH_MPI

}  // namespace detail

IPUML_INLINE bool mpi_built() {
#ifdef IPUML_WITH_MPI
  return true;
#else
  return false;
#endif
}

IPUML_INLINE std::shared_ptr<Communicator> single_process() {
  return std::make_shared<detail::SingleProcess>();
}

IPUML_INLINE std::shared_ptr<Communicator> world() {
  static std::mutex mu;
  static std::shared_ptr<Communicator> w;
  std::lock_guard<std::mutex> lock(mu);
  if (w) return w;
  const int launched = detail::launched_instances();
#ifdef IPUML_WITH_MPI
  if (launched > 1) {
    w = std::make_shared<detail::Mpi>();
    return w;
  }
#else
  IPUML_CHECK(launched <= 1, "dist: the launcher started ", launched,
              " instances, but this ipuml was built without MPI (install libopenmpi-dev, "
              "scripts/install-deps.sh, and rebuild)");
#endif
  w = single_process();
  w->set_timeout_seconds(detail::timeout_from_env());
  return w;
}

}  // namespace ipuml::dist
