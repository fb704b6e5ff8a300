// Bodies of the SambaNova calibration microbenchmarks (compiled once in
// src/lib/sambanova_calibration.cpp).
#pragma once

#include <cstdio>
#include <string>

#include <ipuml/backends/sambanova/calibration.hpp>
#include <ipuml/backends/sambanova/sections.hpp>
#include <ipuml/core/device.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml::sambanova {

namespace caldetail {

// The one section of a single-op program on `tiles` tiles of `preset`, sized on the meta
// device (nothing is allocated).
template <class Build>
Section one_section(const std::string& preset, int64_t tiles, const Build& build) {
  DefaultDeviceGuard meta(kMeta);
  const ir::Graph g = build().graph;
  const SectionPlan p = plan_sections(g, RduModel(target_preset(preset), tiles, Optimization::O0));
  IPUML_CHECK(p.sections.size() == 1, "sambanova calibration: expected one section, got ",
              p.sections.size());
  return p.sections[0];
}

// A square bf16 GEMM with its weights resident, on a whole RDU: the share of its peak.
inline emu::CalibrationCase gemm(const std::string& preset, int64_t n) {
  const Target t = target_preset(preset);
  const Section s = one_section(preset, t.tiles_per_rdu, [&] {
    Tensor w = expand(zeros({1, 1}, kBFloat16), {n, n}).detach();  // a state: made before tracing
    ir::Tracer tr;
    Tensor x = tr.input(ir::TensorMeta{{n, n}, kBFloat16}, "x");
    tr.name_state(w, "w");
    return tr.finish({matmul(x, w)});
  });
  const double peak = static_cast<double>(t.pcus_per_rdu()) * t.flops_per_cycle_bf16 * t.clock_hz;
  const double achieved = s.flops / (s.cycles / t.clock_hz);
  char src[220];
  std::snprintf(src, sizeof src,
                "informational: %.0f%% of the %.0f TFLOP/s bf16 peak (%s-bound section, its "
                "loading included); no measured GEMM rate is published",
                100.0 * achieved / peak, peak / 1e12, s.bound.c_str());
  return {
      "gemm_bf16_" + std::to_string(n) + "_" + preset, preset, "TFLOP/s", achieved / 1e12, 0, src};
}

// z = x + y over `mib` MiB an operand in bf16 on `tiles` tiles: a DDR-bound section, its loading
// included; the DDR bytes it moves over its time.
inline emu::CalibrationCase ddr_stream(const std::string& preset, int64_t tiles, int64_t mib,
                                       double published, const std::string& source) {
  const int64_t n = mib * 1024 * 1024 / 2;
  const Section s = one_section(preset, tiles, [&] {
    ir::Tracer tr;
    Tensor x = tr.input(ir::TensorMeta{{n}, kBFloat16}, "x");
    Tensor y = tr.input(ir::TensorMeta{{n}, kBFloat16}, "y");
    return tr.finish({add(x, y)});
  });
  const Target t = target_preset(preset);
  const double gbs = (s.ddr_read_bytes + s.ddr_write_bytes) / (s.cycles / t.clock_hz) / 1e9;
  return {
      "ddr_add_bf16_" + std::to_string(mib) + "MiB_" + preset + "_" + std::to_string(tiles) + "t",
      preset,
      "GB/s",
      gbs,
      published,
      source};
}

// The cost of a section that does almost nothing: its loading.
inline emu::CalibrationCase section_switch(const std::string& preset) {
  const Section s = one_section(preset, 1, [&] {
    ir::Tracer tr;
    Tensor x = tr.input(ir::TensorMeta{{16}, kFloat32}, "x");
    return tr.finish({relu(x)});
  });
  const Target t = target_preset(preset);
  return {"empty_section_" + preset,
          preset,
          "us",
          s.cycles / t.clock_hz * 1e6,
          0,
          "informational: the assumed section loading (no load time is published)"};
}

}  // namespace caldetail

IPUML_INLINE std::vector<emu::CalibrationCase> run_calibration() {
  using namespace caldetail;
  std::vector<emu::CalibrationCase> v;
  v.push_back(ddr_stream("sn10", 4, 64, 95.41,
                         "[ST-PI] SambaTune's performance-insights example: a section's DDR "
                         "bandwidth of 95.41 GB/s (platform not named; illustrative)"));
  v.push_back(ddr_stream("sn10", 4, 64, 88.92,
                         "[ST-PI] the same report's other section: 88.92 GB/s (illustrative)"));
  for (int64_t n : {4096, 16384}) v.push_back(gemm("sn30", n));
  v.push_back(section_switch("sn30"));
  return v;
}

}  // namespace ipuml::sambanova
