// ipuml's programs (src/tools and examples) keep one command-line contract: --version prints
// the library's version, a usage error exits 2 with one line naming the program once and saying
// what the option wants, options are checked before anything is printed, and a failure while
// running exits 1.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ipuml/version.hpp>

#include "../support/run_command.hpp"
#include "../support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

// The programs the build installs, as tests/CMakeLists.txt lists them.
std::vector<fs::path> programs() {
  std::ifstream f(IPUML_PROGRAM_LIST);
  REQUIRE(static_cast<bool>(f));
  std::vector<fs::path> out;
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) out.emplace_back(line);
  return out;
}

// Whether this build makes the example programs (the sanitizer build leaves them out).
constexpr bool kExamplesBuilt = IPUML_EXAMPLES_BUILT;

fs::path program(const std::string& name) {
  for (auto& p : programs())
    if (p.filename() == name) return p;
  // An example of a build without examples: a path that does not exist, which built() skips.
  if (!kExamplesBuilt) return fs::path(IPUML_BINARY_DIR) / "examples-not-built" / name;
  FAIL("no program " << name << " in " << IPUML_PROGRAM_LIST);
  return {};
}

struct Result {
  int status = -1;
  std::string out;
  size_t lines() const { return static_cast<size_t>(std::count(out.begin(), out.end(), '\n')); }
};

Result run(const fs::path& exe, const std::string& args) {
  Result r;
  // Appended piece by piece: GCC 12 warns (-Wrestrict) on "'" + std::string temporaries.
  std::string cmd = "'";
  cmd += exe.string();
  cmd += "' ";
  cmd += args;
  cmd += " </dev/null";
  r.out = ipuml::testing::run_command(cmd, &r.status);
  return r;
}

// A usage error: status 2, one line "<name>: <what> (see <name> --help)", the name once.
void check_usage_error(const fs::path& exe, const std::string& args, const std::string& what) {
  const std::string name = exe.filename().string();
  INFO(name << " " << args);
  const Result r = run(exe, args);
  INFO(r.out);
  CHECK(r.status == 2);
  CHECK(r.lines() == 1);
  CHECK_THAT(r.out, Catch::StartsWith(name + ": ") && Catch::Contains(what) &&
                        Catch::EndsWith("(see " + name + " --help)\n"));
  CHECK(r.out.find(name + ": " + name) == std::string::npos);
}

bool built(const fs::path& exe) {
  if (fs::exists(exe)) return true;
  WARN(exe.filename().string() << " not built, skipping (" << exe << ")");
  return false;
}

}  // namespace

TEST_CASE("cli: version.hpp agrees with the CMake project", "[cli]") {
  CHECK(std::string(IPUML_VERSION_STRING) == IPUML_PROJECT_VERSION);
  CHECK(std::string(ipuml::version_string) == std::to_string(ipuml::version.major) + "." +
                                                  std::to_string(ipuml::version.minor) + "." +
                                                  std::to_string(ipuml::version.patch));
  CHECK(IPUML_VERSION ==
        ipuml::version.major * 10000 + ipuml::version.minor * 100 + ipuml::version.patch);
}

TEST_CASE("cli: every program has --version, --help and exits 2 on an unknown option", "[cli]") {
  const auto all = programs();
  // src/tools and, where the build makes them, the examples; ipuml-report included.
  std::vector<std::string> must = {"ipuml-info", "ipuml-run", "ipuml-report",
                                   "ipuml-cellspike-gen"};
  if (kExamplesBuilt)
    for (const char* e :
         {"ipuml-mnist", "ipuml-gpt2", "ipuml-bert", "ipuml-neuron-inverter", "ipuml-resnet"})
      must.emplace_back(e);
  CHECK(all.size() >= must.size());
  for (const auto& name : must)
    CHECK(std::any_of(all.begin(), all.end(),
                      [&](const fs::path& p) { return p.filename() == name; }));
  for (const auto& exe : all) {
    if (!built(exe)) continue;
    const std::string name = exe.filename().string();
    INFO(name);
    Result v = run(exe, "--version");
    CHECK(v.status == 0);
    CHECK(v.out == name + " (ipuml) " + IPUML_VERSION_STRING + "\n");
    Result h = run(exe, "--help");
    CHECK(h.status == 0);
    CHECK_THAT(h.out, Catch::Contains("--version"));
    // "-- x" fills a required positional (ipuml-run's command, ipuml-report's reports), so
    // that the unknown option is the error.
    check_usage_error(exe, "--no-such-option -- x", "not expected: ");
    check_usage_error(exe, "--no-such-option -- x", "--no-such-option");
  }
}

TEST_CASE("cli: ipuml-mnist checks its options before printing anything", "[cli]") {
  const fs::path exe = program("ipuml-mnist");
  if (!built(exe)) return;
  // CLI11's own validator said "Value 0 not in range 0.000000 to 1.797e308".
  check_usage_error(exe, "--epochs 0", "--epochs: must be an integer >= 1, got '0'");
  check_usage_error(exe, "--batch-size x", "--batch-size: must be an integer >= 1, got 'x'");
  check_usage_error(exe, "--lr -1", "--lr: must be a number >= 0, got '-1'");
  check_usage_error(exe, "--ipus 5", "--ipus: must be an integer from 1 to 4, got '5'");
  check_usage_error(exe, "--device gpu", "--device");
  // An unknown target field used to print the whole model first.
  check_usage_error(exe, "--set foo=1", "unknown field 'foo'");
  check_usage_error(exe, "--target nope", "unknown IPU target 'nope'");
  check_usage_error(exe, "--device eager --ipus 2", "need --device ipu or cpu");
  check_usage_error(exe, "--pipelined", "--pipelined needs --ipus >= 2");
  ipuml::testing::TempDir dir("ipuml_cli");
  std::ofstream(dir.file("file")) << "x";
  check_usage_error(exe, "--report-dir '" + dir.file("file") + "'", "is not a directory");
  // A failure while running (no data where --data-dir points) exits 1, the name once.
  const Result r = run(exe, "--data-dir '" + dir.file("nothing") + "' --epochs 1");
  CHECK(r.status == 1);
  CHECK_THAT(r.out, Catch::StartsWith("ipuml-mnist: "));
  CHECK(r.out.find("ipuml-mnist: ipuml-mnist:") == std::string::npos);
}

TEST_CASE("cli: the other programs' usage errors", "[cli]") {
  const fs::path gpt2 = program("ipuml-gpt2"), bert = program("ipuml-bert"),
                 ni = program("ipuml-neuron-inverter"), run_ = program("ipuml-run"),
                 gen = program("ipuml-cellspike-gen"), info = program("ipuml-info");
  if (built(gpt2)) {
    check_usage_error(gpt2, "--set foo=1", "unknown field 'foo'");
    check_usage_error(gpt2, "--enable-half-partials maybe", "expects True or False");
    check_usage_error(gpt2, "--val-sequences 0", "--val-sequences: must be an integer >= 1");
  }
  if (built(bert)) {
    check_usage_error(bert, "--set foo=1", "unknown field 'foo'");
    check_usage_error(bert, "--mask-tokens -2", "--mask-tokens: must be an integer >= 0");
  }
  if (built(ni)) {
    // The design's error used to read "ipuml-neuron-inverter: ipuml-neuron-inverter: no design".
    check_usage_error(ni, "--design nope", "no design 'nope'");
    check_usage_error(ni, "--epochs 0", "--epochs: must be an integer >= 1, got '0'");
    check_usage_error(ni, "--initLR 0", "--initLR: must be a number > 0, got '0'");
    check_usage_error(ni, "--set foo=1", "unknown field 'foo'");
  }
  if (built(run_)) {
    check_usage_error(run_, "--num-instances 0 -- true", "--num-instances: must be an integer");
    check_usage_error(run_, "--num-instances 2 --num-replicas 3 -- true",
                      "3 replicas do not divide evenly over 2 instances");
  }
  if (built(gen)) check_usage_error(gen, "--train 0", "--train: must be an integer >= 1, got '0'");
  if (built(info)) {
    check_usage_error(info, "--target nope", "unknown IPU target 'nope'");
    check_usage_error(info, "--set num_ipus=0", "num_ipus must be in [1, 4096], got 0");
  }
}
