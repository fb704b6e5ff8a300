// The backend interface, drawn once for eager and compiled mode: its devices, the eager kernel
// table of its device type, how a captured graph is compiled into an executable for it, and
// which ops it implements (in eager mode the rest run on the CPU with copies, reported once).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/backend/profiling.hpp>
#include <ipuml/backend/program_options.hpp>
#include <ipuml/core/device.hpp>
#include <ipuml/ir/graph.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::backend {

struct DeviceInfo {
  int id = 0;
  std::string name;         // e.g. "cpu", "ipu2"
  std::string description;  // one line for listings
  size_t memory_bytes = 0;
  int compute_units = 0;  // cores, tiles
};

// One micro-batch of Executable::run_many: its inputs, the state tensors it binds (the
// caller keeps them alive), its random step.
struct RunItem {
  std::vector<Tensor> inputs;
  const std::vector<Tensor>* states = nullptr;
  uint64_t step = 0;
};

// A compiled graph, runnable many times with the cpu::GraphExecutor contract.
class Executable {
 public:
  virtual ~Executable() = default;
  // `inputs` feed graph.inputs, `states` are the tensors graph.states are bound to (updated in
  // place at the end of the run), `step` varies random ops between runs.
  virtual std::vector<Tensor> run(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& states, uint64_t step) = 0;
  // The items as run() runs them one after another, with the same results; a backend may
  // overlap them (the IPU emulator's pipelined stages) where that gives the same bits.
  virtual std::vector<std::vector<Tensor>> run_many(const std::vector<RunItem>& items);
  // The profiling interface (reports, modelled device time) of backends that model their
  // device; null for those that do not.
  virtual const Profiling* profiling() const { return nullptr; }
  // This executable is a training step whose weight update is `update`, run as another program
  // of the same device image: backends that account device memory check the two together
  // (throwing when they do not fit unless `allow_out_of_memory`). `shared[i]`: whether
  // update's i-th state is also one of the step's.
  virtual void share_memory_image(Executable& update, const std::vector<bool>& shared,
                                  bool allow_out_of_memory) {
    (void)update;
    (void)shared;
    (void)allow_out_of_memory;
  }
  // Another instance of this compiled program for a further replica: its own buffers (and
  // emulated devices), so that replicas can run on the host at the same time. Null when the
  // backend cannot make one; the replicas then run one after another on this instance.
  virtual std::unique_ptr<Executable> replica() const { return nullptr; }
  // The most host threads one run may use (0: all): a replica lane's share of the cores, so
  // that lanes running at once do not oversubscribe them.
  virtual void set_host_threads(int threads) { (void)threads; }
};

// Options only this backend understands, as text (e.g. {"target", "ipu2"}), parsed by the
// backend; unknown keys are errors. The runtime passes what the user set for the backend by name
// (Options::backendOption, and PopTorch's IPU setters for "ipu").
using CompileOptions = std::map<std::string, std::string>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::vector<DeviceInfo> devices() const = 0;
  // Compiled mode: whether compile() handles graphs with this op.
  virtual bool supports(ir::OpKind kind) const = 0;
  virtual std::unique_ptr<Executable> compile(const ir::Graph& graph, const ProgramOptions& program,
                                              const CompileOptions& options) const = 0;
  // A single program with default ProgramOptions (tests, tools).
  std::unique_ptr<Executable> compile(const ir::Graph& graph,
                                      const CompileOptions& options = {}) const {
    return compile(graph, ProgramOptions{}, options);
  }

  // Eager mode. The device type whose tensors this backend's kernel table serves (none: the
  // backend runs compiled graphs only).
  virtual std::optional<DeviceType> eager_device_type() const { return std::nullopt; }
  // Whether run_eager runs `kind` with these attributes on inputs of these dtypes and shapes
  // (ggml's supports_op); when not, the op runs on the CPU with copies, reported once.
  virtual bool supports_op(ir::OpKind kind, const ir::Attrs& attrs,
                           const std::vector<ir::TensorMeta>& inputs) const {
    (void)attrs;
    (void)inputs;
    return supports(kind);
  }
  // Runs one op on `device`: `inputs` are contiguous tensors there, `outputs` are allocated
  // there with the shapes and dtypes ir::infer gave; the backend writes their values.
  virtual void run_eager(Device device, ir::OpKind kind, const ir::Attrs& attrs,
                         const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) const;
};

// The registry. Adding a backend is one line: IPUML_REGISTER_BACKEND(MyBackend).
std::map<std::string, std::shared_ptr<Backend>>& registry();
// The eager kernel tables by device type (filled by register_backend; read on every eager op
// on a device other than the CPU, so a plain array, and inline).
inline std::array<Backend*, kMaxDeviceTypes>& eager_tables() {
  static std::array<Backend*, kMaxDeviceTypes> t{};
  return t;
}
bool register_backend(std::shared_ptr<Backend> b);
// The backend whose kernel table serves `type`, or null.
inline Backend* eager_backend(DeviceType type) { return eager_tables()[static_cast<size_t>(type)]; }
// One device of each registered eager device type (index 0), CPU first.
std::vector<Device> eager_devices();

// Fallback reports: an op a device's backend lacks is announced once per (backend, op) on
// stderr. reset_fallback_reports() makes the next fallbacks report again.
void report_fallback(const Backend& b, ir::OpKind kind);
void reset_fallback_reports();
std::vector<std::string> backend_names();
std::shared_ptr<Backend> get_backend(const std::string& name);

}  // namespace ipuml::backend

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backend/backend_impl.hpp>
#endif

#define IPUML_REGISTER_BACKEND(Type)                  \
  inline const bool ipuml_backend_registered_##Type = \
      ::ipuml::backend::register_backend(std::make_shared<Type>())
