// The SambaNova target's calibration (docs/targets-sambanova.md, "Calibration"): a DDR-bound
// section moves its bytes at the rate SambaTune's documented report shows for a section, within
// the band the other targets' cases are held to; a large GEMM reaches most of the published peak
// and never more; an empty section costs its loading.
#include <catch2/catch.hpp>

#include <ipuml/backends/sambanova/calibration.hpp>
#include <ipuml/ipuml.hpp>

using namespace ipuml;

TEST_CASE("sambanova calibration: microbenchmarks beside the published figures",
          "[sambanova][calibration]") {
  const auto cases = sambanova::run_calibration();
  REQUIRE(cases.size() == 5);
  for (const auto& c : cases) {
    INFO(emu::format_case(c));
    CHECK(c.simulated > 0);
    if (c.name.rfind("ddr_add", 0) == 0) {
      CHECK(c.checked());
      CHECK(c.in_band());
      CHECK(c.simulated < 0.8 * 128.0);  // under the six DDR4-2667 channels' sustained rate
    } else if (c.name.rfind("gemm", 0) == 0) {
      CHECK_FALSE(c.checked());
      CHECK(c.simulated <= 688.0 + 1e-9);  // never beyond the published peak
      if (c.name.find("16384") != std::string::npos) CHECK(c.simulated >= 0.8 * 688.0);
    } else {
      CHECK(c.simulated == Approx(20.0).epsilon(0.01));
    }
  }
}
