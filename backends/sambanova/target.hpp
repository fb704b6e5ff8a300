// The emulated SambaNova system: every hardware number of a Reconfigurable Dataflow Unit (RDU)
// and of the node around it as a field of sambanova::Target, the presets and overrides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/core/config.hpp>

namespace ipuml::sambanova {

// Every default is an SN30 RDU's; docs/targets-sambanova.md gives the source of each number or
// says that it is assumed or derived.
struct Target {
  std::string name = "sn30";
  // An RDU's tiles, and each tile's Pattern Compute Units (PCUs) and Pattern Memory Units (PMUs).
  int64_t tiles_per_rdu = 8;
  int64_t pcus_per_tile = 160;
  int64_t pmus_per_tile = 160;
  int64_t pmu_bytes = 500000;  // one PMU's scratchpad: the on-chip SRAM over the PMUs
  // No clock is published: assumed. Every per-cycle rate below is a published per-second figure
  // over this clock, so the times in seconds do not depend on it.
  double clock_hz = 1.25e9;
  // One PCU: its share of the RDU's peak matrix rate; elementwise ops take its SIMD lanes.
  double flops_per_cycle_bf16 = 430;      // 688 TFLOP/s / 1280 PCUs / 1.25 GHz
  double flops_per_cycle_fp32 = 107.5;    // assumed a quarter of bf16's
  double vector_ops_per_cycle_bf16 = 32;  // assumed lanes
  double vector_ops_per_cycle_fp32 = 16;
  double pmu_bytes_per_cycle = 187;  // 150 TB/s over 640 PMUs (SN10) at the clock
  // Off chip, per RDU: DDR capacity and bandwidth, the host's PCIe links, and the links over
  // which data-parallel instances on different RDUs reduce their gradients (--reduce-on-rdu).
  double ddr_bytes = 1e12;
  double ddr_bytes_per_second = 256e9;
  // The share of the DDR's peak that streaming sustains (assumed: DDR4 systems reach 70-85 % of
  // theirs in STREAM-like copies).
  double ddr_efficiency = 0.8;
  double host_bytes_per_second = 128e9;
  double rdu_link_bytes_per_second = 32e9;  // assumed: one PCIe Gen4 x16's worth
  // Loading a section's configuration (program and arguments) onto its tiles: assumed.
  double section_switch_seconds = 20e-6;
  // A section's batch flows through its pipeline in at least this many pieces (assumed): its
  // fill and drain are the stages' times over the pieces.
  int64_t pipeline_chunks = 16;
  int64_t max_rdus = 64;  // the ALCF system: 8 nodes of 8 RDUs
  int64_t alignment_bytes = 64;

  int64_t pcus_per_rdu() const { return tiles_per_rdu * pcus_per_tile; }
  int64_t pmus_per_rdu() const { return tiles_per_rdu * pmus_per_tile; }
  double sram_bytes_per_rdu() const {
    return static_cast<double>(pmus_per_rdu()) * static_cast<double>(pmu_bytes);
  }
};

// "sn30" (the SN30's RDU, 8 tiles), "sn10" (the SN10's, 4 tiles), "tiny" (2 tiles of 4 PCUs and
// 4 PMUs of 64 KiB, for tests).
Target target_preset(const std::string& name);
std::vector<std::string> target_preset_names();
std::vector<std::string> target_field_names();
// Applies "field=value" (e.g. "clock_hz=1e9"); throws ipuml::Error naming the valid fields for
// an unknown field, or the expected form for a bad value.
void apply_override(Target& t, const std::string& assignment);
// Throws ipuml::Error unless every number is in range.
void validate(const Target& t);
std::string to_string(const Target& t);  // one line: name, tiles, units, memory, clock
std::string to_json(const Target& t);
Target target_from_json(const std::string& json);

}  // namespace ipuml::sambanova

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/sambanova/target_impl.hpp>
#endif
