// The CPU backend behind the backend interface: every op of the catalogue, graphs run by the
// planned-buffer GraphExecutor. It is also the fallback other backends use.
#pragma once

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/cpu/graph_executor.hpp>
#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/core/config.hpp>

// The members are defined in cpu_backend_impl.hpp, compiled once: the first of them is the
// classes' key function, so their virtual tables (and every member they reach) are compiled
// there too instead of in each unit that registers the backend.
namespace ipuml::cpu {

class CpuExecutable : public backend::Executable {
 public:
  explicit CpuExecutable(const ir::Graph& g);
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& states,
                          uint64_t step) override;
  std::unique_ptr<backend::Executable> replica() const override;
  // The CPU models no device time, so there is no profiling() interface.

 private:
  GraphExecutor exec_;
};

class CpuBackend : public backend::Backend {
 public:
  std::string name() const override;
  std::vector<backend::DeviceInfo> devices() const override;
  bool supports(ir::OpKind kind) const override;
  // The program options change nothing here (the runtime runs replicas; a graph's placements
  // all run on the host); the CPU has no options of its own.
  using backend::Backend::compile;
  std::unique_ptr<backend::Executable> compile(
      const ir::Graph& g, const backend::ProgramOptions&,
      const backend::CompileOptions& options) const override;

  // The eager table. detail::dispatch runs CPU tensors' ops on these kernels directly (no
  // virtual call on the hot path); this entry serves code that walks the registry.
  std::optional<DeviceType> eager_device_type() const override;
  void run_eager(Device, ir::OpKind kind, const ir::Attrs& attrs, const std::vector<Tensor>& inputs,
                 std::vector<Tensor>& outputs) const override;
};

IPUML_REGISTER_BACKEND(CpuBackend);

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/cpu_backend_impl.hpp>
#endif
