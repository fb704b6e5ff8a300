// ipuml-gpt2 end to end: --tokenize, training on generated ids and on the fortunes corpus with
// a checkpoint, generation from it, a 2-IPU layers_per_ipu split on the emulator, and flag
// errors with a clear message and a non-zero exit code.
#include <ipuml/datasets/gpt2_bpe.hpp>
#include <ipuml/datasets/text_data.hpp>
#include <ipuml/io/checkpoint.hpp>

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "../support/tokenizers.hpp"
#include "../support/run_command.hpp"
#include "../support/same_bits.hpp"

#include "../support/temp_dir.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

using namespace ipuml;
namespace fs = std::filesystem;

namespace {

std::string run(const std::string& cmd, int* status) {
  return ipuml::testing::run_command(cmd, status);
}

const fs::path kExe = fs::path(IPUML_BINARY_DIR) / "examples" / "gpt2" / "ipuml-gpt2";

bool have_exe() {
  if (fs::exists(kExe)) return true;
  WARN("ipuml-gpt2 not built, skipping (" << kExe << ")");
  return false;
}

const std::string kSmall = " --model gpt2-tiny --batch-size 2 --max-len 16 --threads 1";

}  // namespace

TEST_CASE("gpt2 example: trains on generated ids, checkpoints, resumes and generates",
          "[gpt2_example]") {
  if (!have_exe()) return;
  testing::TempDir dir("ipuml_test_gpt2_ex");
  const std::string base = kExe.string() + kSmall + " --checkpoint-output-dir " + dir.file("ck");
  int st = 0;
  std::string out = run(base + " --training-steps 3 --device eager", &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("Model gpt2-tiny: 2 layers") &&
                      Catch::Contains("Epoch 1: 3/3 updates") &&
                      Catch::Contains("Validation: loss") && Catch::Contains("Throughput: "));
  CHECK(io::read_checkpoint(dir.file("ck/checkpoint.h5")).step == 3);
  out = run(base + " --training-steps 5 --device eager", &st);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("Resumed from") && Catch::Contains("5/5 updates"));
  CHECK(io::read_checkpoint(dir.file("ck/checkpoint.h5")).step == 5);
  // Generation: greedy is deterministic, and the KV cache does not change the tokens.
  const std::string gen = kExe.string() + " generate --checkpoint-output-dir " + dir.file("ck") +
                          " --prompt '5 6 7' --max-new-tokens 6 --temperature 0";
  // (run() sends stderr, where the timing goes, to stdout: the ids are the first line.)
  auto first_line = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  const std::string a = first_line(run(gen, &st));
  CHECK(st == 0);
  CHECK(first_line(run(gen + " --no-cache", &st)) == a);
  std::istringstream ids(a);
  int n = 0;
  for (int64_t id; ids >> id; ++n) CHECK((id >= 0 && id < 1000));
  CHECK(n == 6);
}

TEST_CASE("gpt2 example: an interrupted and resumed run ends with the bits of an uninterrupted one",
          "[gpt2_example][hostile]") {
  if (!have_exe()) return;
  testing::TempDir dir("ipuml_test_gpt2_resume");
  for (const std::string device : {"eager", "cpu"}) {
    INFO("device " << device);
    // Dropout on (GPT-2's 0.1): its random numbers must continue where the saved run stopped.
    const std::string base = kExe.string() + kSmall +
                             " --dropout 0.1 --lr-schedule constant --lr-warmup 0 --device " +
                             device + " --checkpoint-output-dir ";
    int st = 0;
    std::string out = run(base + dir.file(device + "_a") + " --training-steps 4", &st);
    INFO(out);
    REQUIRE(st == 0);
    out = run(base + dir.file(device + "_b") + " --training-steps 2", &st);
    REQUIRE(st == 0);
    out = run(base + dir.file(device + "_b") + " --training-steps 4", &st);
    REQUIRE(st == 0);
    REQUIRE_THAT(out, Catch::Contains("Resumed from") && Catch::Contains("after 2 weight updates"));
    const auto a = io::read_checkpoint(dir.file(device + "_a/checkpoint.h5"));
    const auto b = io::read_checkpoint(dir.file(device + "_b/checkpoint.h5"));
    CHECK(a.step == 4);
    CHECK(b.step == 4);
    CHECK(testing::same_bits(a.model, b.model));
    CHECK(testing::same_bits(a.optimizer, b.optimizer));
    CHECK(testing::same_bits(a.training, b.training));
    // The comparison tells runs apart (one that stopped at 3 updates differs).
    out = run(base + dir.file(device + "_c") + " --training-steps 3", &st);
    REQUIRE(st == 0);
    CHECK_FALSE(testing::same_bits(
        a.model, io::read_checkpoint(dir.file(device + "_c/checkpoint.h5")).model));
  }
  // A resumed run must keep the flags that shape the run.
  int st = 0;
  const std::string out = run(kExe.string() +
                                  " --model gpt2-tiny --batch-size 4 --max-len 16 "
                                  "--threads 1 --device eager --training-steps 5 "
                                  "--checkpoint-output-dir " +
                                  dir.file("eager_a"),
                              &st);
  CHECK(st != 0);
  CHECK_THAT(out, Catch::Contains("was saved with batch_size 2 but this run has 4"));
}

TEST_CASE("gpt2 example: compiled cpu and a 2-IPU layers-per-ipu split", "[gpt2_example]") {
  if (!have_exe()) return;
  int st = 0;
  std::string out = run(kExe.string() + kSmall + " --training-steps 2 --device cpu", &st);
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("2/2 updates"));
  out =
      run(kExe.string() + kSmall +
              " --training-steps 2 --device ipu --layers-per-ipu 1 1 --ipus-per-replica 2 "
              "--device-iterations 2 --gradient-accumulation 2 --embedding-serialization-factor 4 "
              "--recompute-checkpoint-every-layer True",
          &st);
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("samples/s simulated on 2 x ipu2"));
}

TEST_CASE("gpt2 example: the fortunes corpus, its unigram baseline, and decoded generation",
          "[gpt2_example]") {
  if (!have_exe()) return;
  auto tok = ipuml::testing::gpt2_tokenizer_or_skip();
  if (!tok) return;
  try {
    datasets::find_fortunes_dir();
  } catch (const Error& e) {
    WARN("fortunes not installed, skipping (" << e.what() << ")");
    return;
  }
  testing::TempDir dir("ipuml_test_gpt2_ex");
  int st = 0;
  std::string out = run(kExe.string() + kSmall +
                            " --dataset fortunes --training-steps 2 --val-sequences 4 "
                            "--checkpoint-output-dir " +
                            dir.file("ck"),
                        &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("Dataset fortunes:") && Catch::Contains("vocab 50257") &&
                      Catch::Contains("unigram baseline perplexity"));
  out = run(kExe.string() + " generate --checkpoint-output-dir " + dir.file("ck") +
                " --prompt 'The cat' --max-new-tokens 4 --temperature 0.7 --top-k 20 --top-p 0.9",
            &st);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::StartsWith("The cat") && Catch::Contains("tokens/s, KV cache"));

  // --tokenize: one line of ids per input line, as the tokenizer gives them.
  std::ofstream(dir.file("in.txt")) << "Hello world!\n\nCafé naïve 中文\n";
  out = run(kExe.string() + " --tokenize " + dir.file("in.txt"), &st);
  CHECK(st == 0);
  std::string want;
  for (const char* line : {"Hello world!", "", "Café naïve 中文"}) {
    const auto ids = tok->encode(line);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) want += ' ';
      want += std::to_string(ids[i]);
    }
    want += "\n";
  }
  CHECK(out == want);
  CHECK_THAT(want, Catch::StartsWith("15496 995 0\n\n34 1878 2634 41492 "));
}

TEST_CASE("gpt2 example: flag errors are clear", "[gpt2_example]") {
  if (!have_exe()) return;
  int st = 0;
  std::string out = run(kExe.string() + " --layers-per-ipu 1 1", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("--layers-per-ipu has 2 entries but --ipus-per-replica is 1"));
  out = run(kExe.string() + " --layers-per-ipu 1 2 --ipus-per-replica 2", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("sums to 3"));
  out = run(kExe.string() + " --model gpt5", &st);
  CHECK(st != 0);
  CHECK_THAT(out, Catch::Contains("--model"));
  out = run(kExe.string() + " --optimizer SGD", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("expected AdamW"));
  out = run(kExe.string() + " --recompute-checkpoint-every-layer maybe", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("expects True or False"));
  out = run(kExe.string() + " --device eager --replication-factor 2", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("need --device cpu or ipu"));
  out = run(kExe.string() + " --embedding-serialization-factor 0", &st);
  CHECK(st == 2);  // a usage error
  CHECK_THAT(out, Catch::Contains("embedding_serialization_factor"));
  out = run(kExe.string() + " generate --checkpoint-output-dir /nonexistent/dir", &st);
  CHECK(st == 1);  // a file that cannot be read
  CHECK_THAT(out, Catch::Contains("/nonexistent/dir/checkpoint.h5"));
  out = run(kExe.string() + " --tokenize /nonexistent/file", &st);
  CHECK(st == 1);  // a file that cannot be read
  CHECK_THAT(out, Catch::Contains("/nonexistent/file"));
}
