// Bodies of the CPU backend and its executable (compiled once in src/lib/cpu_backend.cpp).
#pragma once

#include <string>
#include <thread>

#include <ipuml/backends/cpu/cpu_backend.hpp>

namespace ipuml::cpu {

IPUML_INLINE CpuExecutable::CpuExecutable(const ir::Graph& g) : exec_(g) {}

IPUML_INLINE std::vector<Tensor> CpuExecutable::run(const std::vector<Tensor>& inputs,
                                                    const std::vector<Tensor>& states,
                                                    uint64_t step) {
  return exec_.run(inputs, states, step);
}

IPUML_INLINE std::unique_ptr<backend::Executable> CpuExecutable::replica() const {
  return std::make_unique<CpuExecutable>(exec_.graph());
}

IPUML_INLINE std::string CpuBackend::name() const { return "cpu"; }

IPUML_INLINE std::vector<backend::DeviceInfo> CpuBackend::devices() const {
  backend::DeviceInfo d;
  d.name = "cpu";
  d.compute_units = static_cast<int>(std::thread::hardware_concurrency());
  d.description = "host CPU, " + std::to_string(d.compute_units) + " threads";
  return {d};
}

IPUML_INLINE bool CpuBackend::supports(ir::OpKind kind) const { return cpu::supports(kind); }

IPUML_INLINE std::unique_ptr<backend::Executable> CpuBackend::compile(
    const ir::Graph& g, const backend::ProgramOptions&,
    const backend::CompileOptions& options) const {
  for (auto& [k, v] : options)
    fail("cpu backend: unknown compile option '", k, "' (the cpu backend takes none)");
  return std::make_unique<CpuExecutable>(g);
}

IPUML_INLINE std::optional<DeviceType> CpuBackend::eager_device_type() const { return kCPU; }

IPUML_INLINE void CpuBackend::run_eager(Device, ir::OpKind kind, const ir::Attrs& attrs,
                                        const std::vector<Tensor>& inputs,
                                        std::vector<Tensor>& outputs) const {
  std::vector<cpu::ConstBuffer> in;
  for (auto& t : inputs) in.push_back({t.raw_data(), {t.shape(), t.dtype()}});
  std::vector<cpu::MutableBuffer> out;
  for (auto& t : outputs) out.push_back({t.raw_data(), {t.shape(), t.dtype()}});
  cpu::run_kernel(kind, attrs, in, out);
}

}  // namespace ipuml::cpu
