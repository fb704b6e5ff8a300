// The emulated Cerebras system: every hardware number of a wafer-scale engine (WSE) and of the
// cluster around it (MemoryX, SwarmX) as a field of cerebras::Target, the presets and overrides.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/core/config.hpp>

namespace ipuml::cerebras {

// Every default is the WSE-2 of a CS-2; docs/targets-cerebras.md gives the source of each number
// or says that it is assumed.
struct Target {
  std::string name = "wse2";
  // The rectangle of processing elements (PEs) a program may use: the SDK's 750 x 994 user
  // region of the 757 x 996 fabric.
  int64_t fabric_columns = 750;
  int64_t fabric_rows = 994;
  // The planner places work on squares of pe_block x pe_block PEs (its unit): a planning grain,
  // not hardware. Every rate below is per PE and scales with the square.
  int64_t pe_block = 8;
  int64_t bytes_per_pe = 49152;  // 48 KB of SRAM each
  double clock_hz = 1.1e9;
  // One PE's FMAC datapath: four 16-bit FMACs (8 FLOPs) or one 32-bit FMAC (2) a cycle; an
  // elementwise op takes one lane a value.
  double flops_per_cycle_fp16 = 8;
  double flops_per_cycle_fp32 = 2;
  double vector_ops_per_cycle_fp16 = 4;
  double vector_ops_per_cycle_fp32 = 1;
  double sram_read_bytes_per_cycle = 16;  // per PE
  double sram_write_bytes_per_cycle = 8;
  // The fabric: each PE's router has a link to each of its four neighbours moving 32 bits each
  // way a cycle, one cycle a hop, and a ramp between the PE and its router.
  double link_bytes_per_cycle = 4;
  double hop_cycles = 1;
  double ramp_cycles = 2;
  int64_t kernel_launch_cycles = 20;  // assumed: a task's start on a PE
  // A CS-2's I/O (12 x 100 GbE): input samples from the worker nodes, and in weight streaming the
  // weights from MemoryX and the gradients back.
  double io_bytes_per_second = 150e9;
  // MemoryX runs the optimizer on the weights it keeps (weight streaming): the bytes a second
  // its servers read and write doing so (assumed: capacity is published, bandwidth is not).
  double memoryx_bytes_per_second = 1e12;
  // SwarmX: one level of its broadcast/reduce tree between the CS-2s and MemoryX (assumed).
  double swarmx_level_seconds = 2e-6;
  int64_t max_systems = 192;  // CS-2s one cluster joins
  // Memory besides tensors on every PE (assumed): a kernel's code, and its task stack.
  int64_t code_bytes_matrix = 2048;
  int64_t code_bytes_vector = 512;
  int64_t stack_bytes_per_pe = 256;
  int64_t alignment_bytes = 4;

  int64_t pes() const { return fabric_columns * fabric_rows; }
  // The planner's grid of PE blocks (whole blocks only).
  int64_t block_columns() const { return fabric_columns / pe_block; }
  int64_t block_rows() const { return fabric_rows / pe_block; }
  int64_t blocks() const { return block_columns() * block_rows(); }
  int64_t pes_per_block() const { return pe_block * pe_block; }
  double wafer_bytes() const {
    return static_cast<double>(pes()) * static_cast<double>(bytes_per_pe);
  }
};

// "wse2" (the CS-2), "wse1" (the CS-1), "tiny" (a 16 x 16 PE fabric for tests).
Target target_preset(const std::string& name);
std::vector<std::string> target_preset_names();
std::vector<std::string> target_field_names();
// Applies "field=value" (e.g. "clock_hz=0.85e9"); throws ipuml::Error naming the valid fields for
// an unknown field, or the expected form for a bad value.
void apply_override(Target& t, const std::string& assignment);
// Throws ipuml::Error unless every number is in range.
void validate(const Target& t);
std::string to_string(const Target& t);  // one line: name, PEs, memory, clock
std::string to_json(const Target& t);
Target target_from_json(const std::string& json);

}  // namespace ipuml::cerebras

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cerebras/target_impl.hpp>
#endif
