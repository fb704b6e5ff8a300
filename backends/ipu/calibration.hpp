// The emulator's calibration: microbenchmark programs compiled on the cycle model and set
// beside published figures (docs/targets.md, "Calibration"); shared by benchmarks/bench_emulator
// and tests/unit/test_ipu_calibration.cpp.
#pragma once

#include <string>
#include <vector>

#include <ipuml/backends/emu/calibration_case.hpp>
#include <ipuml/core/config.hpp>

namespace ipuml::ipu {

using emu::CalibrationCase;
using emu::format_case;
using emu::kCalibrationHigh;
using emu::kCalibrationLow;

// Compiles every microbenchmark (plans only: nothing is executed) and returns one case each, in
// a fixed order. Takes a few seconds.
std::vector<CalibrationCase> run_calibration();

}  // namespace ipuml::ipu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/ipu/calibration_impl.hpp>
#endif
