// ipuml-sambanova end to end: compile then run of logreg on the real MNIST (skipped when the data
// cache lacks it) with SambaFlow's log lines, test and measure-performance on its PEF, data
// parallel instances, UNet on generated masks, GPT-2 XL sized on the meta device, and refusals of
// damaged PEFs, PEFs of another model, batch or graph, and bad command lines.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <catch2/catch.hpp>

#include <ipuml/backends/sambanova/pef.hpp>
#include <ipuml/ipuml.hpp>

#include "../support/mnist_cache.hpp"
#include "../support/run_command.hpp"
#include "../support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

const fs::path kExe = fs::path(IPUML_BINARY_DIR) / "examples" / "sambanova" / "ipuml-sambanova";

bool built() { return IPUML_EXAMPLES_BUILT && fs::exists(kExe); }

std::string run(const std::string& args, int* status) {
  return ipuml::testing::run_command(kExe.string() + " " + args + " 2>&1", status);
}

int count(const std::string& s, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(s.begin(), s.end(), re), std::sregex_iterator()));
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void flip_byte(const fs::path& file, std::streamoff at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  f.seekp(at);
  c = static_cast<char>(c ^ 0x20);
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("sambanova app: logreg compiled then run on MNIST with SambaFlow's log lines",
          "[sambanova][example]") {
  if (!built()) return;
  const std::string mnist = ipuml::testing::cached_mnist_dir();
  if (mnist.empty()) return;
  ipuml::testing::TempDir dir("ipuml_test_sambanova_logreg");
  int status = -1;
  const std::string out = dir.file("pef");
  const std::string compiled = run(
      "logreg.py compile -b=16 --pef-name=\"logreg\" --output-folder=\"" + out + "\" --num-tiles 4",
      &status);
  INFO(compiled);
  REQUIRE(status == 0);
  const fs::path pef = fs::path(out) / "logreg" / "logreg.pef";
  CHECK(fs::exists(pef));
  CHECK(fs::exists(fs::path(out) / "logreg" / "training" / "sections.json"));
  CHECK(fs::exists(fs::path(out) / "logreg" / "training" / "profile.json"));
  CHECK(contains(compiled, "Sections on sn30 (4 tiles, o1)"));
  CHECK(contains(compiled, "Fit: fits ("));
  CHECK(contains(compiled, "Mode: training (forward, loss, backward and the SGD update), fp32"));
  CHECK(count(compiled, std::regex(R"(Projected: [0-9.]+ samples/s per instance, [0-9.]+ )"
                                   R"(samples/s for 1 instance)")) == 1);
  CHECK(count(compiled, std::regex(R"(Compile: [0-9.]+ s of wall clock on this host)")) == 1);
  CHECK(contains(compiled, "PEF file " + pef.string() + " created"));

  const std::string trained =
      run("logreg run --pef=\"" + pef.string() + "\" -n 400 " + "--log-interval 100 --data-path " +
              mnist + " --log-path " + dir.file("logs"),
          &status);
  INFO(trained);
  REQUIRE(status == 0);
  const std::regex line(R"(Epoch \[1/1\], Step \[([0-9]+)/400\], Loss: ([0-9]+\.[0-9]{4})\n)");
  std::vector<double> losses;
  for (auto it = std::sregex_iterator(trained.begin(), trained.end(), line);
       it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[2]));
  REQUIRE(losses.size() == 4);
  CHECK(losses.back() < losses.front());
  std::smatch acc;
  REQUIRE(std::regex_search(
      trained, acc, std::regex(R"(Test Accuracy: ([0-9]+\.[0-9]{2}) Loss: [0-9]+\.[0-9]{4})")));
  CHECK(std::stod(acc[1]) > 75.0);  // 400 steps of 16 at the tutorial's lr 0.001
  CHECK(count(trained, std::regex(R"(Trained 6400 samples in [0-9.]+ s of wall clock here )"
                                  R"(\([0-9.]+ samples/s\); simulated on the RDU: [0-9.]+ s, )"
                                  R"([0-9.]+ samples/s per instance)")) == 1);
  std::ifstream log(fs::path(dir.file("logs")) / "logreg.log");
  const std::string logged((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK(count(logged, line) == 4);
  CHECK(contains(logged, "Test Accuracy: "));

  const std::string tested = run("logreg test --pef " + pef.string(), &status);
  INFO(tested);
  CHECK(status == 0);
  CHECK(count(tested, std::regex(R"(\nPASS (logits|loss|grad lin_layer.weight) )")) == 3);
  CHECK_FALSE(contains(tested, "FAIL"));
  CHECK(contains(tested, "PASS: logreg on the emulated RDU agrees with the host CPU"));

  const std::string measured =
      run("logreg measure-performance --pef " + pef.string() + " -n 20", &status);
  INFO(measured);
  CHECK(status == 0);
  CHECK(count(measured, std::regex(R"(Simulated on the RDU: latency [0-9.]+ ms per batch, )"
                                   R"([0-9.]+ samples/s per instance, [0-9.]+ samples/s for 1 )"
                                   R"(instance\n)")) == 1);
  CHECK(count(measured, std::regex(R"(Wall-clock here: latency [0-9.]+ ms per batch, [0-9.]+ )"
                                   R"(samples/s for 1 instance \(20 iterations)")) == 1);
}

TEST_CASE("sambanova app: data-parallel instances and unet on generated masks",
          "[sambanova][example]") {
  if (!built()) return;
  ipuml::testing::TempDir dir("ipuml_test_sambanova_unet");
  int status = -1;
  const std::string out = dir.file("pef");
  const std::string compiled =
      run("unet compile --in-channels 3 --in-width 32 --in-height 32 "
          "--init-features 4 -b 4 --target tiny --data-parallel -ws 2 "
          "--enable-conv-tiling -o0 --output-folder " +
              out,
          &status);
  INFO(compiled);
  REQUIRE(status == 0);
  CHECK(contains(compiled, "Sections on tiny (2 tiles, o0)"));
  CHECK(contains(compiled, "--enable-conv-tiling is a SambaFlow compiler hint"));
  CHECK(count(compiled, std::regex(R"(samples/s for 2 instances)")) == 1);
  const std::string pef = (fs::path(out) / "unet" / "unet.pef").string();
  const std::string trained = run("unet run --pef " + pef + " -n 6 --log-interval 3", &status);
  INFO(trained);
  REQUIRE(status == 0);
  CHECK(contains(trained, "Data parallel: 2 instances, replicas in this process"));
  CHECK(count(trained, std::regex(R"(Epoch \[1/1\], Step \[(3|6)/6\], Loss: [0-9]+\.[0-9]{4})")) ==
        2);
  CHECK(count(trained, std::regex(R"(Test Dice: [0-9.]+ IoU: [0-9.]+ Loss: [0-9.]+)")) == 1);
  CHECK(contains(trained, "samples/s for 2 instances"));
  // Its flags belong to unet: another model's is refused by name.
  const std::string wrong = run("unet run --pef " + pef + " --num-classes 3", &status);
  CHECK(status == 2);
  CHECK(contains(wrong, "--num-classes is not a flag of unet (its flags: --in-channels"));
}

TEST_CASE("sambanova app: a damaged PEF or one of another model batch or graph is refused",
          "[sambanova][example]") {
  if (!built()) return;
  ipuml::testing::TempDir dir("ipuml_test_sambanova_hostile");
  int status = -1;
  const std::string out = dir.file("pef");
  const std::string compiled = run("lenet compile -b 1 --output-folder " + out, &status);
  INFO(compiled);
  REQUIRE(status == 0);
  const fs::path pef = fs::path(out) / "lenet" / "lenet.pef";
  REQUIRE(fs::exists(pef));

  const std::string other = run("logreg run --pef " + pef.string(), &status);
  CHECK(status == 1);
  CHECK(contains(other, pef.string() + " was compiled for the app lenet; this run is the app "
                                       "logreg: compile again for logreg"));
  const std::string batch = run("lenet test --pef " + pef.string() + " -b 8", &status);
  CHECK(status == 2);  // test takes the PEF's batch: -b is not one of its flags
  const std::string run_batch = run("lenet run --pef " + pef.string() + " -b 8", &status);
  CHECK(status == 1);
  CHECK(contains(run_batch,
                 "was compiled for batch size 1; this run has batch size 8: compile "
                 "again with -b 8"));
  const std::string classes = run("lenet run --pef " + pef.string() + " --num-classes 12", &status);
  CHECK(status == 1);
  CHECK(contains(classes,
                 "was compiled with the model's num_classes 10; this run has "
                 "num_classes 12"));

  // A PEF whose graph is another's (as another ipuml's tracer would make it), sealed as valid.
  ipuml::sambanova::Pef p = ipuml::sambanova::read_pef(pef.string());
  p.graph_sha256 = std::string(64, 'a');
  const std::string forged = dir.file("forged.pef");
  ipuml::sambanova::write_pef(forged, p);
  const std::string graph = run("lenet run --pef " + forged, &status);
  CHECK(status == 1);
  CHECK(contains(graph, "was compiled for a step whose graph has SHA-256 "));
  CHECK(contains(graph, "(the model or its options changed): compile again"));

  // A flipped byte and a truncated file: refused by read_pef, whatever the subcommand.
  const std::string flipped = dir.file("flipped.pef");
  fs::copy_file(pef, flipped);
  flip_byte(flipped, static_cast<std::streamoff>(fs::file_size(flipped) / 2));
  for (const char* sub : {"run", "test", "measure-performance"}) {
    const std::string bad = run(std::string("lenet ") + sub + " --pef " + flipped, &status);
    INFO(sub << ": " << bad);
    CHECK(status == 1);
    CHECK(contains(bad, "read_pef '" + flipped + "': corrupt"));
  }
  const std::string truncated = dir.file("truncated.pef");
  fs::copy_file(pef, truncated);
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  const std::string cut = run("lenet run --pef " + truncated, &status);
  CHECK(status == 1);
  CHECK(contains(cut, "read_pef '" + truncated + "': truncated"));

  // Bad command lines: exit 2 and one line.
  CHECK(contains(run("lenet run", &status), "run needs --pef FILE"));
  CHECK(status == 2);
  CHECK(contains(run("lenet compile -b 0", &status), "--batch-size: must be an integer from 1"));
  CHECK(status == 2);
  CHECK(contains(run("resnet compile", &status), "unknown model 'resnet' (expected lenet"));
  CHECK(status == 2);
  CHECK(contains(run("compile -b 1", &status), "the model is required"));
  CHECK(status == 2);
  CHECK(contains(run("lenet compile -ws 2", &status), "-ws 2 needs --data-parallel"));
  CHECK(status == 2);
  CHECK(contains(run("lenet compile --num-features 3", &status),
                 "--num-features is not a flag of lenet (its flags: --num-classes"));
  CHECK(status == 2);
}

// GPT-2 XL (1.56 billion parameters) at sequence 1024 and batch 16 on 4 tiles of an SN30, as the
// ALCF guide runs it: sized on the meta device in a few seconds and a few hundred MB; its
// training is refused with the reason, and measure-performance says why it times nothing here.
TEST_CASE("sambanova app: gpt2 xl is sized on the meta device", "[sambanova][example][gpt2]") {
  if (!built()) return;
  ipuml::testing::TempDir dir("ipuml_test_sambanova_gpt2");
  int status = -1;
  const std::string out = dir.file("pef");
  const std::string compiled = ipuml::testing::run_command(
      "/usr/bin/time -f 'max RSS %M KB' " + kExe.string() +
          " gpt2 compile --model-size xl --max_seq_length 1024 -b 16 --num-tiles 4 "
          "--output-folder " +
          out + " 2>&1",
      &status);
  INFO(compiled);
  REQUIRE(status == 0);
  CHECK(contains(compiled, "Sections on sn30 (4 tiles, o1)"));
  CHECK(contains(compiled, "Fit: fits ("));
  CHECK(contains(compiled, "18.69 GB of it weights and optimizer state"));  // 1.56e9 x 12 B
  CHECK(contains(compiled, "Mode: training (forward, loss, backward and the AdamW update), fp32"));
  CHECK(count(compiled, std::regex(R"(Projected: [0-9.]+ samples/s per instance)")) == 1);
  std::smatch m;
  if (std::regex_search(compiled, m, std::regex(R"(max RSS ([0-9]+) KB)")))
    CHECK(std::stoll(m[1]) < 1024 * 1024);  // far below its 6.2 GB of float32 weights
  const std::string pef = (fs::path(out) / "gpt2" / "gpt2.pef").string();
  const std::string measured = run("gpt2 measure-performance --pef " + pef, &status);
  INFO(measured);
  CHECK(status == 0);
  CHECK(count(measured, std::regex(R"(Simulated on the RDU: latency [0-9.]+ ms per batch)")) == 1);
  CHECK(contains(measured, "Wall-clock here: not measured: one step of its 1 instance is "));
  const std::string trained = run("gpt2 run --pef " + pef, &status);
  CHECK(status == 1);
  CHECK(contains(trained, "gpt2 is sized here, not trained"));
}
