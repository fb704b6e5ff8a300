// Bodies of the IPU backend and its executable (compiled once in src/lib/ipu_backend.cpp).
#pragma once

#include <algorithm>
#include <sstream>

#include <ipuml/backends/ipu/ipu_backend.hpp>

namespace ipuml::ipu {

IPUML_INLINE IpuBackendExecutable::IpuBackendExecutable(std::unique_ptr<ipu::Executable> exe,
                                                        bool pipelined)
    : exe_(std::move(exe)), pipelined_(pipelined) {}

IPUML_INLINE std::vector<Tensor> IpuBackendExecutable::run(const std::vector<Tensor>& inputs,
                                                           const std::vector<Tensor>& states,
                                                           uint64_t step) {
  return exe_->run(inputs, states, step);
}

IPUML_INLINE std::vector<std::vector<Tensor>> IpuBackendExecutable::run_many(
    const std::vector<backend::RunItem>& items) {
  return exe_->run_many(items, pipelined_);
}

IPUML_INLINE std::string IpuBackendExecutable::report_json() const { return exe_->profile_json(); }

IPUML_INLINE void IpuBackendExecutable::print_summary(std::ostream& os,
                                                      double samples_per_step) const {
  exe_->print_profile_summary(os, samples_per_step);
}

IPUML_INLINE double IpuBackendExecutable::simulated_seconds() const {
  return exe_->last_run_cycles().simulated_seconds;
}

IPUML_INLINE double IpuBackendExecutable::simulated_seconds_for(int64_t micro_batches) const {
  return exe_->cycles_for(micro_batches, pipelined_) / exe_->machine().clock_hz;
}

IPUML_INLINE double IpuBackendExecutable::allreduce_seconds(size_t bytes, int64_t replicas) const {
  // The program spans one replica's IPUs: each of them reduces its own share, side by side.
  const emu::Machine& mc = exe_->machine();
  return exe_->model().allreduce_cycles(static_cast<double>(bytes), replicas, mc.devices) /
         mc.clock_hz;
}

IPUML_INLINE backend::MemoryFit IpuBackendExecutable::memory_fit() const {
  const Plan& p = exe_->plan();
  const MemoryReport& m = p.memory;
  const int64_t T = p.machine.units_per_device;
  backend::MemoryFit f;
  f.device = p.machine.device_noun;
  f.unit = p.machine.unit_noun;
  f.unit_bytes = p.machine.bytes_per_unit;
  for (int64_t i = 0; i < p.machine.devices; ++i) {
    int64_t fullest = 0, all = 0;
    for (int64_t k = 0; k < T; ++k) {
      const int64_t b = m.tiles[static_cast<size_t>(i * T + k)].total();
      fullest = std::max(fullest, b);
      all += b;
    }
    f.fullest_unit.push_back(fullest);
    f.device_bytes.push_back(all);
  }
  for (int c = 0; c < kNumCategories; ++c) {
    int64_t s = 0;
    for (auto& t : m.tiles) s += t.bytes[c];
    f.categories.emplace_back(mem_category_name(c), s);
  }
  f.fits = !m.out_of_memory;
  if (!f.fits) f.message = out_of_memory_message(p);
  return f;
}

IPUML_INLINE double IpuBackendExecutable::clock_hz() const { return exe_->machine().clock_hz; }

IPUML_INLINE std::string IpuBackendExecutable::target_description() const {
  return exe_->model().describe();
}

IPUML_INLINE std::unique_ptr<backend::Executable> IpuBackendExecutable::replica() const {
  return std::make_unique<IpuBackendExecutable>(exe_->replica(), pipelined_);
}

IPUML_INLINE void IpuBackendExecutable::set_host_threads(int threads) {
  exe_->set_host_threads(threads);
}

IPUML_INLINE void IpuBackendExecutable::share_memory_image(backend::Executable& update,
                                                           const std::vector<bool>& shared,
                                                           bool allow_out_of_memory) {
  auto* u = dynamic_cast<IpuBackendExecutable*>(&update);
  IPUML_CHECK(u != nullptr, "ipu backend: the weight update was compiled by another backend");
  Plan image;
  image.model = exe_->plan().model;
  image.machine = exe_->plan().machine;
  image.target_json = exe_->plan().target_json;
  image.memory = combine_memory(exe_->plan(), u->ipu().graph(), u->ipu().plan(), shared);
  exe_->set_memory_report(image.memory);
  if (!exe_->report_directory().empty()) exe_->write_profile(exe_->report_directory());
  if (image.memory.out_of_memory && !allow_out_of_memory) fail(out_of_memory_message(image));
}

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
  backend::CompileOptions o = options;
  auto take = [&](const char* key, const std::string& def) {
    auto it = o.find(key);
    if (it == o.end()) return def;
    std::string v = it->second;
    o.erase(it);
    return v;
  };
  Target t = target_preset(take("target", "ipu2"));
  bool system_set = false;
  std::stringstream overrides(take("target_overrides", ""));
  for (std::string item; std::getline(overrides, item, ';');) {
    if (item.empty()) continue;
    apply_override(t, item);
    system_set |= item.rfind("num_ipus=", 0) == 0;
  }
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

  CompileOptions co;
  co.available_memory_proportion =
      parse_double(take("available_memory_proportion", "0.6"), "available_memory_proportion");
  IPUML_CHECK(co.available_memory_proportion > 0 && co.available_memory_proportion <= 1,
              "ipu backend: available_memory_proportion must be in (0, 1], got ",
              co.available_memory_proportion);
  std::stringstream per_ipu(take("available_memory_proportion_per_ipu", ""));
  for (std::string item; std::getline(per_ipu, item, ',');) {
    const double p = parse_double(item, "available_memory_proportion_per_ipu");
    IPUML_CHECK(p >= 0 && p <= 1,
                "ipu backend: available_memory_proportion_per_ipu entries must be in [0, 1] "
                "(0: the global value), got ",
                p);
    co.available_memory_proportion_per_ipu.push_back(p);
  }
  co.check_exchange = parse_flag(take("check_exchange", "0"), "check_exchange");
  for (auto& [k, v] : o)
    fail("ipu backend: unknown compile option '", k,
         "' (expected target, target_overrides, available_memory_proportion, "
         "available_memory_proportion_per_ipu or check_exchange)");
  co.partials_type = program.partials_type;
  co.stochastic_rounding = program.stochastic_rounding;
  co.rounding_seed = program.seed;
  co.allow_out_of_memory = program.allow_out_of_memory;
  co.replication_factor = replicas;
  co.cache_dir = program.cache_dir;
  co.progress = program.progress;
  co.report_dir = program.report_dir;
  co.program_name = program.name;
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
