// Data parallelism across processes (the poprun role): a communicator over the instances of one
// job, on MPI when the build found it and the program was launched by mpirun or srun.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ipuml/core/config.hpp>

namespace ipuml::dist {

// The collectives data-parallel training needs. Every rank must make the same calls in the same
// order. Sums are deterministic: each rank's contribution is added in rank order, so the result
// is the same bits on every rank and from run to run, whatever MPI's own algorithms do. A rank
// that stops answering makes the others throw ipuml::Error after timeout_seconds() instead of
// waiting for ever.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "single" or "mpi"
  // In place: data[i] = sum over ranks r (in order 0, 1, ...) of rank r's data[i].
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends every process of the job (MPI_Abort); a single process just exits.
  [[noreturn]] virtual void abort(int code) = 0;
  double timeout_seconds() const { return timeout_; }
  void set_timeout_seconds(double s) { timeout_ = s; }

 protected:
  double timeout_ = 600.0;
};

// This process's communicator: MPI's world when launched as several instances (initialising MPI
// on first use), otherwise one rank of one. Throws ipuml::Error when the launcher started
// several instances but this build has no MPI. IPUML_DIST_TIMEOUT (seconds) sets the timeout.
std::shared_ptr<Communicator> world();
// A communicator of one process (no MPI).
std::shared_ptr<Communicator> single_process();
// Whether this build was made with MPI.
bool mpi_built();

}  // namespace ipuml::dist

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/dist/communicator_impl.hpp>
#endif
