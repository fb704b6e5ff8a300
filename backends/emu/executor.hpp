// The device emulator's executable: a compiled plan run as BSP supersteps, each compute set a
// parallel loop over its units' vertices inside the owning device's thread arena.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::emu {

struct ExecOptions {
  // Units are grouped into at most this many chunks per compute set (0: the thread count);
  // contiguous units of a chunk run as one kernel call, which gives the same bits.
  int64_t max_chunks = 0;
  // Compute sets smaller than this (FLOPs + bytes) run as one call on the calling thread: below
  // it, entering the arena and splitting costs more than the CPU kernel's own parallelism gains.
  double min_parallel_work = 1 << 22;
  // The device's stochastic rounding of float16/bfloat16 results (PopTorch's
  // Precision.enableStochasticRounding), from counter-based random bits of this seed.
  bool stochastic_rounding = false;
  uint64_t rounding_seed = 0;
  // The program's name in reports ("training", "weight_update", "inference", ...) and the
  // directory they go to, as <report_dir>/<program_name>/ (claim_report_directory: a name
  // another program of this process holds there gets _2, _3, ...). An empty report_dir means
  // IPUML_ENGINE_OPTIONS' autoReport.directory when it asks for reports, else none.
  std::string program_name = "program";
  std::string report_dir;
  // false: no reports at all (a further replica's instance: replica 0 reports the program).
  bool write_reports = true;
  // Exchange checking (docs/planner.md): every value lives in per-unit pieces as the plan lays
  // it out, each op receives its operands by copying those pieces (poison where none covers),
  // split ops run one unit's slice at a time, results go back into their owners' pieces, and
  // an op that reads another device's data without its plan paying for the device-Link transfer, or
  // writes onto another device, is an error. Slow; for tests. Also IPUML_ENGINE_OPTIONS'
  // {"debug.checkExchange": "true"} or the compile option check_exchange=1.
  bool check_exchange = false;
};

using backend::RunItem;

struct RunRecord {
  uint64_t step = 0;
  RunCycles cycles;
  double wall_seconds = 0;
};

class Executable {
 public:
  Executable(ir::Graph graph, Plan plan, ExecOptions exec = {});
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Same contract as cpu::GraphExecutor::run: `inputs` feed graph.inputs in order, `states`
  // are bound to graph.states and receive the step's updates; `step` varies random ops.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& states,
                          uint64_t step = 0);
  // The items as run() would run them one after another, with the same results. `pipelined`:
  // the graph's pipeline stages (ir::Node::stage) run different micro-batches at once, each
  // stage taking them in order, as the devices of a pipelined program do; it falls back to one
  // after another where the stages cannot overlap with the same bits (see pipelinable()).
  std::vector<std::vector<Tensor>> run_many(const std::vector<RunItem>& items, bool pipelined);
  bool pipelinable() const;
  // Another instance of the same program (graph and plan) with its own buffers, scratch and
  // device arenas, for a further replica run at the same time; it writes no reports.
  std::unique_ptr<Executable> replica() const;
  // The most host threads each emulated device's arena uses (0: all the host's).
  void set_host_threads(int threads);
  int num_stages() const;
  // Modelled cycles of `micro_batches` runs back to back (backends/emu/schedule.hpp):
  // pipelined over the program's stages, or one after another (sharded, or a single device).
  double cycles_for(int64_t micro_batches, bool pipelined) const;

  const ir::Graph& graph() const;
  const Plan& plan() const;
  // The target model the plan was made for, and its shape.
  const emu::TargetModel& model() const;
  const emu::Machine& machine() const;
  const MemoryReport& memory_report() const;
  // Replaces the report with a wider image (combine_memory: the step and its weight update).
  void set_memory_report(MemoryReport m);
  // Replaces the modelled cycles of a run: a target whose steps overlap in a way the static
  // schedule does not describe (the CS-2's pipelined layout) states its own.
  void set_cycles(const RunCycles& c);
  bool loaded_from_cache() const;
  void set_exec_options(const ExecOptions& e);

  // Cycles of the last run (per device compute/exchange/sync/host) and its wall time.
  const RunCycles& last_run_cycles() const;
  // Bytes the last run with ExecOptions::check_exchange really moved between devices.
  double checked_inter_device_bytes() const;
  double last_run_wall_seconds() const;
  std::vector<RunRecord> run_history() const;  // the last 1000 runs, oldest first

  // The profile report (see docs/profile-report.md); samples_per_step > 0 adds throughputs.
  std::string profile_json(double samples_per_step = 0) const;
  // The execution trace (backends/emu/trace.hpp): one step, or the pipelined schedule of the
  // last pipelined run_many.
  std::string trace_json() const;
  // Writes profile.json and trace.json into `directory` (created if needed).
  void write_profile(const std::string& directory, double samples_per_step = 0) const;
  // Where this program's reports are written automatically; empty when they are not.
  const std::string& report_directory() const;
  const std::string& program_name() const;
  void print_profile_summary(std::ostream& os, double samples_per_step = 0) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Compiles `graph` for `target` (through the plan cache when configured) and returns the
// executable. Throws ipuml::Error on out of memory unless options.allow_out_of_memory.
std::unique_ptr<Executable> compile(const ir::Graph& graph, const TargetModelPtr& target,
                                    const CompileOptions& options = {});

}  // namespace ipuml::emu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/emu/executor_impl.hpp>
#endif
