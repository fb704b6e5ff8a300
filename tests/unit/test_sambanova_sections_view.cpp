// The RDU's sections as reports show them: the sections.json a compiled program writes beside
// its profile, ipuml-report's sections view (a bar per section across the step, coloured by what
// bounds it, and the slowest sections' PCUs, PMUs and DDR traffic), which refuses a damaged plan
// by name, and the page drawn in headless Chromium.
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/emu/report_html.hpp>
#include <ipuml/ipuml.hpp>

#include "../support/chromium.hpp"
#include "../support/error_of.hpp"
#include "../support/png.hpp"
#include "../support/temp_dir.hpp"

using namespace ipuml;
using testing::error_of;
namespace fs = std::filesystem;

namespace {

struct RduThreeImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr};
  RduThreeImpl() : nn::Module("RduThree") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(784, 256)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(256, 128)));
    l3 = register_module("l3", nn::Linear(nn::LinearOptions(128, 10)));
  }
  Tensor forward(const Tensor& x) override { return l3(relu(l2(relu(l1(x))))); }
};
IPUML_MODULE(RduThree);

// Compiles a training step of RduThree on an SN30's 4 tiles in o0 (a section per operator: some
// bound by their loading, some by DDR, the matrix products by compute) with reports in `report`.
void compile_with_reports(const std::string& report) {
  manual_seed(3);
  RduThree model;
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1));
  Options o;
  o.showCompilationProgressBar(false)
      .backend("sambanova")
      .backendOption("sambanova", "num_tiles", "4")
      .backendOption("sambanova", "optimization", "o0")
      .backendOption("sambanova", "target_overrides", "ddr_bytes_per_second=2e9")
      .autoReportDirectory(report)
      .compileOnly(true);
  auto tm = trainingModel(model.ptr(), o, sgd,
                          [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); });
  (void)tm.estimate(zeros({4096, 784}), zeros({4096}, kInt64));
}

}  // namespace

TEST_CASE("sambanova sections view: sections.json and ipuml-report's sections view",
          "[sambanova][profile]") {
  testing::TempDir dir("ipuml_rdu_sections");
  const std::string report = dir.file("report");
  compile_with_reports(report);
  const fs::path file = fs::path(report) / "training" / "sections.json";
  REQUIRE(fs::exists(file));
  const auto j = nlohmann::json::parse(std::ifstream(file));
  CHECK(j.at("schema") == "ipuml.sections/1");
  CHECK(j.at("optimization") == "o0");
  CHECK(j.at("sections").size() >= 10);
  std::set<std::string> bounds;
  for (auto& s : j.at("sections")) bounds.insert(s.at("bound").get<std::string>());
  CHECK(bounds.size() >= 2);

  const auto programs = emu::load_report_programs(report);
  REQUIRE(programs.size() == 1);
  const std::string html = emu::make_report_html(programs);
  CHECK(html.find("\"sections\":{") != std::string::npos);
  CHECK(html.find("Sections: one after another") != std::string::npos);

  // A damaged sections.json is refused, naming the file or the program.
  std::ofstream(file) << "{\"schema\": \"ipuml.sections/1\", \"sections\": [{}";
  CHECK(error_of([&] { emu::load_report_programs(report); }).find("sections.json") !=
        std::string::npos);
  std::ofstream(file) << "{\"schema\": \"something/1\"}";
  CHECK(error_of([&] { emu::load_report_programs(report); }).find("not an ipuml section plan") !=
        std::string::npos);
  auto bad = j;
  bad["sections"][0]["bound"] = "magic";
  std::ofstream(file) << bad.dump();
  CHECK(error_of([&] {
          emu::make_report_html(emu::load_report_programs(report));
        }).find("the section plan of program 'training' has a section bound by 'magic'") !=
        std::string::npos);
  bad = j;
  bad["slowest"] = 9999;
  std::ofstream(file) << bad.dump();
  CHECK(error_of([&] {
          emu::make_report_html(emu::load_report_programs(report));
        }).find("names a slowest section it does not have") != std::string::npos);
  bad = j;
  bad["sections"][0].erase("compute_units");
  std::ofstream(file) << bad.dump();
  CHECK(error_of([&] {
          emu::make_report_html(emu::load_report_programs(report));
        }).find("lacks a field the sections view needs") != std::string::npos);
}

TEST_CASE("sambanova sections view: the page draws the sections in headless Chromium",
          "[sambanova][browser]") {
  const std::string browser = testing::find_chromium();
  if (browser.empty()) {
    WARN("skipped: no Chromium on PATH (scripts/install-deps.sh --browser installs it)");
    return;
  }
  testing::TempDir dir("ipuml_rdu_png");
  const std::string report = dir.file("report");
  compile_with_reports(report);
  std::ofstream(dir.file("page.html")) << emu::make_report_html(emu::load_report_programs(report));
  const std::string shot = dir.file("page.png");
  const std::string log =
      testing::screenshot(browser, dir.file("page.html"), shot, dir.file("profile"), 1000, 1400);
  INFO(log);
  REQUIRE(fs::exists(shot));
  const testing::Image img = testing::read_png(shot);
  // The bar across the step: pixels in the compute, DDR and loading colours.
  auto near = [](const std::array<uint8_t, 3>& p, int r, int g, int b) {
    return std::abs(p[0] - r) < 12 && std::abs(p[1] - g) < 12 && std::abs(p[2] - b) < 12;
  };
  size_t compute = 0, ddr = 0, load = 0;
  for (auto& p : img.rgb) {
    compute += near(p, 0x4c, 0x78, 0xa8);
    ddr += near(p, 0xf5, 0x85, 0x18);
    load += near(p, 0xb2, 0x79, 0xa2);
  }
  CHECK(compute + ddr + load > 900 * 20);
  CHECK(int(compute > 100) + int(ddr > 100) + int(load > 100) >= 2);
}
