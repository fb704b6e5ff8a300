// The SambaNova RDU as a target model of the emulator core: the tiles a program may use as
// units of one PCU and one PMU each, every rate from the target's per-unit figures. The core
// computes a program's values on it; the section plan (sections.hpp) decides whether the program
// fits and how long its step takes, as SambaFlow's sections do.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include <ipuml/backends/emu/target_model.hpp>
#include <ipuml/backends/sambanova/target.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::sambanova {

// How SambaFlow cuts a graph into sections: o0 one operator each, o1 operators fused.
enum class Optimization { O0, O1 };

inline const char* optimization_name(Optimization o) { return o == Optimization::O0 ? "o0" : "o1"; }

class RduModel final : public emu::TargetModel {
 public:
  // `num_tiles`: the tiles one instance of the program holds (SambaFlow's --num-tiles).
  RduModel(Target t, int64_t num_tiles, Optimization opt)
      : t_(std::move(t)), tiles_(num_tiles), opt_(opt) {
    validate(t_);
    IPUML_CHECK(tiles_ >= 1 && tiles_ <= t_.tiles_per_rdu, "sambanova: num_tiles must be in [1, ",
                t_.tiles_per_rdu, "] (the tiles of one ", t_.name, " RDU), got ", tiles_);
    m_.name = t_.name;
    m_.devices = 1;
    m_.units_per_device = tiles_ * t_.pcus_per_tile;
    m_.bytes_per_unit = std::max<int64_t>(
        1, t_.pmu_bytes * t_.pmus_per_tile / std::max<int64_t>(1, t_.pcus_per_tile));
    m_.clock_hz = t_.clock_hz;
    m_.alignment_bytes = t_.alignment_bytes;
    m_.device_noun = "RDU";
    m_.unit_noun = "PCU";
  }
  const Target& target() const { return t_; }
  int64_t num_tiles() const { return tiles_; }
  Optimization optimization() const { return opt_; }
  // This instance's share of its RDU's DDR and host links (tiles over the RDU's tiles). DDR
  // moves its bytes at the sustained share of its peak.
  double share() const {
    return static_cast<double>(tiles_) / static_cast<double>(t_.tiles_per_rdu);
  }
  double ddr_cycles(double bytes) const {
    return bytes <= 0 ? 0.0
                      : cycles_of(bytes / (t_.ddr_bytes_per_second * t_.ddr_efficiency * share()));
  }
  // Whole cycles for `seconds`: rounded up, except for the last bits of a product such as
  // 20e-6 s x 1.25e9 Hz (25000.000000000004) that no hardware number is meant to carry.
  double cycles_of(double seconds) const {
    const double c = seconds * t_.clock_hz;
    return std::ceil(c * (1.0 - 1e-12));
  }

  const emu::Machine& machine() const override { return m_; }
  std::string describe() const override {
    return to_string(t_) + ", " + std::to_string(tiles_) + " tile" + (tiles_ == 1 ? "" : "s") +
           ", " + optimization_name(opt_);
  }
  std::string to_json() const override {
    auto j = nlohmann::json::parse(sambanova::to_json(t_));
    j["num_tiles"] = tiles_;
    j["optimization"] = optimization_name(opt_);
    return j.dump();
  }
  double compute_cycles(double flops, double bytes, DType dtype, bool matrix,
                        int64_t parallel_items) const override {
    (void)parallel_items;
    const double busy = std::max(flops / rate(dtype, matrix), bytes / t_.pmu_bytes_per_cycle);
    return std::ceil(busy);
  }
  double peak_flops_per_cycle(DType dtype) const override { return rate(dtype, true); }
  // Operands move over the switch mesh at a vector (the PCU's lanes) a cycle a link (assumed).
  double exchange_cycles(double bytes_into_unit) const override {
    return bytes_into_unit <= 0 ? 0.0 : std::ceil(bytes_into_unit / mesh_bytes_per_cycle());
  }
  // Dataflow: no barrier; units hand data on as it is made.
  double sync_cycles() const override { return 0; }
  double repeat_cycles() const override { return 0; }
  double device_sync_cycles() const override { return section_switch_cycles(); }
  double inter_device_cycles(double bytes) const override { return link_cycles(bytes); }
  // The host's PCIe links, shared by the instances on one RDU.
  double host_cycles(double bytes, int64_t replicas) const override {
    (void)replicas;
    return bytes <= 0 ? 0.0 : cycles_of(bytes / (t_.host_bytes_per_second * share()));
  }
  double host_sync_cycles() const override { return 0; }
  double streaming_cycles(double bytes) const override { return ddr_cycles(bytes); }
  emu::MemoryTerms memory_terms() const override { return {}; }
  std::string memory_category_name(int c) const override {
    if (c == emu::kKernelState) return "section_config";
    return emu::mem_category_name(c);
  }
  std::string more_devices_hint() const override { return "more tiles (--num-tiles)"; }
  std::string offchip_state_hint() const override { return "optimizer state in DDR"; }
  std::string device_count_hint() const override {
    return "compile with --data-parallel -ws N and run N instances";
  }
  // A ring all-reduce over the instances' RDU links (--reduce-on-rdu): each sends and receives
  // 2 (n - 1) / n of the gradients.
  double allreduce_cycles(double bytes, int64_t replicas, int64_t) const override {
    if (replicas <= 1 || bytes <= 0) return 0;
    const double n = static_cast<double>(replicas);
    return link_cycles(2.0 * (n - 1.0) / n * bytes) + (n - 1.0) * 2.0 * section_switch_cycles();
  }
  double section_switch_cycles() const { return cycles_of(t_.section_switch_seconds); }
  double rate(DType dtype, bool matrix) const {
    const bool half = is_half(dtype);
    return matrix ? (half ? t_.flops_per_cycle_bf16 : t_.flops_per_cycle_fp32)
                  : (half ? t_.vector_ops_per_cycle_bf16 : t_.vector_ops_per_cycle_fp32);
  }

 private:
  double mesh_bytes_per_cycle() const { return 2.0 * t_.vector_ops_per_cycle_bf16; }
  double link_cycles(double bytes) const {
    return bytes <= 0 ? 0.0 : cycles_of(bytes / t_.rdu_link_bytes_per_second);
  }

  Target t_;
  int64_t tiles_;
  Optimization opt_;
  emu::Machine m_;
};

// The SambaNova parameters of a model; throws ipuml::Error when the model is another target's.
inline const RduModel& rdu_model_of(const emu::TargetModel& m) {
  const auto* r = dynamic_cast<const RduModel*>(&m);
  IPUML_CHECK(r != nullptr, "sambanova: the program was compiled for target '", m.machine().name,
              "', which is not a SambaNova RDU; this needs sn30, sn10 or tiny");
  return *r;
}

}  // namespace ipuml::sambanova
