// The emulator's calibration: microbenchmark programs compiled on the cycle model and set
// beside published figures (docs/targets.md, "Calibration"); shared by benchmarks/bench_emulator
// and tests/unit/test_ipu_calibration.cpp.
#pragma once

#include <string>
#include <vector>

#include <ipuml/core/config.hpp>

namespace ipuml::ipu {

// Ratios of simulated to published figures the calibration holds every checked case to.
inline constexpr double kCalibrationLow = 0.75, kCalibrationHigh = 1.33;

struct CalibrationCase {
  std::string name;    // e.g. "mem_bw_add_fp32_ipu2"
  std::string target;  // the preset it runs on: Mk1 figures on ipu1, Mk2 on ipu2, Bow on bow
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

// Compiles every microbenchmark (plans only: nothing is executed) and returns one case each, in
// a fixed order. Takes a few seconds.
std::vector<CalibrationCase> run_calibration();

// "name simulated=X published=Y ratio=Z unit=U target=T source=S" (published and ratio "-"
// where there is no published figure).
std::string format_case(const CalibrationCase& c);

}  // namespace ipuml::ipu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/ipu/calibration_impl.hpp>
#endif
