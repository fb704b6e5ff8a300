// ipuml-resnet end to end on tiny configurations: eager, compiled CPU with replicas and
// accumulation, emulated IPUs with a pipeline split in fp16, a checkpoint and its resume, the
// strategy comparison, the loader benchmark and Fashion-MNIST (when cached), and flag errors.
#include <catch2/catch.hpp>

#include "../support/run_command.hpp"
#include "../support/temp_dir.hpp"

#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

std::string run(const std::string& args, int* status) {
  const fs::path exe = fs::path(IPUML_BINARY_DIR) / "examples" / "resnet" / "ipuml-resnet";
  return ipuml::testing::run_command(exe.string() + " " + args, status);
}

bool have_exe() {
  const fs::path exe = fs::path(IPUML_BINARY_DIR) / "examples" / "resnet" / "ipuml-resnet";
  if (fs::exists(exe)) return true;
  WARN("ipuml-resnet not built, skipping (" << exe << ")");
  return false;
}

// cifar_resnet18 on 8x8 generated images: every stage runs, in well under a second a step.
const std::string kTiny =
    "--model cifar_resnet18 --data generated --image-size 8 --threads 1 --no-profile ";

}  // namespace

TEST_CASE("resnet example: eager training with a checkpoint and its resume", "[resnet_example]") {
  if (!have_exe()) return;
  ipuml::testing::TempDir dir("ipuml_test_resnet_ex");
  const std::string ck = " --checkpoint " + dir.file("ck.h5");
  const std::string args = kTiny +
                           "--device eager --samples-per-epoch 16 --micro-batch-size 4 "
                           "--eval-samples 8 --warmup-epoch 0.5" +
                           ck;
  int st = 0;
  std::string out = run(args + " --epoch 1", &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("Model cifar_resnet18") && Catch::Contains("Epoch 1/1: loss") &&
                      Catch::Contains("4 updates, 16 images") &&
                      Catch::Contains("Evaluation (eval mode, running statistics)") &&
                      Catch::Contains("Accuracy on test set:") &&
                      Catch::Contains("of 8 images (chance 10.00%)"));
  CHECK(fs::exists(dir.file("ck.h5")));
  out = run(args + " --epoch 2", &st);
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("Resumed from") && Catch::Contains("after epoch 1 (4 updates)") &&
                      Catch::Contains("Epoch 2/2: loss"));
  // Another micro-batch size is another run: resuming it is refused.
  out =
      run(kTiny + "--device eager --samples-per-epoch 16 --micro-batch-size 2 --epoch 2" + ck, &st);
  CHECK(st == 1);
  CHECK_THAT(out, Catch::Contains("was saved with micro_batch_size 4 but this run has 2"));
}

TEST_CASE("resnet example: compiled CPU with replicas, accumulation and device iterations",
          "[resnet_example]") {
  if (!have_exe()) return;
  int st = 0;
  const std::string out = run(kTiny +
                                  "--device cpu --replicas 2 --gradient-accumulation 2 "
                                  "--device-iterations 2 --micro-batch-size 2 "
                                  "--samples-per-epoch 32 --eval-samples 8 --nesterov",
                              &st);
  INFO(out);
  REQUIRE(st == 0);
  // Host batch 2 x 2 x 2 x 2 = 16 images: two host batches, two updates each.
  CHECK_THAT(out, Catch::Contains("host batch 16") && Catch::Contains("4 updates, 32 images") &&
                      Catch::Contains("Training throughput:") &&
                      Catch::Contains("Accuracy on test set:"));
}

TEST_CASE("resnet example: emulated IPUs with a pipeline split, and the strategy table",
          "[resnet_example][ipu]") {
  if (!have_exe()) return;
  int st = 0;
  std::string out = run(kTiny +
                            "--device ipu --target ipu2 --pipeline-splits layer4 "
                            "--gradient-accumulation 3 --micro-batch-size 2 "
                            "--samples-per-epoch 12 --eval-samples 4 --eval-batch-size 4",
                        &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("img/s simulated") &&
                      Catch::Contains("images/s simulated on 2 x ipu2") &&
                      Catch::Contains("Accuracy on test set:"));
  out = run(kTiny +
                "--device ipu --pipeline-splits layer4 --gradient-accumulation 3 "
                "--micro-batch-size 2 --compare-strategies",
            &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("Model parallelism (cifar_resnet18, simulated on ipu2") &&
                      Catch::Contains("single IPU") && Catch::Contains("sharded") &&
                      Catch::Contains("pipelined") && Catch::Contains("images/s simulated"));
}

TEST_CASE("resnet example: fp16.16 on emulated IPUs with a pipeline split",
          "[resnet_example][ipu][slow]") {
  if (!have_exe()) return;
  int st = 0;
  const std::string out =
      run("--model cifar_resnet18 --data generated --threads 1 --no-profile --device ipu "
          "--target ipu2 --precision 16.16 --pipeline-splits layer4 --gradient-accumulation 3 "
          "--micro-batch-size 4 --image-size 16 --samples-per-epoch 24 --eval-samples 4 "
          "--eval-batch-size 4",
          &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("precision 16.16") &&
                      Catch::Contains("images/s simulated on 2 x ipu2") &&
                      Catch::Contains("Accuracy on test set:"));
  CHECK_THAT(out, !Catch::Contains("loss nan") && !Catch::Contains("loss -nan"));
}

TEST_CASE("resnet example: Fashion-MNIST with augmentation and the loader benchmark",
          "[resnet_example][mnist]") {
  if (!have_exe()) return;
  int st = 0;
  std::string out =
      run("--data fashion-mnist --bench-loader --micro-batch-size 32 "
          "--samples-per-epoch 640 --device cpu",
          &st);
  if (st != 0 && out.find("scripts/fetch-data.sh fashion-mnist") != std::string::npos) {
    WARN("Fashion-MNIST not in the data cache, skipping");
    return;
  }
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("Loader: 640 images in") && Catch::Contains("(1 thread"));
  out =
      run("--model cifar_resnet18 --data fashion-mnist --image-size 16 --threads 1 "
          "--device cpu --micro-batch-size 8 --samples-per-epoch 32 --eval-samples 20 "
          "--eval-batch-size 8",
          &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("Data: fashion-mnist from") &&
                      Catch::Contains("10 classes, 16x16 images") &&
                      Catch::Contains("of 20 images (chance 10.00%)"));
}

TEST_CASE("resnet example: bad flags give one clear error", "[resnet_example]") {
  if (!have_exe()) return;
  const std::pair<std::string, std::string> cases[] = {
      {"--model resnet9", "--model 'resnet9' is not one of resnet18|34|50|101|152"},
      {"--precision 8.8", "--precision '8.8' is not one of 16.16, 16.32, 32.32"},
      {"--norm-type layer", "--norm-type 'layer' is not one of batch, group"},
      {"--device eager --replicas 2",
       "--replicas, --gradient-accumulation, --pipeline-splits, --optimizer-state-offchip and "
       "--replicated-tensor-sharding need --device ipu or cpu"},
      {"--device cpu --pipeline-splits layer4", "--pipeline-splits places layers on IPUs"},
      {"--pipeline-splits layer4 --gradient-accumulation 2",
       "needs --gradient-accumulation >= 3, got 2 (or --execution sharded)"},
      {"--pipeline-splits layer9 --execution sharded", "unknown pipeline split 'layer9'"},
      {"--epoch 2 --warmup-epoch 2", "--warmup-epoch 2 must be >= 0 and below --epoch 2"},
      {"--label-smoothing 1", "--label-smoothing 1 is outside [0, 1)"},
      {"--micro-batch-size 0", "--micro-batch-size 0 is outside [1, 2^31]"},
      {"--compare-strategies", "--compare-strategies needs --device ipu and --pipeline-splits"},
      {"--data /nonexistent/images",
       "'/nonexistent/images' is neither 'mnist', 'fashion-mnist' nor a directory"},
      {"--samples-per-epoch 8 --micro-batch-size 16",
       "a host batch of 16 images (micro-batch x device iterations x replicas x accumulation) is "
       "more than the 8 training images"},
      {"--checkpoint /nonexistent/dir/ck.h5", "--checkpoint"},
  };
  for (const auto& [flags, message] : cases) {
    int st = 0;
    const bool own_model = flags.rfind("--model", 0) == 0 || flags.rfind("--data", 0) == 0;
    const std::string out =
        run((own_model ? std::string("--image-size 8 --threads 1 ") : kTiny) + flags, &st);
    INFO(flags << "\n" << out);
    // Flags that contradict each other are usage errors (2); data that does not match them is
    // found when it is read (1).
    const bool found_running = flags.rfind("--data", 0) == 0 ||
                               flags.rfind("--samples-per-epoch", 0) == 0 ||
                               flags.find("layer9") != std::string::npos;
    CHECK(st == (found_running ? 1 : 2));
    CHECK_THAT(out, Catch::Contains(message) && Catch::StartsWith("ipuml-resnet: "));
  }
}
