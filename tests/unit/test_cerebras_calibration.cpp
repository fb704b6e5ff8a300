// The Cerebras target's calibration (docs/targets-cerebras.md, "Calibration"): the SRAM bandwidth
// an elementwise pass reaches is the published one within the band the IPU's cases are held to;
// the GEMV and the wafer-wide reduction, compared with the best published kernels (research
// codes the vendor's own stack does not beat), are never faster than them beyond that band.
#include <catch2/catch.hpp>

#include <ipuml/backends/cerebras/calibration.hpp>
#include <ipuml/ipuml.hpp>

using namespace ipuml;

TEST_CASE("cerebras calibration: microbenchmarks beside the published figures",
          "[cerebras][calibration][slow]") {
  const auto cases = cerebras::run_calibration();
  REQUIRE(cases.size() == 6);
  for (const auto& c : cases) {
    INFO(emu::format_case(c));
    CHECK(c.simulated > 0);
    if (c.name.rfind("sram_bw", 0) == 0) {
      CHECK(c.checked());
      CHECK(c.in_band());
    } else if (c.name.rfind("gemv", 0) == 0 || c.name.rfind("wafer_reduce", 0) == 0) {
      REQUIRE(c.checked());
      CHECK(c.ratio() >= emu::kCalibrationLow);  // no faster than the best published kernel
      CHECK(c.ratio() <= 2.0);
    } else {
      CHECK_FALSE(c.checked());  // informational: a share of the peak, at most all of it
      CHECK(c.simulated <= 6.56 + 1e-9);
    }
  }
}
