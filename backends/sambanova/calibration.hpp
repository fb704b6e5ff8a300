// The SambaNova target's calibration: microbenchmark programs cut into sections on the RDU's
// cost model and set beside published figures (docs/targets-sambanova.md, "Calibration");
// shared by benchmarks/bench_emulator and tests/unit/test_sambanova_calibration.cpp.
#pragma once

#include <vector>

#include <ipuml/backends/emu/calibration_case.hpp>
#include <ipuml/core/config.hpp>

namespace ipuml::sambanova {

// Plans every microbenchmark (nothing is executed) and returns one case each, in a fixed order.
std::vector<emu::CalibrationCase> run_calibration();

}  // namespace ipuml::sambanova

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/sambanova/calibration_impl.hpp>
#endif
