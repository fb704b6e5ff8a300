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
  // Every default below is the ipu2 (GC200 in an IPU-M2000) value; docs/targets.md gives the
  // source of each, or says that it is assumed.
  double flops_per_cycle_fp32 = 31.92;
  double flops_per_cycle_fp16 = 127.7;
  double vector_flops_per_cycle_fp32 = 2;  // one 64-bit vector issue per cycle per tile
  double vector_flops_per_cycle_fp16 = 4;
  double load_store_bytes_per_cycle = 24;  // two 64-bit loads and a 64-bit store (ld2xst64pace)
  double exchange_bytes_per_cycle = 4;     // per tile, inside one IPU (8 TB/s all-to-all)
  int64_t sync_cycles = 150;               // IPU-internal barrier (assumed)
  // A barrier across the IPUs of one machine (and with the host): the internal barrier plus a
  // Sync-Link round trip over the machine's hops; the collective model adds hops for larger groups.
  int64_t global_sync_cycles = 230;
  double sync_seconds_per_hop = 15e-9;  // Sync-Link latency per hop, one way
  // The host link, one direction: an IPU-M2000's one 100 GbE RoCE link to its host server,
  // shared by the machine's IPUs (a PCIe card's slot on Mk1).
  double host_bytes_per_second = 12.5e9;
  int64_t ipus_per_host_link = 4;
  // One host sync, as Graphcore's gc-hostsynclatencytest measures it: what each step's stream
  // copy waits before it moves data.
  double host_sync_seconds = 0.363e-6;
  double streaming_bytes_per_second = 16e9;  // streaming memory (off-chip DRAM) per IPU
  int64_t vertex_overhead_cycles = 185;
  // The IPU system: IPU-Links inside a machine and between the machines of a POD, GW-Links
  // between PODs (docs/targets.md, "Collectives").
  double ipu_link_bytes_per_second = 16e9;  // one IPU-Link, one direction (128 Gbit/s)
  double ipu_link_efficiency = 0.85;        // payload share of a link's raw rate
  int64_t ipu_links_per_pair = 4;           // between the two IPUs of a pair (a ladder rung)
  int64_t ipu_links_between_pairs = 2;      // each way along the ladder, in and across machines
  int64_t ipus_per_machine = 4;             // IPU-M2000 / Bow-2000
  int64_t ipus_per_pod = 64;                // IPU-Link domain (IPU-POD64); GW-Links beyond
  double gw_link_bytes_per_second = 25e9;   // per machine, one direction (2 x 100 Gbit/s)
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
// Sync-Link hops of a barrier across `ipus` IPUs (poplibs' IPU model: one within a pair of
// IPUs plus one per two pairs), and the cycles of its round trip at sync_seconds_per_hop.
int64_t sync_hops(int64_t ipus);
double sync_hop_cycles(const Target& t, int64_t ipus);
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
