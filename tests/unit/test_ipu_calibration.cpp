// The emulator against published figures: every calibration case that has one stays within
// [0.75, 1.33] of it (the cases are shared with benchmarks/bench_emulator; docs/targets.md).
#include <catch2/catch.hpp>

#include <ipuml/backends/ipu/calibration.hpp>
#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/ipuml.hpp>

using namespace ipuml;

TEST_CASE("calibration: simulated figures stay near the published ones", "[ipu][calibration]") {
  const auto cases = ipu::run_calibration();
  int checked = 0;
  for (const auto& c : cases) {
    INFO(ipu::format_case(c));
    CHECK(c.simulated > 0);
    if (!c.checked()) continue;
    ++checked;
    CHECK(c.ratio() >= ipu::kCalibrationLow);
    CHECK(c.ratio() <= ipu::kCalibrationHigh);
  }
  CHECK(checked >= 12);
}

TEST_CASE("calibration: the collective model follows the machine and POD topology",
          "[ipu][calibration]") {
  const auto t = ipu::target_preset("ipu2");
  // Inside a machine, then machines of a POD over IPU-Links, then PODs over GW-Links.
  auto s4 = ipu::collective_shape(t, 4);
  CHECK((s4.in_machine == 4 && s4.machines == 1 && s4.pods == 1));
  auto s16 = ipu::collective_shape(t, 16);
  CHECK((s16.in_machine == 4 && s16.machines == 4 && s16.pods == 1));
  auto s128 = ipu::collective_shape(t, 128);
  CHECK((s128.in_machine == 4 && s128.machines == 16 && s128.pods == 2));
  auto r4 = ipu::collective_shape(t, 4, 4);  // 4 replicas of 4 IPUs: one per machine
  CHECK((r4.in_machine == 1 && r4.machines == 4 && r4.pods == 1));
  // A pair's own links are faster than a ring across the machine's pairs.
  const double b = 64e6;
  CHECK(ipu::allreduce_cycles(t, b, 2) / 2 < ipu::allreduce_cycles(t, b, 4) / 3);
  // Leaving the POD for the GW-Links costs more than a POD twice the size would.
  auto big_pod = t;
  big_pod.ipus_per_pod = 128;
  CHECK(ipu::allreduce_cycles(t, b, 128) > ipu::allreduce_cycles(big_pod, b, 128));
  CHECK(ipu::allreduce_cycles(t, b, 128) > ipu::allreduce_cycles(t, b, 64));
  // The defaulted form is what the runtime calls.
  CHECK(ipu::allreduce_cycles(t, b, 4) == ipu::allreduce_cycles(t, b, 4, 1));
  CHECK(ipu::allreduce_cycles(t, b, 1) == 0);
  // One pair's transfer: ipu_links_per_pair links at the link rate and efficiency.
  CHECK(ipu::inter_ipu_cycles(t, 54.4e9) == Approx(t.clock_hz).epsilon(1e-6));
  CHECK(ipu::host_cycles(t, t.host_bytes_per_second) == Approx(t.clock_hz));
}
