// Bodies of the Cerebras target presets, overrides and conversions (compiled once in
// src/lib/cerebras_target.cpp).
#pragma once

#include <iomanip>
#include <sstream>

#include <ipuml/backends/cerebras/target.hpp>
#include <ipuml/backends/emu/target_fields.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::cerebras {

namespace tdetail {

using Field = emu::fields::Field<Target>;

inline const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      emu::fields::name_field<Target>(),
      IPUML_TARGET_FIELD_INT(Target, fabric_columns),
      IPUML_TARGET_FIELD_INT(Target, fabric_rows),
      IPUML_TARGET_FIELD_INT(Target, pe_block),
      IPUML_TARGET_FIELD_INT(Target, bytes_per_pe),
      IPUML_TARGET_FIELD_DBL(Target, clock_hz),
      IPUML_TARGET_FIELD_DBL(Target, flops_per_cycle_fp16),
      IPUML_TARGET_FIELD_DBL(Target, flops_per_cycle_fp32),
      IPUML_TARGET_FIELD_DBL(Target, vector_ops_per_cycle_fp16),
      IPUML_TARGET_FIELD_DBL(Target, vector_ops_per_cycle_fp32),
      IPUML_TARGET_FIELD_DBL(Target, sram_read_bytes_per_cycle),
      IPUML_TARGET_FIELD_DBL(Target, sram_write_bytes_per_cycle),
      IPUML_TARGET_FIELD_DBL(Target, link_bytes_per_cycle),
      IPUML_TARGET_FIELD_DBL(Target, hop_cycles),
      IPUML_TARGET_FIELD_DBL(Target, ramp_cycles),
      IPUML_TARGET_FIELD_INT(Target, kernel_launch_cycles),
      IPUML_TARGET_FIELD_DBL(Target, io_bytes_per_second),
      IPUML_TARGET_FIELD_DBL(Target, memoryx_bytes_per_second),
      IPUML_TARGET_FIELD_DBL(Target, swarmx_level_seconds),
      IPUML_TARGET_FIELD_INT(Target, max_systems),
      IPUML_TARGET_FIELD_INT(Target, code_bytes_matrix),
      IPUML_TARGET_FIELD_INT(Target, code_bytes_vector),
      IPUML_TARGET_FIELD_INT(Target, stack_bytes_per_pe),
      IPUML_TARGET_FIELD_INT(Target, alignment_bytes),
  };
  return f;
}

}  // namespace tdetail

IPUML_INLINE std::vector<std::string> target_preset_names() { return {"wse2", "wse1", "tiny"}; }

IPUML_INLINE std::vector<std::string> target_field_names() {
  return emu::fields::names(tdetail::fields());
}

IPUML_INLINE Target target_preset(const std::string& name) {
  Target t;  // the WSE-2's numbers
  if (name == "wse2") {
    return t;
  } else if (name == "wse1") {
    // The CS-1: the same PE (48 KB, a 4-wide fp16 SIMD) on a 16 nm wafer of 400,000 PEs, of
    // which a stencil code used a 600 x 595 rectangle; 12 x 100 GbE. No clock is published: the
    // WSE-2's is kept (assumed).
    t.name = "wse1";
    t.fabric_columns = 600;
    t.fabric_rows = 595;
    return t;
  } else if (name == "tiny") {
    // A test wafer of 16 x 16 PEs in blocks of 4 x 4: 16 planning units of 768 KiB.
    t.name = "tiny";
    t.fabric_columns = 16;
    t.fabric_rows = 16;
    t.pe_block = 4;
    return t;
  }
  std::string names;
  for (auto& n : target_preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("unknown Cerebras target '", name, "'; expected one of: ", names);
}

IPUML_INLINE void apply_override(Target& t, const std::string& assignment) {
  emu::fields::apply_override(t, assignment, tdetail::fields(),
                              [](const Target& x) { validate(x); });
}

IPUML_INLINE void validate(const Target& t) {
  auto pos = [&](const char* n, double v, double lo, double hi) {
    emu::fields::check_range(t.name, n, v, lo, hi, false);
  };
  auto nonneg = [&](const char* n, double v, double hi) {
    emu::fields::check_range(t.name, n, v, 1e-12, hi, true);
  };
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  IPUML_CHECK(emu::fields::valid_name(t.name),
              "target: name must be 1 to 64 letters, digits or '_', '-', '.', got '",
              emu::fields::printable(t.name), "'");
  pos("fabric_columns", d(t.fabric_columns), 1, 1 << 16);
  pos("fabric_rows", d(t.fabric_rows), 1, 1 << 16);
  pos("pe_block", d(t.pe_block), 1, 1024);
  IPUML_CHECK(t.pe_block <= t.fabric_columns && t.pe_block <= t.fabric_rows, "target ", t.name,
              ": pe_block (", t.pe_block, ") must fit the fabric (", t.fabric_columns, " x ",
              t.fabric_rows, " PEs)");
  IPUML_CHECK(t.blocks() <= (int64_t{1} << 18), "target ", t.name, ": ", t.blocks(),
              " planning blocks of ", t.pe_block, " x ", t.pe_block,
              " PEs are too many for the planner (at most 262144); raise pe_block");
  pos("bytes_per_pe", d(t.bytes_per_pe), 64, 1LL << 30);
  IPUML_CHECK(t.bytes_per_pe * t.pes_per_block() <= (int64_t{1} << 40), "target ", t.name,
              ": a block of ", t.pes_per_block(), " PEs x ", t.bytes_per_pe,
              " B is more than 1 TiB");
  pos("clock_hz", t.clock_hz, 1e3, 1e12);
  pos("flops_per_cycle_fp16", t.flops_per_cycle_fp16, 1e-3, 1e6);
  pos("flops_per_cycle_fp32", t.flops_per_cycle_fp32, 1e-3, 1e6);
  pos("vector_ops_per_cycle_fp16", t.vector_ops_per_cycle_fp16, 1e-3, 1e6);
  pos("vector_ops_per_cycle_fp32", t.vector_ops_per_cycle_fp32, 1e-3, 1e6);
  pos("sram_read_bytes_per_cycle", t.sram_read_bytes_per_cycle, 1e-3, 1e6);
  pos("sram_write_bytes_per_cycle", t.sram_write_bytes_per_cycle, 1e-3, 1e6);
  pos("link_bytes_per_cycle", t.link_bytes_per_cycle, 1e-3, 1e6);
  nonneg("hop_cycles", t.hop_cycles, 1e6);
  nonneg("ramp_cycles", t.ramp_cycles, 1e6);
  nonneg("kernel_launch_cycles", d(t.kernel_launch_cycles), 1e9);
  pos("io_bytes_per_second", t.io_bytes_per_second, 1, 1e15);
  pos("memoryx_bytes_per_second", t.memoryx_bytes_per_second, 1, 1e16);
  nonneg("swarmx_level_seconds", t.swarmx_level_seconds, 1);
  pos("max_systems", d(t.max_systems), 1, 1 << 20);
  nonneg("code_bytes_matrix", d(t.code_bytes_matrix), 1LL << 30);
  nonneg("code_bytes_vector", d(t.code_bytes_vector), 1LL << 30);
  nonneg("stack_bytes_per_pe", d(t.stack_bytes_per_pe), 1LL << 30);
  pos("alignment_bytes", d(t.alignment_bytes), 1, 1 << 20);
}

IPUML_INLINE std::string to_string(const Target& t) {
  std::ostringstream os;
  os << t.name << ": " << t.fabric_columns << " x " << t.fabric_rows << " PEs x "
     << t.bytes_per_pe / 1024 << " KiB (" << std::fixed << std::setprecision(1)
     << t.wafer_bytes() / 1e9 << " GB on the wafer), " << std::defaultfloat << std::setprecision(4)
     << t.clock_hz / 1e9 << " GHz, planned in " << t.pe_block << " x " << t.pe_block
     << " PE blocks";
  return os.str();
}

IPUML_INLINE std::string to_json(const Target& t) {
  return emu::fields::to_json(t, tdetail::fields());
}

IPUML_INLINE Target target_from_json(const std::string& text) {
  return emu::fields::from_json(text, Target{},
                                [](Target& t, const std::string& a) { apply_override(t, a); });
}

}  // namespace ipuml::cerebras
