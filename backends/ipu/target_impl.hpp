// Bodies of the target presets, overrides and conversions (compiled once in
// src/lib/ipu_target.cpp).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <sstream>

#include <ipuml/backends/emu/target_fields.hpp>
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::ipu {

namespace tdetail {

// One table drives overrides, JSON and the field list, so a new field cannot be half-wired.
using Field = emu::fields::Field<Target>;

inline const std::vector<Field>& fields() {
  static const std::vector<Field> f = [] {
    std::vector<Field> v;
#define IPUML_TF_INT(n) v.push_back(IPUML_TARGET_FIELD_INT(Target, n));
#define IPUML_TF_DBL(n) v.push_back(IPUML_TARGET_FIELD_DBL(Target, n));
    v.push_back(emu::fields::name_field<Target>());
    IPUML_TF_INT(num_ipus)
    IPUML_TF_INT(tiles_per_ipu)
    IPUML_TF_INT(bytes_per_tile)
    IPUML_TF_INT(worker_contexts)
    IPUML_TF_DBL(clock_hz)
    IPUML_TF_DBL(flops_per_cycle_fp32)
    IPUML_TF_DBL(flops_per_cycle_fp16)
    IPUML_TF_DBL(vector_flops_per_cycle_fp32)
    IPUML_TF_DBL(vector_flops_per_cycle_fp16)
    IPUML_TF_DBL(load_store_bytes_per_cycle)
    IPUML_TF_DBL(exchange_bytes_per_cycle)
    IPUML_TF_INT(sync_cycles)
    IPUML_TF_INT(global_sync_cycles)
    IPUML_TF_DBL(sync_seconds_per_hop)
    IPUML_TF_DBL(host_bytes_per_second)
    IPUML_TF_INT(ipus_per_host_link)
    IPUML_TF_DBL(host_sync_seconds)
    IPUML_TF_DBL(streaming_bytes_per_second)
    IPUML_TF_INT(vertex_overhead_cycles)
    IPUML_TF_DBL(ipu_link_bytes_per_second)
    IPUML_TF_DBL(ipu_link_efficiency)
    IPUML_TF_INT(ipu_links_per_pair)
    IPUML_TF_INT(ipu_links_between_pairs)
    IPUML_TF_INT(ipus_per_machine)
    IPUML_TF_INT(ipus_per_pod)
    IPUML_TF_DBL(gw_link_bytes_per_second)
    IPUML_TF_INT(codelet_bytes_matrix)
    IPUML_TF_INT(codelet_bytes_vector)
    IPUML_TF_INT(vertex_state_bytes_per_field)
    IPUML_TF_INT(exchange_code_bytes_per_transfer)
    IPUML_TF_INT(stack_bytes_per_tile)
    IPUML_TF_INT(alignment_bytes)
#undef IPUML_TF_INT
#undef IPUML_TF_DBL
    return v;
  }();
  return f;
}

}  // namespace tdetail

IPUML_INLINE std::vector<std::string> target_field_names() {
  return emu::fields::names(tdetail::fields());
}

IPUML_INLINE std::vector<std::string> target_preset_names() {
  return {"ipu1", "ipu2", "bow", "tiny"};
}

IPUML_INLINE int64_t sync_hops(int64_t ipus) { return 1 + std::max<int64_t>(ipus, 1) / 4; }

IPUML_INLINE double sync_hop_cycles(const Target& t, int64_t ipus) {
  return std::ceil(2.0 * static_cast<double>(sync_hops(ipus)) * t.sync_seconds_per_hop *
                   t.clock_hz);
}

IPUML_INLINE Target target_preset(const std::string& name) {
  Target t;
  // Per-tile matrix throughput is derived from the published per-IPU peaks, never tuned.
  auto derive = [](Target& x, double peak_fp32, double peak_fp16) {
    const double per_cycle = static_cast<double>(x.tiles_per_ipu) * x.clock_hz;
    x.flops_per_cycle_fp32 = peak_fp32 / per_cycle;
    x.flops_per_cycle_fp16 = peak_fp16 / per_cycle;
  };
  // A barrier across one machine's IPUs: the internal barrier plus the Sync-Link round trip.
  auto machine_sync = [](Target& x) {
    x.global_sync_cycles =
        x.sync_cycles + static_cast<int64_t>(sync_hop_cycles(x, x.ipus_per_machine));
  };
  if (name == "ipu2") {
    t.name = "ipu2";
    t.tiles_per_ipu = 1472;
    t.bytes_per_tile = 638976;
    t.clock_hz = 1.33e9;
    derive(t, 62.5e12, 250e12);
  } else if (name == "bow") {
    t.name = "bow";
    t.tiles_per_ipu = 1472;
    t.bytes_per_tile = 638976;
    t.clock_hz = 1.33e9;
    derive(t, 62.5e12, 250e12);  // same tile as GC200, only the clock is higher
    t.clock_hz = 1.85e9;
  } else if (name == "ipu1") {
    // Mk1 GC2 on a C2 card (2 IPUs per card, cards joined in a ladder by IPU-Links).
    t.name = "ipu1";
    t.tiles_per_ipu = 1216;
    t.bytes_per_tile = 262144;
    t.clock_hz = 1.6e9;
    derive(t, 31.1e12, 124.5e12);        // GC2 published peaks
    t.ipu_link_bytes_per_second = 32e9;  // 64 GB/s per link counting both directions
    t.ipu_links_per_pair = 2;
    t.ipus_per_machine = 2;
    t.ipus_per_pod = 16;
    t.host_bytes_per_second = 32e9;  // the C2 card's PCIe Gen4 x16 slot, for its 2 IPUs
    t.ipus_per_host_link = 2;
    t.gw_link_bytes_per_second = 32e9;  // no GW-Links on Mk1: beyond 16 IPUs, the host's PCIe
  } else if (name == "tiny") {
    t.name = "tiny";
    t.tiles_per_ipu = 4;
    t.bytes_per_tile = 65536;
    t.clock_hz = 1.33e9;
    t.flops_per_cycle_fp32 = 62.5e12 / (1472 * 1.33e9);
    t.flops_per_cycle_fp16 = 250e12 / (1472 * 1.33e9);
    t.stack_bytes_per_tile = 1024;  // a test target: small stacks leave its 64 KiB to tensors
  } else {
    std::string names;
    for (auto& n : target_preset_names()) names += (names.empty() ? "" : ", ") + n;
    fail("unknown IPU target '", name, "'; expected one of: ", names);
  }
  machine_sync(t);
  return t;
}

IPUML_INLINE void apply_override(Target& t, const std::string& assignment) {
  emu::fields::apply_override(t, assignment, tdetail::fields(),
                              [](const Target& x) { validate(x); });
}

IPUML_INLINE void validate(const Target& t) {
  // Each field within a range no real or plausible device leaves by orders of magnitude, so a
  // typo (clock_hz=1e-300) is an error, not an "inf us" report.
  auto in = [&](const char* n, double v, double lo, double hi, bool zero_ok) {
    emu::fields::check_range(t.name, n, v, lo, hi, zero_ok);
  };
  auto pos = [&](const char* n, double v, double lo, double hi) { in(n, v, lo, hi, false); };
  auto nonneg = [&](const char* n, double v, double hi) { in(n, v, 1, hi, true); };
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  IPUML_CHECK(emu::fields::valid_name(t.name),
              "target: name must be 1 to 64 letters, digits or "
              "'_', '-', '.', got '",
              emu::fields::printable(t.name), "'");
  pos("num_ipus", d(t.num_ipus), 1, 4096);
  pos("tiles_per_ipu", d(t.tiles_per_ipu), 1, 1 << 24);
  pos("bytes_per_tile", d(t.bytes_per_tile), 64, 1LL << 34);
  pos("worker_contexts", d(t.worker_contexts), 1, 1024);
  pos("clock_hz", t.clock_hz, 1e3, 1e12);
  pos("flops_per_cycle_fp32", t.flops_per_cycle_fp32, 1e-3, 1e6);
  pos("flops_per_cycle_fp16", t.flops_per_cycle_fp16, 1e-3, 1e6);
  pos("vector_flops_per_cycle_fp32", t.vector_flops_per_cycle_fp32, 1e-3, 1e6);
  pos("vector_flops_per_cycle_fp16", t.vector_flops_per_cycle_fp16, 1e-3, 1e6);
  pos("load_store_bytes_per_cycle", t.load_store_bytes_per_cycle, 1e-3, 1e6);
  pos("exchange_bytes_per_cycle", t.exchange_bytes_per_cycle, 1e-3, 1e6);
  nonneg("sync_cycles", d(t.sync_cycles), 1e9);
  nonneg("global_sync_cycles", d(t.global_sync_cycles), 1e9);
  in("sync_seconds_per_hop", t.sync_seconds_per_hop, 1e-12, 1, true);
  pos("host_bytes_per_second", t.host_bytes_per_second, 1, 1e15);
  pos("ipus_per_host_link", d(t.ipus_per_host_link), 1, 4096);
  in("host_sync_seconds", t.host_sync_seconds, 1e-12, 1, true);
  pos("streaming_bytes_per_second", t.streaming_bytes_per_second, 1, 1e15);
  nonneg("vertex_overhead_cycles", d(t.vertex_overhead_cycles), 1e9);
  pos("ipu_link_bytes_per_second", t.ipu_link_bytes_per_second, 1, 1e15);
  pos("ipu_link_efficiency", t.ipu_link_efficiency, 1e-3, 1);
  pos("ipu_links_per_pair", d(t.ipu_links_per_pair), 1, 1024);
  pos("ipu_links_between_pairs", d(t.ipu_links_between_pairs), 1, 1024);
  pos("ipus_per_machine", d(t.ipus_per_machine), 1, 4096);
  pos("ipus_per_pod", d(t.ipus_per_pod), 1, 1 << 20);
  pos("gw_link_bytes_per_second", t.gw_link_bytes_per_second, 1, 1e15);
  nonneg("codelet_bytes_matrix", d(t.codelet_bytes_matrix), 1LL << 30);
  nonneg("codelet_bytes_vector", d(t.codelet_bytes_vector), 1LL << 30);
  nonneg("vertex_state_bytes_per_field", d(t.vertex_state_bytes_per_field), 1LL << 20);
  nonneg("exchange_code_bytes_per_transfer", d(t.exchange_code_bytes_per_transfer), 1LL << 20);
  nonneg("stack_bytes_per_tile", d(t.stack_bytes_per_tile), 1LL << 30);
  pos("alignment_bytes", d(t.alignment_bytes), 1, 1 << 20);
}

IPUML_INLINE std::string to_string(const Target& t) {
  std::ostringstream os;
  os << std::setprecision(1);
  os << t.name << ": " << t.num_ipus << " IPU" << (t.num_ipus == 1 ? "" : "s") << " x "
     << t.tiles_per_ipu << " tiles x " << t.bytes_per_tile << " B (" << std::fixed
     << t.ipu_bytes() / (1024.0 * 1024.0) << " MB per IPU), " << t.worker_contexts << " workers, "
     << std::defaultfloat << std::setprecision(4) << t.clock_hz / 1e9 << " GHz";
  return os.str();
}

IPUML_INLINE std::string to_json(const Target& t) {
  return emu::fields::to_json(t, tdetail::fields());
}

IPUML_INLINE Target target_from_json(const std::string& text) {
  return emu::fields::from_json(text, Target{},
                                [](Target& t, const std::string& a) { apply_override(t, a); });
}

}  // namespace ipuml::ipu
