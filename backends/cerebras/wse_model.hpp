// The Cerebras wafer-scale engine as a target model of the emulator core: a 2-D mesh of PE
// blocks (the planner's units), every cost from per-PE rates and the fabric's links and hops, and
// in weight streaming the weights coming from MemoryX for every layer that reads them.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include <ipuml/backends/cerebras/target.hpp>
#include <ipuml/backends/emu/target_model.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::cerebras {

// The CS-2's two ways of running a model (docs/targets-cerebras.md): every layer resident on a
// region of its own, or one layer at a time on the whole wafer with the weights streamed in.
enum class ExecutionMode { Pipelined, WeightStreaming };

inline const char* mode_name(ExecutionMode m) {
  return m == ExecutionMode::Pipelined ? "pipeline" : "weight_streaming";
}

class WseModel final : public emu::TargetModel {
 public:
  WseModel(Target t, ExecutionMode mode) : t_(std::move(t)), mode_(mode) {
    validate(t_);
    m_.name = t_.name;
    m_.devices = 1;
    m_.units_per_device = t_.blocks();
    m_.mesh_columns = t_.block_columns();
    m_.bytes_per_unit = t_.bytes_per_pe * t_.pes_per_block();
    m_.clock_hz = t_.clock_hz;
    m_.alignment_bytes = t_.alignment_bytes;
    m_.device_noun = "CS-2";
    m_.unit_noun = "PE block";
  }
  const Target& target() const { return t_; }
  ExecutionMode mode() const { return mode_; }

  const emu::Machine& machine() const override { return m_; }
  std::string describe() const override {
    return to_string(t_) + ", " +
           (mode_ == ExecutionMode::Pipelined ? "pipelined execution" : "weight streaming");
  }
  std::string to_json() const override {
    auto j = nlohmann::json::parse(cerebras::to_json(t_));
    j["execution_mode"] = mode_name(mode_);
    return j.dump();
  }
  // The PEs of a block share the work; an elementwise op keeps one PE a value busy.
  double compute_cycles(double flops, double bytes, DType dtype, bool matrix,
                        int64_t parallel_items) const override {
    const double pes = std::clamp<double>(static_cast<double>(parallel_items), 1.0, block_pes());
    const bool half = is_half(dtype);
    const double rate = matrix
                            ? (half ? t_.flops_per_cycle_fp16 : t_.flops_per_cycle_fp32)
                            : (half ? t_.vector_ops_per_cycle_fp16 : t_.vector_ops_per_cycle_fp32);
    const double sram = t_.sram_read_bytes_per_cycle + t_.sram_write_bytes_per_cycle;
    const double busy = std::max(flops / (rate * pes), bytes / (sram * pes));
    return static_cast<double>(t_.kernel_launch_cycles) + std::ceil(busy);
  }
  double peak_flops_per_cycle(DType dtype) const override {
    return block_pes() * (is_half(dtype) ? t_.flops_per_cycle_fp16 : t_.flops_per_cycle_fp32);
  }
  double exchange_cycles(double bytes_into_unit) const override {
    return region_exchange_cycles(bytes_into_unit, m_.mesh_columns,
                                  m_.units_per_device / m_.mesh_columns);
  }
  // A block receives over the links of two of its sides (a row and a column flow, as a matrix
  // op's operands arrive) and the data crosses the region's width and height in hops, with a
  // ramp off and on at the ends.
  double region_exchange_cycles(double bytes, int64_t width, int64_t height) const override {
    if (bytes <= 0) return 0;
    const double links = 2.0 * static_cast<double>(t_.pe_block) * t_.link_bytes_per_cycle;
    const double hops = static_cast<double>((width + height) * t_.pe_block - 2);
    return std::ceil(bytes / links) + hops * t_.hop_cycles + 2.0 * t_.ramp_cycles;
  }
  // A dataflow machine has no barrier: a step's crossing of its region is in its exchange
  // (region_exchange_cycles' hops); what remains is the hand-off between a PE and its router
  // at the step's start and end.
  double sync_cycles() const override { return 2.0 * t_.ramp_cycles; }
  double repeat_cycles() const override { return static_cast<double>(t_.kernel_launch_cycles); }
  double device_sync_cycles() const override {
    return std::ceil(t_.swarmx_level_seconds * t_.clock_hz);
  }
  double inter_device_cycles(double bytes) const override { return io_cycles(bytes); }
  // Every CS-2 has its own I/O to the worker nodes.
  double host_cycles(double bytes, int64_t replicas) const override {
    (void)replicas;
    return io_cycles(bytes);
  }
  // The worker nodes stream samples ahead of the wafer (no handshake per step: assumed).
  double host_sync_cycles() const override { return 0; }
  // MemoryX to the wafer through SwarmX, at the CS-2's I/O rate, which MemoryX matches or
  // exceeds.
  double streaming_cycles(double bytes) const override { return io_cycles(bytes); }
  Streaming streaming() const override {
    const bool ws = mode_ == ExecutionMode::WeightStreaming;
    return {ws, ws};
  }
  // In weight streaming MemoryX updates the weights it keeps (and sums the gradients of a
  // micro-batch into its accumulators): the optimizer's ops leave the wafer, the gradients
  // stream out to them, and MemoryX's memory bounds their time.
  bool computes_offchip() const override { return mode_ == ExecutionMode::WeightStreaming; }
  double offchip_op_cycles(double bytes) const override {
    return bytes <= 0 ? 0.0 : std::ceil(bytes / t_.memoryx_bytes_per_second * t_.clock_hz);
  }
  emu::MemoryTerms memory_terms() const override {
    const int64_t p = t_.pes_per_block();
    emu::MemoryTerms m;
    m.code_bytes_matrix = t_.code_bytes_matrix * p;
    m.code_bytes_vector = t_.code_bytes_vector * p;
    m.state_bytes_per_field = 0;  // a task's operands are its routes and addresses in its code
    m.receive_code_bytes_per_transfer = 0;  // routes live in the routers, not in SRAM
    m.stack_bytes_per_unit = t_.stack_bytes_per_pe * p;
    return m;
  }
  std::string memory_category_name(int c) const override {
    if (c == emu::kKernelState) return "task_state";
    if (c == emu::kReceiveCode) return "routes";
    return emu::mem_category_name(c);
  }
  std::string more_devices_hint() const override {
    return "weight streaming (execution_strategy weight_streaming)";
  }
  std::string offchip_state_hint() const override {
    return "weight streaming (weights and optimizer state in MemoryX)";
  }
  std::string device_count_hint() const override { return "set --num_csx"; }
  // SwarmX sums the gradients on their way to MemoryX, as they stream out of each CS-2 (that
  // traffic is the step's): what it adds is the latency of its tree.
  double allreduce_cycles(double bytes, int64_t replicas, int64_t) const override {
    if (replicas <= 1 || bytes <= 0) return 0;
    const double levels = std::ceil(std::log2(static_cast<double>(replicas)));
    return levels * std::ceil(t_.swarmx_level_seconds * t_.clock_hz);
  }

 private:
  double block_pes() const { return static_cast<double>(t_.pes_per_block()); }
  double io_cycles(double bytes) const {
    return bytes <= 0 ? 0.0 : std::ceil(bytes / t_.io_bytes_per_second * t_.clock_hz);
  }

  Target t_;
  ExecutionMode mode_;
  emu::Machine m_;
};

// The Cerebras parameters of a model; throws ipuml::Error when the model is another target's.
inline const WseModel& wse_model_of(const emu::TargetModel& m) {
  const auto* w = dynamic_cast<const WseModel*>(&m);
  IPUML_CHECK(w != nullptr, "cerebras: the program was compiled for target '", m.machine().name,
              "', which is not a Cerebras wafer; this needs wse2, wse1 or tiny");
  return *w;
}

}  // namespace ipuml::cerebras
