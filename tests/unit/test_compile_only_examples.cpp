// The examples' --compile-only and --config: the estimate a user gets without data or training,
// equal to what training the same configuration reports; presets named as Graphcore's, with
// the command line winning over them; errors for what cannot be estimated.
#include <catch2/catch.hpp>

#include "../support/run_command.hpp"
#include "../support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path exe_path(const std::string& dir, const std::string& name) {
  return fs::path(IPUML_BINARY_DIR) / "examples" / dir / name;
}

bool have(const fs::path& exe) {
  if (fs::exists(exe)) return true;
  WARN(exe.filename().string() << " not built, skipping (" << exe << ")");
  return false;
}

std::string run(const fs::path& exe, const std::string& args, int* status) {
  return ipuml::testing::run_command(exe.string() + " " + args, status);
}

// The number after `label` in `out` (the first match), or -1.
double number_after(const std::string& out, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(label + " ([0-9]+(\\.[0-9]+)?)"))) return -1;
  return std::stod(m[1]);
}

}  // namespace

TEST_CASE("compile-only examples: ResNet's projection is what training the configuration reports",
          "[compile_only][resnet_example][ipu]") {
  const fs::path exe = exe_path("resnet", "ipuml-resnet");
  if (!have(exe)) return;
  const std::string config =
      "--model cifar_resnet18 --data generated --image-size 8 --threads 1 --no-profile "
      "--device ipu --pipeline-splits layer4 --gradient-accumulation 3 --micro-batch-size 2 "
      "--replicas 2 --device-iterations 2 ";
  int st = 0;
  const std::string trained =
      run(exe, config + "--samples-per-epoch 48 --validation-mode none", &st);
  INFO(trained);
  REQUIRE(st == 0);
  const std::string estimated = run(exe, config + "--compile-only", &st);
  INFO(estimated);
  REQUIRE(st == 0);
  CHECK_THAT(estimated,
             Catch::Contains("micro-batch 2 x gradient accumulation 3 x 2 replicas of 2 IPUs "
                             "(pipelined) x 2 device iterations = 24 samples per host call") &&
                 Catch::Contains("memory: fits") && Catch::Contains("without executing a kernel"));
  CHECK_THAT(estimated, !Catch::Contains("Epoch"));  // nothing trained
  const double simulated = number_after(trained, "img/s wall,");
  const double projected = number_after(estimated, "Projected:");
  REQUIRE(simulated > 0);
  CHECK(projected == simulated);
}

TEST_CASE("compile-only examples: --config presets, overridden by the command line",
          "[compile_only][resnet_example][ipu]") {
  const fs::path exe = exe_path("resnet", "ipuml-resnet");
  if (!have(exe)) return;
  int st = 0;
  std::string out = run(exe, "--config list", &st);
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("resnet50-pod4: ResNet-50 on 4 IPUs") &&
                      Catch::Contains("--replicas 4 --micro-batch-size 18 "
                                      "--gradient-accumulation 228 --precision 16.16") &&
                      Catch::Contains("resnet50-pod16"));
  out = run(exe, "--config resnet50-pod64", &st);
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("unknown preset 'resnet50-pod64'") &&
                      Catch::Contains("resnet50-pod4, resnet50-pod16"));
  // The preset's model and accumulation, the command line's replicas and micro-batch, on either
  // side of --config.
  out = run(exe,
            "--replicas 2 --config resnet50-pod4 --model cifar_resnet18 --image-size 16 "
            "--micro-batch-size 2 --compile-only",
            &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("micro-batch 2 x gradient accumulation 228 x 2 replicas of 1 "
                                  "IPU x 1 device iteration = 912 samples per host call"));
  // The emulated system is sized from the command line: 8 replicas take 8 IPUs, more than the
  // one IPU-M2000 the library assumes, without a --set; a --set num_ipus states the system.
  out = run(exe, "--model cifar_resnet18 --image-size 8 --replicas 8 --compile-only", &st);
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("8 replicas of 1 IPU"));
  out =
      run(exe, "--model cifar_resnet18 --image-size 8 --replicas 8 --set num_ipus=4 --compile-only",
          &st);
  CHECK(st != 0);
  CHECK_THAT(out, Catch::Contains("needs 8 IPUs, but the emulated system has 4"));
  out = run(exe, "--compile-only --device cpu", &st);
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("--compile-only estimates the emulated IPU"));
}

TEST_CASE("compile-only examples: ResNet's --available-memory-proportion reaches the planner",
          "[compile_only][resnet_example][ipu]") {
  const fs::path exe = exe_path("resnet", "ipuml-resnet");
  if (!have(exe)) return;
  const std::string config =
      "--model cifar_resnet18 --data generated --threads 1 --no-profile --device ipu "
      "--micro-batch-size 8 --compile-only ";
  int st = 0;
  const std::string tight = run(exe, config + "--available-memory-proportion 0.01", &st);
  INFO(tight);
  REQUIRE(st == 0);
  const std::string roomy = run(exe, config + "--available-memory-proportion 0.6", &st);
  INFO(roomy);
  REQUIRE(st == 0);
  // 1 % of a tile for the convolutions' temporaries: smaller pieces, more steps.
  CHECK(number_after(tight, "temporaries") < number_after(roomy, "temporaries"));
  CHECK(number_after(tight, "one micro-batch:") > number_after(roomy, "one micro-batch:"));
  // One value per IPU of a pipelined replica.
  const std::string per_ipu = run(exe,
                                  config +
                                      "--pipeline-splits layer3 --gradient-accumulation 3 "
                                      "--available-memory-proportion 0.1 0.2",
                                  &st);
  INFO(per_ipu);
  CHECK(st == 0);
  std::string out = run(exe, config + "--available-memory-proportion 1.5", &st);
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("--available-memory-proportion 1.5 is not in (0, 1]"));
  out = run(exe, config + "--available-memory-proportion 0.1 0.2 0.3", &st);
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("takes one value or one per IPU (1 with these "
                                  "--pipeline-splits), got 3"));
}

TEST_CASE("compile-only examples: GPT-2's POD16 preset, BERT's and the Neuron-Inverter's",
          "[compile_only][ipu]") {
  int st = 0;
  const fs::path gpt2 = exe_path("gpt2", "ipuml-gpt2");
  if (have(gpt2)) {
    // The reference command line at sequence 16: GPT-2 small, 4 replicas x 4 IPUs pipelined.
    const std::string out = run(gpt2, "--config gpt2-small-pod16 --max-len 16 --compile-only", &st);
    INFO(out);
    REQUIRE(st == 0);
    CHECK_THAT(out, Catch::Contains("micro-batch 1 x gradient accumulation 2048 x 4 replicas of "
                                    "4 IPUs (pipelined) x 8 device iterations") &&
                        Catch::Contains("+ gradient all-reduce") &&
                        Catch::Contains("sequences/s (") && Catch::Contains("tokens/s) on 16 x"));
  }
  const fs::path bert = exe_path("bert", "ipuml-bert");
  if (have(bert)) {
    const std::string out = run(bert,
                                "--config pretrain_base_128 --sequence-length 16 --mask-tokens 2 "
                                "--micro-batch-size 1 --gradient-accumulation 32 --compile-only",
                                &st);
    INFO(out);
    REQUIRE(st == 0);
    CHECK_THAT(out, Catch::Contains("micro-batch 1 x gradient accumulation 32 x 4 replicas of 4 "
                                    "IPUs (pipelined)") &&
                        Catch::Contains("Projected: "));
  }
  const fs::path ni = exe_path("neuron_inverter", "ipuml-neuron-inverter");
  if (have(ni)) {
    const std::string out = run(
        ni, "--config hpar_dev --replication-factor 2 --compile-only --dataPath /nonexistent", &st);
    INFO(out);
    REQUIRE(st == 0);
    CHECK_THAT(out, Catch::Contains("micro-batch 16 x gradient accumulation 1 x 2 replicas") &&
                        Catch::Contains("Projected: Avg samp/msec/IPU "));
  }
  const fs::path mnist = exe_path("mnist", "ipuml-mnist");
  if (have(mnist)) {
    const std::string out =
        run(mnist, "--compile-only --replication-factor 2 --data-dir /nonexistent", &st);
    INFO(out);
    REQUIRE(st == 0);
    CHECK_THAT(out, Catch::Contains("x 2 replicas of 1 IPU x 50 device iterations = 800 samples") &&
                        Catch::Contains("projected throughput: "));
  }
}

TEST_CASE("compile-only examples: every example writes its profile reports to --report-dir",
          "[compile_only][ipu]") {
  const std::vector<std::pair<fs::path, std::string>> runs = {
      {exe_path("resnet", "ipuml-resnet"), "--model cifar_resnet18 --image-size 8"},
      {exe_path("gpt2", "ipuml-gpt2"), "--config gpt2-small-pod16 --max-len 16"},
      {exe_path("bert", "ipuml-bert"),
       "--config pretrain_base_128 --sequence-length 16 --mask-tokens 2 --micro-batch-size 1 "
       "--gradient-accumulation 32"},
      {exe_path("neuron_inverter", "ipuml-neuron-inverter"),
       "--config hpar_dev --dataPath /nonexistent"},
      {exe_path("mnist", "ipuml-mnist"), "--data-dir /nonexistent"}};
  for (const auto& [exe, args] : runs) {
    if (!have(exe)) continue;
    INFO(exe.filename().string() << " " << args);
    ipuml::testing::TempDir dir("ipuml_report_dir");
    int st = 0;
    std::string out = run(exe, args + " --compile-only --report-dir " + dir.file("reports"), &st);
    INFO(out);
    CHECK(st == 0);
    CHECK(fs::exists(dir.path / "reports" / "training" / "profile.json"));
    // A file where the directory should be is refused before anything is compiled.
    { std::ofstream(dir.file("taken")) << "x"; }
    out = run(exe, args + " --compile-only --report-dir " + dir.file("taken"), &st);
    CHECK(st == 2);
    CHECK_THAT(out, Catch::Contains("--report-dir '" + dir.file("taken") + "' is not a directory"));
  }
}
