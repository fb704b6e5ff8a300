// ipuml-bert end to end: MLM + NSP pre-training on generated ids (eager, compiled cpu, a 2-IPU
// split on the emulator) with a checkpoint and resume, on the fortunes corpus with its unigram
// baseline, SQuAD fine-tuning on tests/data/squad_tiny.json, --tokenize, and flag errors.
#include <ipuml/datasets/text_data.hpp>
#include <ipuml/datasets/wordpiece.hpp>
#include <ipuml/io/checkpoint.hpp>

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "../support/tokenizers.hpp"
#include "../support/run_command.hpp"

#include "../support/temp_dir.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

using namespace ipuml;
namespace fs = std::filesystem;

namespace {

std::string run(const std::string& cmd, int* status) {
  return ipuml::testing::run_command(cmd, status);
}

const fs::path kExe = fs::path(IPUML_BINARY_DIR) / "examples" / "bert" / "ipuml-bert";
const std::string kSquad = std::string(IPUML_SOURCE_DIR) + "/tests/data/squad_tiny.json";
const std::string kSmall = " --config tiny --micro-batch-size 2 --sequence-length 16 --threads 1";

bool have_exe() {
  if (fs::exists(kExe)) return true;
  WARN("ipuml-bert not built, skipping (" << kExe << ")");
  return false;
}

}  // namespace

TEST_CASE("bert example: pre-training on generated ids, eager, cpu and a 2-IPU split",
          "[bert_example]") {
  if (!have_exe()) return;
  testing::TempDir dir("ipuml_test_bert_ex");
  const std::string ck = " --checkpoint-output-dir " + dir.file("ck");
  int st = 0;
  std::string out = run(kExe.string() + kSmall + ck + " --device eager --training-steps 3", &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("Model BERT tiny (MLM + NSP)") &&
                      Catch::Contains("3/3 updates") && Catch::Contains("MLM loss") &&
                      Catch::Contains("Training MLM loss: first step"));
  CHECK(io::read_checkpoint(dir.file("ck/checkpoint.h5")).step == 3);
  out = run(kExe.string() + kSmall + ck + " --device eager --training-steps 4", &st);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("Resumed from") && Catch::Contains("4/4 updates"));
  out = run(kExe.string() + kSmall + " --device cpu --training-steps 2 --optimizer LAMB", &st);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("2/2 updates"));
  out = run(kExe.string() + kSmall +
                " --device ipu --layers-per-ipu 1 1 --ipus-per-replica 2 --training-steps 2 "
                "--device-iterations 2",
            &st);
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("samples/s simulated on 2 x ipu2"));
}

TEST_CASE("bert example: fortunes pre-training, SQuAD fine-tuning and --tokenize",
          "[bert_example]") {
  if (!have_exe()) return;
  auto tok = ipuml::testing::bert_tokenizer_or_skip();
  if (!tok) return;
  int st = 0;
  std::string out = run(kExe.string() + " --task squad --squad-file " + kSquad +
                            " --micro-batch-size 2 --sequence-length 48 --doc-stride 16 "
                            "--training-steps 2 --threads 1",
                        &st);
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("SQuAD: 4 questions") && Catch::Contains("exact span match"));
  bool fortunes = true;
  try {
    datasets::find_fortunes_dir();
  } catch (const Error&) {
    fortunes = false;
    WARN("fortunes not installed, skipping the corpus run");
  }
  if (fortunes) {
    out = run(kExe.string() + kSmall + " --dataset fortunes --training-steps 2", &st);
    INFO(out);
    CHECK(st == 0);
    CHECK_THAT(out, Catch::Contains("sentence pairs (WordPiece)") &&
                        Catch::Contains("unigram baseline loss"));
  }
  testing::TempDir dir("ipuml_test_bert_ex");
  std::ofstream(dir.file("in.txt")) << "Hello, World!\nunaffable\n";
  out = run(kExe.string() + " --tokenize " + dir.file("in.txt"), &st);
  CHECK(st == 0);
  CHECK(out == "7592 1010 2088 999\n14477 20961 3468\n");
}

TEST_CASE("bert example: flag errors are clear", "[bert_example]") {
  if (!have_exe()) return;
  int st = 0;
  std::string out = run(kExe.string() + " --task squad", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("--task squad needs --squad-file"));
  out = run(kExe.string() + " --task squad --squad-file /nonexistent.json", &st);
  CHECK(st == 1);  // a file that cannot be read
  CHECK_THAT(out, Catch::Contains("/nonexistent.json"));
  out = run(kExe.string() + " --layers-per-ipu 1 1", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("--ipus-per-replica is 1"));
  out = run(kExe.string() + " --optimizer SGD", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("expected AdamW or LAMB"));
  out = run(kExe.string() + " --config enormous", &st);
  CHECK(st != 0);
  CHECK_THAT(out, Catch::Contains("--config"));
  out = run(kExe.string() + " --sequence-length 4", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("--sequence-length 4 must be >= 8"));
}
