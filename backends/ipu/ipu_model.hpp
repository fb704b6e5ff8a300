// The IPU as a target model of the emulator core: the machine's shape from ipu::Target, every
// cost from the cycle model (BSP: a step is exchange, sync, compute; a sharded program's IPUs
// run one after another), Poplar's memory terms, collectives over IPU-Links and GW-Links.
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include <ipuml/backends/emu/target_model.hpp>
#include <ipuml/backends/ipu/cycle_model.hpp>
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::ipu {

// The core's memory categories in Poplar's words (the names PopVision's memory report uses).
inline constexpr emu::MemCategory kVertexState = emu::kKernelState;
inline constexpr emu::MemCategory kExchangeCode = emu::kReceiveCode;
inline const char* mem_category_name(int c) {
  if (c == kVertexState) return "vertex_state";
  if (c == kExchangeCode) return "exchange_code";
  return emu::mem_category_name(c);
}

class IpuModel final : public emu::TargetModel {
 public:
  // Throws ipuml::Error naming the field when a number of `t` is out of range.
  explicit IpuModel(Target t) : t_(std::move(t)) {
    validate(t_);
    m_.name = t_.name;
    m_.devices = t_.num_ipus;
    m_.units_per_device = t_.tiles_per_ipu;
    m_.bytes_per_unit = t_.bytes_per_tile;
    m_.clock_hz = t_.clock_hz;
    m_.alignment_bytes = t_.alignment_bytes;
    m_.device_noun = "IPU";
    m_.unit_noun = "tile";
  }
  const Target& target() const { return t_; }

  const emu::Machine& machine() const override { return m_; }
  std::string describe() const override { return to_string(t_); }
  std::string to_json() const override { return ipu::to_json(t_); }
  double compute_cycles(double flops, double bytes, DType dtype, bool matrix,
                        int64_t parallel_items) const override {
    return vertex_cycles(t_, flops, bytes, dtype, matrix, parallel_items);
  }
  // The AMP's rate per tile: 4x the fp32 one for half (GC200's 250 TFLOP/s fp16).
  double peak_flops_per_cycle(DType dtype) const override {
    return dtype == DType::Float16 ? t_.flops_per_cycle_fp16 : t_.flops_per_cycle_fp32;
  }
  double exchange_cycles(double bytes_into_unit) const override {
    return ipu::exchange_cycles(t_, bytes_into_unit);
  }
  double sync_cycles() const override { return static_cast<double>(t_.sync_cycles); }
  double repeat_cycles() const override { return static_cast<double>(t_.vertex_overhead_cycles); }
  double device_sync_cycles() const override { return static_cast<double>(t_.global_sync_cycles); }
  double inter_device_cycles(double bytes) const override { return inter_ipu_cycles(t_, bytes); }
  double host_cycles(double bytes, int64_t replicas) const override {
    return ipu::host_cycles(t_, bytes, replicas);
  }
  double host_sync_cycles() const override { return ipu::host_sync_cycles(t_); }
  double streaming_cycles(double bytes) const override {
    return std::ceil(bytes / t_.streaming_bytes_per_second * t_.clock_hz);
  }
  emu::MemoryTerms memory_terms() const override {
    emu::MemoryTerms m;
    m.code_bytes_matrix = t_.codelet_bytes_matrix;
    m.code_bytes_vector = t_.codelet_bytes_vector;
    m.state_bytes_per_field = t_.vertex_state_bytes_per_field;
    m.receive_code_bytes_per_transfer = t_.exchange_code_bytes_per_transfer;
    m.stack_bytes_per_unit = t_.stack_bytes_per_tile;
    return m;
  }
  // Poplar's words: a vertex's fields, the exchange's receive code.
  std::string memory_category_name(int c) const override { return ipu::mem_category_name(c); }
  std::string more_devices_hint() const override { return "more IPUs (BeginBlock)"; }
  std::string device_count_hint() const override { return "set num_ipus"; }
  std::string offchip_state_hint() const override {
    return "optimizer state in streaming memory "
           "(TensorLocations.setOptimizerLocation(TensorLocationSettings().useOnChipStorage(false))"
           ")";
  }
  double allreduce_cycles(double bytes, int64_t replicas,
                          int64_t devices_per_replica) const override {
    return ipu::allreduce_cycles(t_, bytes, replicas, devices_per_replica);
  }

 private:
  Target t_;
  emu::Machine m_;
};

inline std::shared_ptr<const emu::TargetModel> ipu_model(const Target& t) {
  return std::make_shared<const IpuModel>(t);
}

// The IPU parameters of a model; throws ipuml::Error when the model is another target's.
inline const Target& ipu_target_of(const emu::TargetModel& m) {
  const auto* ipu = dynamic_cast<const IpuModel*>(&m);
  IPUML_CHECK(ipu != nullptr, "ipu: the program was compiled for target '", m.machine().name,
              "', which is not an IPU; this needs an IPU target (ipu1, ipu2, bow, tiny)");
  return ipu->target();
}

}  // namespace ipuml::ipu
