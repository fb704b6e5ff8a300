// The emulator against published figures: every calibration case that has one stays within
// [0.75, 1.33] of it (the cases are shared with benchmarks/bench_emulator; docs/targets.md).
#include <cmath>

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
  // One IPU a replica is the defaulted form.
  CHECK(ipu::allreduce_cycles(t, b, 4) == ipu::allreduce_cycles(t, b, 4, 1));
  CHECK(ipu::allreduce_cycles(t, b, 1) == 0);
  // One pair's transfer: ipu_links_per_pair links at the link rate and efficiency.
  CHECK(ipu::inter_ipu_cycles(t, 54.4e9) == Approx(t.clock_hz).epsilon(1e-6));
  CHECK(ipu::host_cycles(t, t.host_bytes_per_second) == Approx(t.clock_hz));
}

TEST_CASE("calibration: the host link is the machine's, shared by the replicas on it",
          "[ipu][calibration]") {
  // An IPU-M2000's one 100 GbE link (docs/targets.md, [DA]) serves its four IPUs: one-IPU
  // replicas share it four ways at most, a replica of 2 IPUs shares it with one other, a replica
  // spanning the machine has it alone; a C2 card's slot serves its two IPUs.
  auto t = ipu::target_preset("ipu2");
  CHECK(t.host_bytes_per_second == 12.5e9);
  CHECK(t.ipus_per_host_link == 4);
  const double second = t.host_bytes_per_second;  // one second's bytes for one stream alone
  CHECK(ipu::host_link_streams(t, 1) == 1);
  CHECK(ipu::host_link_streams(t, 2) == 2);
  CHECK(ipu::host_link_streams(t, 16) == 4);
  CHECK(ipu::host_cycles(t, second, 16) == Approx(4 * t.clock_hz));
  t.num_ipus = 2;
  CHECK(ipu::host_link_streams(t, 4) == 2);
  t.num_ipus = 4;
  CHECK(ipu::host_link_streams(t, 4) == 1);
  const auto c2 = ipu::target_preset("ipu1");
  CHECK(c2.host_bytes_per_second == 32e9);
  CHECK(ipu::host_link_streams(c2, 8) == 2);
  // A host sync: Graphcore's measured 1485 us for 4095 syncs, at the tile clock.
  CHECK(ipu::host_sync_cycles(t) == std::ceil(0.363e-6 * t.clock_hz));
}

TEST_CASE("calibration: a step pays one host sync per direction it streams, on its IPU",
          "[ipu][calibration]") {
  // y * y over 1024 floats: 4096 bytes in, 4096 out, each stream after a host sync; four
  // one-IPU replicas on a machine stream at a quarter of its link each.
  const auto t = ipu::target_preset("ipu2");
  ir::Tracer tr;
  Tensor y = tr.input(ir::TensorMeta{{1024}, kFloat32}, "y");
  const auto g = tr.finish({mul(y, y)});
  ipu::CompileOptions o;
  o.progress = false;
  for (int64_t replicas : {1, 4}) {
    o.replication_factor = replicas;
    const auto p = ipu::plan_graph(g.graph, t, o);
    const double xfer = std::ceil(4096 / (12.5e9 / static_cast<double>(replicas)) * t.clock_hz);
    const double sync = std::ceil(0.363e-6 * t.clock_hz);
    CHECK(p.cycles.per_device[0].host == 2 * xfer + 2 * sync);
  }
}

TEST_CASE("calibration: the all-reduce of R replicas of k IPUs follows docs/targets.md's formula",
          "[ipu][calibration]") {
  // docs/targets.md, "Collectives": g replicas of a machine reduce-scatter and all-gather in a
  // ring (2 (g - 1) steps of bytes / (k g)), the m machines of a POD all-reduce over the IPU-Links
  // between them (2 (m - 1) steps of bytes / (k g m)); every step pays sync_cycles and the
  // Sync-Link hops of the IPUs it spans. Written out here for ipu2's IPU-M2000s (4 IPUs a
  // machine, 64 a POD, 2 links between a machine's pairs).
  const auto t = ipu::target_preset("ipu2");
  REQUIRE(t.ipus_per_machine == 4);
  REQUIRE(t.ipus_per_pod == 64);
  const double b = 100e6, clk = t.clock_hz;
  const double between = t.ipu_link_bytes_per_second * t.ipu_link_efficiency *
                         static_cast<double>(t.ipu_links_between_pairs);
  auto step = [&](double bytes, double bw, int64_t ipus) {
    return std::ceil(bytes / bw * clk) + static_cast<double>(t.sync_cycles) +
           ipu::sync_hop_cycles(t, ipus);
  };
  // 1 x 4: one replica of four IPUs reduces nothing.
  CHECK(ipu::allreduce_cycles(t, b, 1, 4) == 0);
  // 4 x 1: the four IPUs of one machine, a ring paced by the links between its pairs.
  CHECK(ipu::allreduce_cycles(t, b, 4, 1) == Approx(2 * 3 * step(b / 4, between, 4)));
  // 4 x 4: a replica fills a machine; four machines of a POD, each IPU with a quarter.
  CHECK(ipu::allreduce_cycles(t, b, 4, 4) == Approx(2 * 3 * step(b / 4 / 4, between, 16)));
  // 16 x 4: sixteen machines, the whole POD.
  CHECK(ipu::allreduce_cycles(t, b, 16, 4) == Approx(2 * 15 * step(b / 4 / 16, between, 64)));
  // The four IPUs of a replica reduce a quarter each: under a third of the time the same
  // gradients take when one IPU holds them all.
  CHECK(ipu::allreduce_cycles(t, b, 4, 4) < ipu::allreduce_cycles(t, b, 4, 1) / 3);
}
