// Bodies of the SambaNova target presets, overrides and conversions (compiled once in
// src/lib/sambanova_target.cpp).
#pragma once

#include <iomanip>
#include <sstream>

#include <ipuml/backends/emu/target_fields.hpp>
#include <ipuml/backends/sambanova/target.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::sambanova {

namespace tdetail {

using Field = emu::fields::Field<Target>;

inline const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      emu::fields::name_field<Target>(),
      IPUML_TARGET_FIELD_INT(Target, tiles_per_rdu),
      IPUML_TARGET_FIELD_INT(Target, pcus_per_tile),
      IPUML_TARGET_FIELD_INT(Target, pmus_per_tile),
      IPUML_TARGET_FIELD_INT(Target, pmu_bytes),
      IPUML_TARGET_FIELD_DBL(Target, clock_hz),
      IPUML_TARGET_FIELD_DBL(Target, flops_per_cycle_bf16),
      IPUML_TARGET_FIELD_DBL(Target, flops_per_cycle_fp32),
      IPUML_TARGET_FIELD_DBL(Target, vector_ops_per_cycle_bf16),
      IPUML_TARGET_FIELD_DBL(Target, vector_ops_per_cycle_fp32),
      IPUML_TARGET_FIELD_DBL(Target, pmu_bytes_per_cycle),
      IPUML_TARGET_FIELD_DBL(Target, ddr_bytes),
      IPUML_TARGET_FIELD_DBL(Target, ddr_bytes_per_second),
      IPUML_TARGET_FIELD_DBL(Target, ddr_efficiency),
      IPUML_TARGET_FIELD_DBL(Target, host_bytes_per_second),
      IPUML_TARGET_FIELD_DBL(Target, rdu_link_bytes_per_second),
      IPUML_TARGET_FIELD_DBL(Target, section_switch_seconds),
      IPUML_TARGET_FIELD_INT(Target, pipeline_chunks),
      IPUML_TARGET_FIELD_INT(Target, max_rdus),
      IPUML_TARGET_FIELD_INT(Target, alignment_bytes),
  };
  return f;
}

}  // namespace tdetail

IPUML_INLINE std::vector<std::string> target_preset_names() { return {"sn30", "sn10", "tiny"}; }

IPUML_INLINE std::vector<std::string> target_field_names() {
  return emu::fields::names(tdetail::fields());
}

IPUML_INLINE Target target_preset(const std::string& name) {
  Target t;  // the SN30's numbers
  if (name == "sn30") {
    return t;
  } else if (name == "sn10") {
    // 4 tiles of 160 PCUs and 160 PMUs; 320 MB on chip; > 320 TFLOP/s bf16; six DDR4-2667
    // channels (128 GB/s) with 384 GB as ALCF deployed it; 4 x PCIe Gen4 x16.
    t.name = "sn10";
    t.tiles_per_rdu = 4;
    t.flops_per_cycle_bf16 = 400;  // 320 TFLOP/s / 640 PCUs / 1.25 GHz
    t.flops_per_cycle_fp32 = 100;
    t.ddr_bytes = 384e9;
    t.ddr_bytes_per_second = 128e9;
    return t;
  } else if (name == "tiny") {
    // A test RDU: 2 tiles of 4 PCUs and 4 PMUs of 64 KiB, slow DDR, so that small graphs
    // exercise sections, tiling and DDR-bound steps.
    t.name = "tiny";
    t.tiles_per_rdu = 2;
    t.pcus_per_tile = 4;
    t.pmus_per_tile = 4;
    t.pmu_bytes = 65536;
    t.ddr_bytes = 1e9;
    t.ddr_bytes_per_second = 1e9;
    t.pipeline_chunks = 4;
    return t;
  }
  std::string names;
  for (auto& n : target_preset_names()) names += (names.empty() ? "" : ", ") + n;
  fail("unknown SambaNova target '", emu::fields::printable(name), "'; expected one of: ", names);
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
  pos("tiles_per_rdu", d(t.tiles_per_rdu), 1, 64);
  pos("pcus_per_tile", d(t.pcus_per_tile), 1, 1 << 16);
  pos("pmus_per_tile", d(t.pmus_per_tile), 1, 1 << 16);
  pos("pmu_bytes", d(t.pmu_bytes), 1024, 1LL << 32);
  pos("clock_hz", t.clock_hz, 1e3, 1e12);
  pos("flops_per_cycle_bf16", t.flops_per_cycle_bf16, 1e-3, 1e6);
  pos("flops_per_cycle_fp32", t.flops_per_cycle_fp32, 1e-3, 1e6);
  pos("vector_ops_per_cycle_bf16", t.vector_ops_per_cycle_bf16, 1e-3, 1e6);
  pos("vector_ops_per_cycle_fp32", t.vector_ops_per_cycle_fp32, 1e-3, 1e6);
  pos("pmu_bytes_per_cycle", t.pmu_bytes_per_cycle, 1e-3, 1e6);
  pos("ddr_bytes", t.ddr_bytes, 1e6, 1e15);
  pos("ddr_bytes_per_second", t.ddr_bytes_per_second, 1e6, 1e15);
  pos("ddr_efficiency", t.ddr_efficiency, 0.01, 1);
  pos("host_bytes_per_second", t.host_bytes_per_second, 1e6, 1e15);
  pos("rdu_link_bytes_per_second", t.rdu_link_bytes_per_second, 1e6, 1e15);
  nonneg("section_switch_seconds", t.section_switch_seconds, 10);
  pos("pipeline_chunks", d(t.pipeline_chunks), 1, 1 << 20);
  pos("max_rdus", d(t.max_rdus), 1, 1 << 20);
  pos("alignment_bytes", d(t.alignment_bytes), 1, 1 << 20);
}

IPUML_INLINE std::string to_string(const Target& t) {
  std::ostringstream os;
  os << t.name << ": RDU of " << t.tiles_per_rdu << " tiles x (" << t.pcus_per_tile << " PCUs, "
     << t.pmus_per_tile << " PMUs x " << t.pmu_bytes / 1000 << " kB), " << std::fixed
     << std::setprecision(0) << t.ddr_bytes / 1e9 << " GB DDR at " << t.ddr_bytes_per_second / 1e9
     << " GB/s, " << std::defaultfloat << std::setprecision(4) << t.clock_hz / 1e9 << " GHz";
  return os.str();
}

IPUML_INLINE std::string to_json(const Target& t) {
  return emu::fields::to_json(t, tdetail::fields());
}

IPUML_INLINE Target target_from_json(const std::string& text) {
  return emu::fields::from_json(text, Target{},
                                [](Target& t, const std::string& a) { apply_override(t, a); });
}

}  // namespace ipuml::sambanova
