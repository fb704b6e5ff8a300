// The emulated machine: every hardware number of an IPU system as a field of ipu::Target, the
// presets (ipu1, ipu2, bow, tiny) and text overrides such as "tiles_per_ipu=16".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/core/config.hpp>

namespace ipuml::ipu {

struct Target {
  std::string name = "ipu2";
  int64_t num_ipus = 1;
  int64_t tiles_per_ipu = 1472;
  int64_t bytes_per_tile = 638976;
  int64_t worker_contexts = 6;
  double clock_hz = 1.33e9;
  // Matrix-unit (AMP) throughput per tile; elementwise work goes through the vector units.
  double flops_per_cycle_fp32 = 31.92;
  double flops_per_cycle_fp16 = 127.7;
  double vector_flops_per_cycle_fp32 = 2;  // one 64-bit vector issue per cycle per tile
  double vector_flops_per_cycle_fp16 = 4;
  double load_store_bytes_per_cycle = 16;  // tile memory bandwidth seen by the workers
  double exchange_bytes_per_cycle = 8;     // per tile, inside one IPU
  double inter_ipu_bytes_per_cycle = 240;  // per IPU over the IPU-Links
  int64_t sync_cycles = 150;               // IPU-internal barrier
  int64_t global_sync_cycles = 1000;       // barrier across IPUs (and with the host)
  double host_bytes_per_second = 64e9;
  double streaming_bytes_per_second = 20e9;  // streaming memory (off-chip DRAM) per IPU
  int64_t vertex_overhead_cycles = 40;
  // Memory that is not tensor data (docs/memory-model.md gives the reason for each term):
  int64_t codelet_bytes_matrix = 3072;       // a matmul/conv vertex type's code, once per tile
  int64_t codelet_bytes_vector = 640;        // any other vertex type's code, once per tile
  int64_t vertex_state_bytes_per_field = 8;  // per vertex: a header plus (pointer, size) per field
  int64_t exchange_code_bytes_per_transfer = 32;  // per tile, per operand received in a step
  int64_t stack_bytes_per_tile = 7168;            // 6 worker stacks and the supervisor's
  int64_t alignment_bytes = 8;                    // each tensor piece on a tile starts aligned

  int64_t total_tiles() const { return num_ipus * tiles_per_ipu; }
  double ipu_bytes() const {
    return static_cast<double>(tiles_per_ipu) * static_cast<double>(bytes_per_tile);
  }
};

// "ipu1" (Mk1 GC2), "ipu2" (Mk2 GC200), "bow" (Bow IPU), "tiny" (4 tiles, small memory, tests).
Target target_preset(const std::string& name);
std::vector<std::string> target_preset_names();
// Names of the fields apply_override accepts, in declaration order.
std::vector<std::string> target_field_names();

// Applies "field=value" (e.g. "num_ipus=4", "clock_hz=1.85e9"). Throws ipuml::Error naming the
// valid fields for an unknown field, or the expected form for a bad value.
void apply_override(Target& t, const std::string& assignment);
// Throws ipuml::Error unless every number is in range (positive counts, rates and sizes).
void validate(const Target& t);

std::string to_string(const Target& t);  // one line: name, IPUs, tiles, memory, clock
std::string to_json(const Target& t);    // an object with every field
Target target_from_json(const std::string& json);

}  // namespace ipuml::ipu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/ipu/target_impl.hpp>
#endif
