// The IPU emulator behind the backend interface: turns PopTorch-style options (target preset,
// field overrides, replicas, memory proportion, cache, report directory) into a compiled
// ipu::Executable, and checks the emulated system has the IPUs the options ask for.
#pragma once

#include <sstream>

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/ipu/eager.hpp>
#include <ipuml/backends/ipu/ipu.hpp>

namespace ipuml::ipu {

// An IPU-M2000 / Bow-2000 box holds 4 IPUs; that is the emulated system unless num_ipus is set.
inline constexpr int64_t kDefaultSystemIpus = 4;

class IpuBackendExecutable : public backend::Executable {
 public:
  // The executable writes its own reports (ExecOptions::report_dir, program_name).
  IpuBackendExecutable(std::unique_ptr<ipu::Executable> exe, bool pipelined)
      : exe_(std::move(exe)), pipelined_(pipelined) {}
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::vector<Tensor>& states,
                          uint64_t step) override {
    return exe_->run(inputs, states, step);
  }
  std::vector<std::vector<Tensor>> run_many(const std::vector<backend::RunItem>& items) override {
    return exe_->run_many(items, pipelined_);
  }
  std::string report_json() const override { return exe_->profile_json(); }
  void print_summary(std::ostream& os, double samples_per_step) const override {
    exe_->print_profile_summary(os, samples_per_step);
  }
  std::optional<double> simulated_seconds() const override {
    return exe_->last_run_cycles().simulated_seconds;
  }
  std::optional<double> simulated_seconds_for(int64_t micro_batches) const override {
    return exe_->cycles_for(micro_batches, pipelined_) / exe_->target().clock_hz;
  }
  bool pipelined() const { return pipelined_; }
  std::unique_ptr<backend::Executable> replica() const override {
    return std::make_unique<IpuBackendExecutable>(exe_->replica(), pipelined_);
  }
  void set_host_threads(int threads) override { exe_->set_host_threads(threads); }
  double allreduce_seconds(size_t bytes, int64_t replicas) const override {
    const Target& t = exe_->target();
    return allreduce_cycles(t, static_cast<double>(bytes), replicas) / t.clock_hz;
  }
  void share_memory_image(backend::Executable& update, const std::vector<bool>& shared,
                          bool allow_out_of_memory) override {
    auto* u = dynamic_cast<IpuBackendExecutable*>(&update);
    IPUML_CHECK(u != nullptr, "ipu backend: the weight update was compiled by another backend");
    Plan image;
    image.target = exe_->target();
    image.memory = combine_memory(exe_->plan(), u->ipu().graph(), u->ipu().plan(), shared);
    exe_->set_memory_report(image.memory);
    if (!exe_->report_directory().empty()) exe_->write_profile(exe_->report_directory());
    if (image.memory.out_of_memory && !allow_out_of_memory) fail(out_of_memory_message(image));
  }
  ipu::Executable& ipu() { return *exe_; }
  const ipu::Executable& ipu() const { return *exe_; }

 private:
  std::unique_ptr<ipu::Executable> exe_;
  bool pipelined_ = false;
};

class IpuBackend : public backend::Backend {
 public:
  std::string name() const override { return "ipu"; }
  std::vector<backend::DeviceInfo> devices() const override {
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
  bool supports(ir::OpKind) const override { return true; }

  // Eager: each op on Device(kIPU, i) runs as a cached single-op program (backends/ipu/eager.hpp).
  std::optional<DeviceType> eager_device_type() const override { return kIPU; }
  void run_eager(Device device, ir::OpKind kind, const ir::Attrs& attrs,
                 const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) const override {
    run_eager_op(device, kind, attrs, inputs, outputs);
  }

  std::unique_ptr<backend::Executable> compile(
      const ir::Graph& graph, const backend::CompileOptions& options) const override {
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
    const int64_t replicas = parse_int(take("replicas", "1"), "replicas");
    const int64_t per_replica = parse_int(take("ipus_per_replica", "1"), "ipus_per_replica");
    IPUML_CHECK(
        replicas * per_replica <= system_ipus, "ipu backend: replicationFactor(", replicas, ") x ",
        per_replica, " IPU(s) per replica needs ", replicas * per_replica,
        " IPUs, but the emulated system has ", system_ipus, system_set ? "" : " (an IPU-M2000 box)",
        "; raise it with Options.setTargetOption(\"num_ipus\", \"", replicas * per_replica, "\")");
    t.num_ipus = per_replica;

    CompileOptions co;
    co.available_memory_proportion =
        parse_double(take("available_memory_proportion", "0.6"), "available_memory_proportion");
    std::stringstream per_ipu(take("available_memory_proportion_per_ipu", ""));
    for (std::string item; std::getline(per_ipu, item, ',');)
      co.available_memory_proportion_per_ipu.push_back(
          parse_double(item, "available_memory_proportion_per_ipu"));
    co.partials_type = dtype_from_name(take("partials_type", "float32"));
    co.stochastic_rounding = take("stochastic_rounding", "0") == "1";
    co.rounding_seed =
        static_cast<uint64_t>(parse_int(take("rounding_seed", "0"), "rounding_seed"));
    co.allow_out_of_memory = take("allow_out_of_memory", "0") == "1";
    co.check_exchange = take("check_exchange", "0") == "1";
    co.replication_factor = replicas;
    co.cache_dir = take("cache_dir", "");
    co.progress = take("progress", "1") == "1";
    co.report_dir = take("report_dir", "");
    co.program_name = take("program_name", "program");
    // Pipelined: the stages of a model-parallel program overlap (backends/ipu/schedule.hpp);
    // sharded, its IPUs run one after another.
    const bool pipelined = take("pipelined", "0") == "1" && per_replica > 1;
    for (const char* k : {"training", "gradient_accumulation", "device_iterations"}) take(k, "");
    for (auto& [k, v] : o) fail("ipu backend: unknown compile option '", k, "'");
    return std::make_unique<IpuBackendExecutable>(ipu::compile(graph, t, co), pipelined);
  }

 private:
  static int64_t parse_int(const std::string& s, const char* what) {
    try {
      size_t pos = 0;
      const int64_t v = std::stoll(s, &pos);
      if (pos == s.size()) return v;
    } catch (const std::exception&) {
    }
    fail("ipu backend: option ", what, " must be an integer, got '", s, "'");
  }
  static double parse_double(const std::string& s, const char* what) {
    try {
      size_t pos = 0;
      const double v = std::stod(s, &pos);
      if (pos == s.size()) return v;
    } catch (const std::exception&) {
    }
    fail("ipu backend: option ", what, " must be a number, got '", s, "'");
  }
};

IPUML_REGISTER_BACKEND(IpuBackend);

}  // namespace ipuml::ipu
