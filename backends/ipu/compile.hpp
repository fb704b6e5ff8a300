// The emulator core (backends/emu) seen from the IPU: its types and functions under ipu:: as
// well, and the entry points that take an ipu::Target, each the core's with the IPU's target
// model (ipu_model.hpp).
#pragma once

#include <memory>
#include <vector>

#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/backends/emu/executor.hpp>
#include <ipuml/backends/emu/matrix_plan.hpp>
#include <ipuml/backends/emu/partition.hpp>
#include <ipuml/backends/emu/profile.hpp>
#include <ipuml/backends/emu/report_html.hpp>
#include <ipuml/backends/emu/schedule.hpp>
#include <ipuml/backends/emu/trace.hpp>
#include <ipuml/backends/ipu/ipu_model.hpp>
#include <ipuml/backends/ipu/target.hpp>

namespace ipuml::ipu {

using namespace ::ipuml::emu;
// The core's overloads beside the IPU's below (a name declared here hides the directive's).
using emu::compile;
using emu::compile_plan;
using emu::matrix_cost;
using emu::pipelined_cycles;
using emu::plan_fits_graph;
using emu::plan_graph;
using emu::plan_key;
using emu::to_string;

inline Plan plan_graph(const ir::Graph& g, const Target& t, const CompileOptions& o) {
  return plan_graph(g, ipu_model(t), o);
}
inline Plan compile_plan(const ir::Graph& g, const Target& t, const CompileOptions& o) {
  return compile_plan(g, ipu_model(t), o);
}
inline uint64_t plan_key(const ir::Graph& g, const Target& t, const CompileOptions& o) {
  return plan_key(g, IpuModel(t), o);
}
inline bool plan_fits_graph(const ir::Graph& g, const Target& t, const Plan& p) {
  return plan_fits_graph(g, IpuModel(t), p);
}
// Compiles `graph` for `target` (through the plan cache when configured) and returns the
// executable. Throws ipuml::Error on out of memory unless options.allow_out_of_memory.
inline std::unique_ptr<Executable> compile(const ir::Graph& graph, const Target& target,
                                           const CompileOptions& options = {}) {
  return compile(graph, ipu_model(target), options);
}
inline MatrixCost matrix_cost(const Target& t, const MatrixProblem& p, const MatrixGrid& g,
                              DType partials, double limit) {
  return matrix_cost(IpuModel(t), p, g, partials, limit);
}
inline double pipelined_cycles(const std::vector<std::vector<double>>& stage_ipu, const Target& t,
                               int64_t micro_batches) {
  return pipelined_cycles(stage_ipu, IpuModel(t), micro_batches);
}
// The IPU parameters of a program; throws ipuml::Error when it was compiled for another target.
inline const Target& target_of(const Executable& exe) { return ipu_target_of(exe.model()); }

}  // namespace ipuml::ipu
