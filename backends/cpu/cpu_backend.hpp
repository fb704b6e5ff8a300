// The CPU backend behind the backend interface: every op of the catalogue, graphs run by the
// planned-buffer GraphExecutor. It is also the fallback other backends use.
#pragma once

#include <thread>

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/cpu/graph_executor.hpp>
#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/core/parallel.hpp>

namespace ipuml::cpu {

class CpuExecutable : public backend::Executable {
 public:
  explicit CpuExecutable(const ir::Graph& g) : exec_(g) {}
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& states,
                          uint64_t step) override {
    return exec_.run(inputs, states, step);
  }
  std::unique_ptr<backend::Executable> replica() const override {
    return std::make_unique<CpuExecutable>(exec_.graph());
  }
  // The CPU models no device time, so there is no profiling() interface.

 private:
  GraphExecutor exec_;
};

class CpuBackend : public backend::Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::vector<backend::DeviceInfo> devices() const override {
    backend::DeviceInfo d;
    d.name = "cpu";
    d.compute_units = static_cast<int>(std::thread::hardware_concurrency());
    d.description = "host CPU, " + std::to_string(d.compute_units) + " threads";
    return {d};
  }
  bool supports(ir::OpKind kind) const override { return cpu::supports(kind); }
  // The program options change nothing here (the runtime runs replicas; a graph's placements
  // all run on the host); the CPU has no options of its own.
  using backend::Backend::compile;
  std::unique_ptr<backend::Executable> compile(
      const ir::Graph& g, const backend::ProgramOptions&,
      const backend::CompileOptions& options) const override {
    for (auto& [k, v] : options)
      fail("cpu backend: unknown compile option '", k, "' (the cpu backend takes none)");
    return std::make_unique<CpuExecutable>(g);
  }

  // The eager table. detail::dispatch runs CPU tensors' ops on these kernels directly (no
  // virtual call on the hot path); this entry serves code that walks the registry.
  std::optional<DeviceType> eager_device_type() const override { return kCPU; }
  void run_eager(Device, ir::OpKind kind, const ir::Attrs& attrs, const std::vector<Tensor>& inputs,
                 std::vector<Tensor>& outputs) const override {
    std::vector<cpu::ConstBuffer> in;
    for (auto& t : inputs) in.push_back({t.raw_data(), {t.shape(), t.dtype()}});
    std::vector<cpu::MutableBuffer> out;
    for (auto& t : outputs) out.push_back({t.raw_data(), {t.shape(), t.dtype()}});
    cpu::run_kernel(kind, attrs, in, out);
  }
};

IPUML_REGISTER_BACKEND(CpuBackend);

}  // namespace ipuml::cpu
