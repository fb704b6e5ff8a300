// Compiling an ir::Graph for the emulated device: liveness, unit mapping of every tensor, a split
// per op chosen by estimated cycles under a per-unit memory limit, per-unit memory accounting,
// BSP supersteps, and a checksummed on-disk cache of the resulting plan.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ipuml/backends/emu/machine.hpp>
#include <ipuml/backends/emu/memory_category.hpp>
#include <ipuml/backends/emu/target_model.hpp>
#include <ipuml/backends/emu/matrix_plan.hpp>
#include <ipuml/backends/emu/partition.hpp>
#include <ipuml/backends/emu/placement.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>

namespace ipuml::emu {

struct CompileOptions {
  // Fraction of a unit's memory an op's temporaries may use (poplibs' availableMemoryProportion).
  double available_memory_proportion = 0.6;
  // Per device, overriding the global value where given (PopTorch's
  // setAvailableMemoryProportion({"IPU0": 0.15, ...}); 0: the global value; a node's own
  // value wins over both).
  std::vector<double> available_memory_proportion_per_device;
  // The type of matrix ops' partial sums (PopTorch's setPartialsType: float, or half).
  DType partials_type = DType::Float32;
  // Stochastic rounding of half results when the program runs (execution only: the plan and
  // its cache key do not change), from counter-based random bits of `rounding_seed`.
  bool stochastic_rounding = false;
  uint64_t rounding_seed = 0;
  // Execution only as well: run with exchange checking (ExecOptions::check_exchange).
  bool check_exchange = false;
  // Finish the compile even when a unit overflows; the memory report says so.
  bool allow_out_of_memory = false;
  // Replicas share one program (each on its own devices). The gradient all-reduce is charged
  // once per weight update by the runtime (allreduce_cycles), not inside any program.
  int64_t replication_factor = 1;
  // Where compiled plans are cached; empty: the IPUML_CACHE_DIR environment variable, if set.
  std::string cache_dir;
  // "Graph compilation: NN%" on stderr, only when stderr is a terminal.
  bool progress = true;
  // The program's reports (profile.json, trace.json) go to <report_dir>/<program_name>/ after
  // compiling and after the first run; see ExecOptions. Neither changes the plan.
  std::string program_name = "program";
  std::string report_dir;
};

// Contiguous parts of one split axis over the units of one device: consecutive units from
// first_unit (wrapping around) on a line machine; on a mesh a rectangle `width` units wide whose
// top-left unit is first_unit, filled row by row, in a mesh of `columns` columns (placement.hpp).
struct UnitSpan {
  int32_t device = 0;
  int32_t first_unit = 0;
  int32_t parts = 1;
  int64_t extent = 1;
  int64_t grain = 1;
  int32_t width = 0;    // 0: a line
  int32_t columns = 0;  // the mesh's, where width > 0
  int64_t begin(int64_t p) const { return part_begin(extent, grain, parts, p); }
  int64_t rows(int64_t p) const { return begin(p + 1) - begin(p); }
  int32_t unit(int64_t p, int64_t units_per_device) const {
    if (width <= 0) return static_cast<int32_t>((first_unit + p) % units_per_device);
    const int64_t r = first_unit / columns + p / width, c = first_unit % columns + p % width;
    return static_cast<int32_t>((r * columns + c) % units_per_device);
  }
  // The region the parts cover: a line of `parts`, or width x the rows they fill.
  RegionShape shape() const {
    if (width <= 0) return {parts, 1};
    return {width, (int64_t{parts} + width - 1) / width};
  }
  bool operator==(const UnitSpan&) const = default;
};

// Where one value lives: `axis` -1 means contiguous element ranges (flat), d >= 1 ranges of dim d.
struct ValueLayout {
  int32_t axis = -1;
  UnitSpan span;
  int64_t bytes = 0;
  double bytes_on_part(int64_t p) const {
    return static_cast<double>(bytes) * static_cast<double>(span.rows(p)) /
           static_cast<double>(span.extent);
  }
};

struct NodePlan {
  SliceSpec spec;
  UnitSpan span;    // parts of spec's axis over units (Grid: the grid's units, one part each)
  MatrixGrid grid;  // Grid: the partition; its K partials reduce on reduce_units units
  int64_t reduce_units = 0;
  uint8_t resident = 0;  // Grid: operands laid out by this op that stay put (1: a, 2: b)
  int32_t follows = -1;  // elementwise: the input whose layout the op and its output take
  int32_t serial = 1;    // serial factor that keeps the temporaries under the limit
  int64_t vertices = 0;
  double flops = 0;
  double compute_cycles = 0, exchange_cycles = 0, sync_cycles = 0, inter_device_cycles = 0;
  double exchange_bytes = 0;      // moved over the exchange, all units together
  double inter_device_bytes = 0;  // received from other devices
  double max_temp_bytes = 0;      // largest per-unit temporaries
};

struct UnitMemory {
  int64_t bytes[kNumCategories] = {};
  int32_t peak_step = -1;  // program step where the not-always-live part peaks
  int64_t total() const {
    int64_t s = 0;
    for (auto b : bytes) s += b;
    return s;
  }
  int64_t always_live() const {
    int64_t s = 0;
    for (int c = kState; c <= kStack; ++c) s += bytes[c];
    return s;
  }
};

struct TensorOnUnit {
  std::string name;
  int64_t bytes = 0;
  std::string category;
};

struct MemoryReport {
  int64_t bytes_per_unit = 0;
  std::vector<UnitMemory> units;  // devices x units_per_device, device-major
  std::vector<int64_t> always_live_per_step, not_always_live_per_step;
  bool out_of_memory = false;
  int64_t units_over = 0;
  int64_t worst_unit = 0;
  std::vector<TensorOnUnit> worst_unit_tensors;  // largest first
  std::string advice;  // out of memory: what would make it fit (checked where it says so)
  // Unit memory that replicated tensor sharding saves on each replica (state bytes held by the
  // other replicas instead).
  int64_t replica_sharding_saved_bytes = 0;
  int64_t total_bytes() const {
    int64_t s = 0;
    for (auto& t : units) s += t.total();
    return s;
  }
};

// One BSP superstep: exchange into the units, sync, compute (a compute set).
struct Superstep {
  int64_t node = -1;  // -1: host transfer
  int32_t device = 0;
  double compute = 0, exchange = 0, sync = 0;
};

// Cycles a program spends, per device, by phase (exchange, sync, compute, host transfers).
struct DeviceCycles {
  double compute = 0, exchange = 0, sync = 0, host = 0;
  double total() const { return compute + exchange + sync + host; }
};
struct RunCycles {
  std::vector<DeviceCycles> per_device;
  double total = 0;  // the step's cycles, as the target combines its devices' (program_cycles)
  double simulated_seconds = 0;  // total / clock
};

struct Plan {
  uint64_t key = 0;
  // The target it is planned for: its model (in a plan read from the cache, attached by
  // compile_plan once the plan is checked against it), its shape, and its parameters as JSON.
  std::shared_ptr<const emu::TargetModel> model;
  emu::Machine machine;
  std::string target_json;
  std::vector<NodePlan> nodes;
  std::vector<ValueLayout> values;
  std::vector<Superstep> supersteps;
  MemoryReport memory;
  RunCycles cycles;  // one step, from the static schedule
  DType partials_type = DType::Float32;
  double host_in_bytes = 0, host_out_bytes = 0;
  int64_t compute_sets = 0, vertices = 0, edges = 0;
  bool from_cache = false;
};

using TargetModelPtr = std::shared_ptr<const emu::TargetModel>;

// Compiles without touching the cache; throws the out-of-memory ipuml::Error unless allowed.
// Every cost and memory term comes from the target model (backends/device/compile.hpp: for a
// device).
Plan plan_graph(const ir::Graph& g, const TargetModelPtr& t, const CompileOptions& o);
// As plan_graph, through the on-disk cache when a cache directory is configured.
Plan compile_plan(const ir::Graph& g, const TargetModelPtr& t, const CompileOptions& o);

// The cache key: graph signature, target and the options that change the plan.
uint64_t plan_key(const ir::Graph& g, const emu::TargetModel& t, const CompileOptions& o);
std::string plan_cache_path(const std::string& dir, uint64_t key);
// Empty when no cache directory is configured.
std::string resolve_cache_dir(const CompileOptions& o);
// Writes atomically, with an HMAC-SHA-256 under the cache directory's key (ipuml-cache.key, 32
// random bytes, mode 0600, made on first use): an integrity check, not a security boundary.
// A failure to write is not an error (the cache is an optimisation).
bool save_plan(const Plan& p, const std::string& path);
// Loads and verifies (a regular file, magic, version, key, size, HMAC); false if absent or not
// trustworthy. compile_plan also requires plan_fits_graph.
bool load_plan(const std::string& path, uint64_t key, Plan& out);
// Whether every node's partition of a loaded plan is one the planner could make for this graph
// and target (kinds, part counts, units, the grid's K slicing); compile_plan recompiles if not.
bool plan_fits_graph(const ir::Graph& g, const emu::TargetModel& t, const Plan& p);

// What the plan's target calls memory category c (the core's name without a model).
std::string category_name(const Plan& p, int c);

// The message of the out-of-memory error, also printed in reports.
std::string out_of_memory_message(const Plan& p);

// The unit memory of a training step and its weight update as PopTorch builds them: two
// programs of one graph, so one image. Tensors both programs use (parameters, accumulators)
// are held once, where the step lays them out; the update's own state (the optimizer's) is
// added where the update lays it out; both programs' vertex state and exchange code are
// resident; their codelets are added without looking for types both run on a unit (an upper
// bound by the update's few codelets); activations and temporaries are live in one program at a
// time, so each unit holds the larger of the two peaks. `shared[i]` says whether the update
// graph's i-th state (in update_graph.states order) is also a state of the step.
MemoryReport combine_memory(const Plan& step, const ir::Graph& update_graph, const Plan& update,
                            const std::vector<bool>& shared);

}  // namespace ipuml::emu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/emu/compiler_impl.hpp>
#endif
