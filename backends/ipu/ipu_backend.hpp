// The IPU emulator behind the backend interface: turns the program options and its own (target
// preset, field overrides, memory proportion) into a compiled ipu::Executable, checks the
// emulated system has the IPUs the options ask for, and profiles runs (backend::Profiling).
#pragma once

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/emu/backend_executable.hpp>
#include <ipuml/backends/ipu/eager.hpp>
#include <ipuml/backends/ipu/ipu.hpp>

namespace ipuml::ipu {

// An IPU-M2000 / Bow-2000 box holds 4 IPUs; that is the emulated system unless num_ipus is set.
inline constexpr int64_t kDefaultSystemIpus = 4;

// The emulator core's program behind the backend interface, as the IPU backend returns it.
using IpuBackendExecutable = emu::BackendExecutable;

class IpuBackend : public backend::Backend {
 public:
  std::string name() const override;
  std::vector<backend::DeviceInfo> devices() const override;
  bool supports(ir::OpKind) const override { return true; }

  // Eager: each op on Device(kIPU, i) runs as a cached single-op program (backends/ipu/eager.hpp).
  std::optional<DeviceType> eager_device_type() const override { return kIPU; }
  void run_eager(Device device, ir::OpKind kind, const ir::Attrs& attrs,
                 const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) const override;

  // The program options every backend gets, and the IPU's own: "target" (a preset, default
  // ipu2), "target_overrides" ("field=value;..."), "available_memory_proportion" (global) and
  // "available_memory_proportion_per_ipu" ("p0,p1,...", 0 where the global value applies),
  // "check_exchange" ("1": run with the exchange checked).
  using backend::Backend::compile;
  std::unique_ptr<backend::Executable> compile(
      const ir::Graph& graph, const backend::ProgramOptions& program,
      const backend::CompileOptions& options) const override;

 private:
  static bool parse_flag(const std::string& s, const char* what);
  static double parse_double(const std::string& s, const char* what);
};

IPUML_REGISTER_BACKEND(IpuBackend);

}  // namespace ipuml::ipu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/ipu/ipu_backend_impl.hpp>
#endif
