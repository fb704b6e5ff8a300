// The Cerebras target's calibration: microbenchmark programs planned on the wafer's cost model
// and set beside published figures (docs/targets-cerebras.md, "Calibration"); shared by
// benchmarks/bench_emulator and tests/unit/test_cerebras_calibration.cpp.
#pragma once

#include <vector>

#include <ipuml/backends/emu/calibration_case.hpp>
#include <ipuml/core/config.hpp>

namespace ipuml::cerebras {

// Plans every microbenchmark (nothing is executed) and returns one case each, in a fixed order.
std::vector<emu::CalibrationCase> run_calibration();

}  // namespace ipuml::cerebras

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cerebras/calibration_impl.hpp>
#endif
