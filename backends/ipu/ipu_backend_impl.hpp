// Bodies of the IPU backend and its executable (compiled once in src/lib/ipu_backend.cpp).
#pragma once

#include <algorithm>
#include <sstream>

#include <ipuml/backends/emu/backend_options.hpp>
#include <ipuml/backends/ipu/ipu_backend.hpp>

namespace ipuml::ipu {

IPUML_INLINE std::string IpuBackend::name() const { return "ipu"; }

IPUML_INLINE std::vector<backend::DeviceInfo> IpuBackend::devices() const {
  std::vector<backend::DeviceInfo> out;
  const Target t = target_preset("ipu2");
  for (int64_t i = 0; i < kDefaultSystemIpus; ++i) {
    backend::DeviceInfo d;
    d.id = static_cast<int>(i);
    d.name = t.name;
    d.memory_bytes = static_cast<size_t>(t.tiles_per_ipu * t.bytes_per_tile);
    d.compute_units = static_cast<int>(t.tiles_per_ipu);
    d.description = to_string(t);
    out.push_back(d);
  }
  return out;
}

IPUML_INLINE void IpuBackend::run_eager(Device device, ir::OpKind kind, const ir::Attrs& attrs,
                                        const std::vector<Tensor>& inputs,
                                        std::vector<Tensor>& outputs) const {
  run_eager_op(device, kind, attrs, inputs, outputs);
}

IPUML_INLINE std::unique_ptr<backend::Executable> IpuBackend::compile(
    const ir::Graph& graph, const backend::ProgramOptions& program,
    const backend::CompileOptions& options) const {
  emu::OptionTaker o(options);
  Target t = target_preset(o.take("target", "ipu2"));
  bool system_set = false;
  emu::for_each_override(o.take("target_overrides", ""), [&](const std::string& item) {
    apply_override(t, item);
    system_set |= item.rfind("num_ipus=", 0) == 0;
  });
  const int64_t system_ipus = system_set ? t.num_ipus : kDefaultSystemIpus;
  const int64_t replicas = program.replicas, per_replica = program.devices_per_replica;
  IPUML_CHECK(replicas >= 1 && per_replica >= 1, "ipu backend: replicas (", replicas,
              ") and IPUs per replica (", per_replica, ") must be >= 1");
  IPUML_CHECK(
      replicas * per_replica <= system_ipus, "ipu backend: replicationFactor(", replicas, ") x ",
      per_replica, " IPU(s) per replica needs ", replicas * per_replica,
      " IPUs, but the emulated system has ", system_ipus, system_set ? "" : " (an IPU-M2000 box)",
      "; raise it with Options.setTargetOption(\"num_ipus\", \"", replicas * per_replica, "\")");
  t.num_ipus = per_replica;

  CompileOptions co = emu::compile_options_for(program, replicas);
  co.available_memory_proportion =
      parse_double(o.take("available_memory_proportion", "0.6"), "available_memory_proportion");
  IPUML_CHECK(co.available_memory_proportion > 0 && co.available_memory_proportion <= 1,
              "ipu backend: available_memory_proportion must be in (0, 1], got ",
              co.available_memory_proportion);
  std::stringstream per_ipu(o.take("available_memory_proportion_per_ipu", ""));
  for (std::string item; std::getline(per_ipu, item, ',');) {
    const double p = parse_double(item, "available_memory_proportion_per_ipu");
    IPUML_CHECK(p >= 0 && p <= 1,
                "ipu backend: available_memory_proportion_per_ipu entries must be in [0, 1] "
                "(0: the global value), got ",
                p);
    co.available_memory_proportion_per_device.push_back(p);
  }
  co.check_exchange = parse_flag(o.take("check_exchange", "0"), "check_exchange");
  for (auto& [k, v] : o.rest())
    fail("ipu backend: unknown compile option '", k,
         "' (expected target, target_overrides, available_memory_proportion, "
         "available_memory_proportion_per_ipu or check_exchange)");
  // Pipelined: the stages of a model-parallel program overlap (backends/emu/schedule.hpp);
  // sharded, its IPUs run one after another.
  const bool pipelined = program.pipelined && per_replica > 1;
  return std::make_unique<IpuBackendExecutable>(ipu::compile(graph, t, co), pipelined);
}

IPUML_INLINE bool IpuBackend::parse_flag(const std::string& s, const char* what) {
  IPUML_CHECK(s == "0" || s == "1", "ipu backend: option ", what, " must be 0 or 1, got '", s, "'");
  return s == "1";
}

IPUML_INLINE double IpuBackend::parse_double(const std::string& s, const char* what) {
  try {
    size_t pos = 0;
    const double v = std::stod(s, &pos);
    if (pos == s.size()) return v;
  } catch (const std::exception&) {
  }
  fail("ipu backend: option ", what, " must be a number, got '", s, "'");
}

}  // namespace ipuml::ipu
