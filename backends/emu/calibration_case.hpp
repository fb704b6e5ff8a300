// One calibration case of an emulated target: a microbenchmark's modelled figure beside the
// published one (docs/targets.md, docs/targets-cerebras.md), the band every checked case holds.
#pragma once

#include <cstdio>
#include <string>

namespace ipuml::emu {

// Ratios of simulated to published figures the calibration holds every checked case to.
inline constexpr double kCalibrationLow = 0.75, kCalibrationHigh = 1.33;

struct CalibrationCase {
  std::string name;    // e.g. "mem_bw_add_fp32_ipu2"
  std::string target;  // the preset it runs on
  std::string unit;    // of simulated and published
  double simulated = 0;
  double published = 0;  // 0: no published figure to compare with (printed, not checked)
  std::string source;    // where the published figure comes from, or what the case shows
  bool checked() const { return published > 0; }
  double ratio() const { return published > 0 ? simulated / published : 0.0; }
  bool in_band() const {
    return !checked() || (ratio() >= kCalibrationLow && ratio() <= kCalibrationHigh);
  }
};

// "name simulated=X published=Y ratio=Z unit=U target=T source=S" (published and ratio "-"
// where there is no published figure).
inline std::string format_case(const CalibrationCase& c) {
  char buf[160];
  std::string s = c.name;
  std::snprintf(buf, sizeof buf, " simulated=%.4g", c.simulated);
  s += buf;
  if (c.checked()) {
    std::snprintf(buf, sizeof buf, " published=%.4g ratio=%.2f", c.published, c.ratio());
    s += buf;
  } else {
    s += " published=- ratio=-";
  }
  return s + " unit=" + c.unit + " target=" + c.target + " source=" + c.source;
}

}  // namespace ipuml::emu
