// The backend interface, drawn once: what a device is, how a captured graph is compiled into an
// executable for it, and which ops it implements (the rest fall back to the CPU kernels).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

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
  virtual std::vector<std::vector<Tensor>> run_many(const std::vector<RunItem>& items) {
    std::vector<std::vector<Tensor>> out;
    for (auto& it : items) out.push_back(run(it.inputs, *it.states, it.step));
    return out;
  }
  // Backend-specific report (memory, cycles) as JSON text; "{}" when there is none.
  virtual std::string report_json() const { return "{}"; }
  // A short human-readable report (memory, busiest tiles, cycles) for the terminal.
  virtual void print_summary(std::ostream& os, double samples_per_step) const {
    (void)os;
    (void)samples_per_step;
  }
  // The modelled device time of the last run, for backends that model one.
  virtual std::optional<double> simulated_seconds() const { return std::nullopt; }
  // The modelled device time of `micro_batches` runs back to back, as the program's execution
  // strategy schedules them (pipelined stages overlap).
  virtual std::optional<double> simulated_seconds_for(int64_t micro_batches) const {
    auto s = simulated_seconds();
    if (!s) return std::nullopt;
    return *s * static_cast<double>(micro_batches);
  }
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
  // Modelled time to all-reduce `bytes` of gradients across `replicas` devices.
  virtual double allreduce_seconds(size_t bytes, int64_t replicas) const {
    (void)bytes;
    (void)replicas;
    return 0.0;
  }
};

// Options a backend understands, as text (e.g. {"target", "ipu2"}); unknown keys are errors.
using CompileOptions = std::map<std::string, std::string>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::vector<DeviceInfo> devices() const = 0;
  virtual bool supports(ir::OpKind kind) const = 0;
  virtual std::unique_ptr<Executable> compile(const ir::Graph& graph,
                                              const CompileOptions& options) const = 0;
};

// The registry. Adding a backend is one line: IPUML_REGISTER_BACKEND(MyBackend).
inline std::map<std::string, std::shared_ptr<Backend>>& registry() {
  static std::map<std::string, std::shared_ptr<Backend>> r;
  return r;
}
inline bool register_backend(std::shared_ptr<Backend> b) {
  registry()[b->name()] = std::move(b);
  return true;
}
inline std::vector<std::string> backend_names() {
  std::vector<std::string> n;
  for (auto& [k, v] : registry()) n.push_back(k);
  return n;
}
inline std::shared_ptr<Backend> get_backend(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (auto& k : backend_names()) known += (known.empty() ? "" : ", ") + k;
    fail("unknown backend '", name, "': registered backends are ", known);
  }
  return it->second;
}

}  // namespace ipuml::backend

#define IPUML_REGISTER_BACKEND(Type)                  \
  inline const bool ipuml_backend_registered_##Type = \
      ::ipuml::backend::register_backend(std::make_shared<Type>())
