// The wafer as reports show it (backends/cerebras/wafer_view.hpp): regions placed as contiguous
// runs of a serpentine, each its PEs to the cell, their utilisation at the pipeline's rate, the
// layout.json a compiled program writes beside its profile, and ipuml-report's wafer section,
// which refuses a damaged layout by name.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/cerebras/layer_pipeline.hpp>
#include <ipuml/backends/cerebras/wafer_view.hpp>
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

struct ThreeImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr};
  ThreeImpl() : nn::Module("Three") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(784, 256)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(256, 128)));
    l3 = register_module("l3", nn::Linear(nn::LinearOptions(128, 10)));
  }
  Tensor forward(const Tensor& x) override { return l3(relu(l2(relu(l1(x))))); }
};
IPUML_MODULE(Three);

cerebras::PipelineLayout mlp_layout(const cerebras::Target& t) {
  manual_seed(2);
  Three model;
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1));
  auto step = runtime::trace_training_step(
      *model, sgd,
      [&](const std::vector<Tensor>& in) { return cross_entropy(model(in[0]), in[1]); },
      {ir::TensorMeta{{64, 784}, DType::Float32}, ir::TensorMeta{{64}, DType::Int64}});
  return cerebras::plan_layer_pipeline(step.graph, t, 64);
}

// Compiles (or only estimates) a training step of Three on the CS-2 with reports in `report`.
void compile_with_reports(const std::string& report, bool compile_only) {
  manual_seed(3);
  Three model;
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.1));
  Options o;
  o.showCompilationProgressBar(false)
      .backend("cerebras")
      .autoReportDirectory(report)
      .compileOnly(compile_only);
  auto tm = trainingModel(model.ptr(), o, sgd,
                          [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); });
  if (compile_only)
    (void)tm.estimate(zeros({64, 784}), zeros({64}, kInt64));
  else
    tm(zeros({64, 784}), zeros({64}, kInt64));
}

}  // namespace

TEST_CASE("wafer view: regions are contiguous runs of cells sized by their PEs",
          "[cerebras][wafer]") {
  for (const std::string name : {"wse2", "tiny"}) {
    INFO(name);
    const auto t = cerebras::target_preset(name);
    const auto l = mlp_layout(t);
    REQUIRE(l.fits);
    const auto w = cerebras::place_regions(l, t);
    REQUIRE(w.columns == t.block_columns());
    REQUIRE(w.rows == t.block_rows());
    REQUIRE(w.region.size() == static_cast<size_t>(w.columns * w.rows));
    std::vector<int64_t> cells(l.kernels.size(), 0);
    for (auto r : w.region) {
      REQUIRE(r >= -1);
      REQUIRE(r < static_cast<int32_t>(l.kernels.size()));
      if (r >= 0) ++cells[static_cast<size_t>(r)];
    }
    const double per_cell = static_cast<double>(t.pes()) / static_cast<double>(t.blocks());
    for (size_t k = 0; k < l.kernels.size(); ++k) {
      // Its share of the wafer to the cell (cumulative rounding moves a boundary by at most one).
      const double want = static_cast<double>(l.kernels[k].pes) / per_cell;
      CHECK(static_cast<double>(cells[k]) >= std::floor(want) - 1);
      CHECK(static_cast<double>(cells[k]) <= std::ceil(want) + 1);
    }
    // Each region is one 4-connected piece of the grid.
    for (size_t k = 0; k < l.kernels.size(); ++k) {
      std::vector<int64_t> mine;
      for (size_t i = 0; i < w.region.size(); ++i)
        if (w.region[i] == static_cast<int32_t>(k)) mine.push_back(static_cast<int64_t>(i));
      if (mine.empty()) continue;
      // Flood fill from its first cell over its own cells.
      const std::set<int64_t> all(mine.begin(), mine.end());
      std::set<int64_t> seen{mine[0]};
      std::vector<int64_t> stack{mine[0]};
      while (!stack.empty()) {
        const int64_t c = stack.back();
        stack.pop_back();
        const int64_t x = c % w.columns, y = c / w.columns;
        for (auto [dx, dy] : {std::pair{1, 0}, {-1, 0}, {0, 1}, {0, -1}}) {
          const int64_t nx = x + dx, ny = y + dy, nc = ny * w.columns + nx;
          if (nx >= 0 && ny >= 0 && nx < w.columns && ny < w.rows && all.count(nc) &&
              seen.insert(nc).second)
            stack.push_back(nc);
        }
      }
      CHECK(seen.size() == mine.size());
    }
  }
}

TEST_CASE("wafer view: utilisation is each region's share of the slowest's time",
          "[cerebras][wafer]") {
  const auto t = cerebras::target_preset("wse2");
  const auto l = mlp_layout(t);
  REQUIRE(l.fits);
  double busy = 0;
  for (size_t k = 0; k < l.kernels.size(); ++k) {
    const auto& r = l.kernels[k];
    CHECK(cerebras::region_utilisation(l, k) == Approx(r.cycles_per_sample / l.sample_cycles));
    CHECK(cerebras::region_utilisation(l, k) <= 1.0 + 1e-12);
    busy += static_cast<double>(r.pes) * r.cycles_per_sample;
  }
  CHECK(cerebras::region_utilisation(l, static_cast<size_t>(l.slowest)) == 1.0);
  CHECK(cerebras::wafer_utilisation(l) ==
        Approx(busy / (static_cast<double>(t.pes()) * l.sample_cycles)));
  CHECK(cerebras::wafer_utilisation(l) > 0);
  CHECK(cerebras::wafer_utilisation(l) <= 1.0);

  const auto j = nlohmann::json::parse(
      cerebras::layout_json(t, cerebras::ExecutionMode::Pipelined, "because", l));
  CHECK(j.at("schema") == "ipuml.layout/1");
  CHECK(j.at("mode") == "pipeline");
  CHECK(j.at("why") == "because");
  CHECK(j.at("regions").size() == l.kernels.size());
  CHECK(j.at("slowest") == l.slowest);
  CHECK(j.at("grid").at("cells").size() == static_cast<size_t>(t.blocks()));
  const auto ws = nlohmann::json::parse(
      cerebras::layout_json(t, cerebras::ExecutionMode::WeightStreaming, "num_csx=2", {}));
  CHECK(ws.at("mode") == "weight_streaming");
  CHECK(ws.at("regions").empty());
  CHECK(ws.at("note").get<std::string>().find("whole wafer") != std::string::npos);
}

TEST_CASE("wafer view: a compiled program's layout.json and ipuml-report's wafer section",
          "[cerebras][wafer][profile]") {
  testing::TempDir dir("ipuml_wafer_view");
  const std::string report = dir.file("report");
  compile_with_reports(report, false);
  const fs::path layout = fs::path(report) / "training" / "layout.json";
  REQUIRE(fs::exists(layout));
  const auto j = nlohmann::json::parse(std::ifstream(layout));
  CHECK(j.at("mode") == "pipeline");
  CHECK(j.at("regions").size() >= 6);

  const auto programs = emu::load_report_programs(report);
  REQUIRE(programs.size() == 1);
  const std::string html = emu::make_report_html(programs);
  CHECK(html.find("\"layout\":{") != std::string::npos);
  CHECK(html.find("The wafer: a region per kernel") != std::string::npos);

  // A damaged layout.json is refused, naming the file or the program.
  std::ofstream(layout) << "{\"schema\": \"ipuml.layout/1\", \"regions\": [{}]";
  CHECK(error_of([&] { emu::load_report_programs(report); }).find("layout.json") !=
        std::string::npos);
  std::ofstream(layout) << "{\"schema\": \"something/1\"}";
  CHECK(error_of([&] { emu::load_report_programs(report); }).find("not an ipuml layout") !=
        std::string::npos);
  auto bad = j;
  bad["grid"]["cells"][0] = 999;
  std::ofstream(layout) << bad.dump();
  const std::string e = error_of([&] { emu::make_report_html(emu::load_report_programs(report)); });
  CHECK(e.find("the layout of program 'training' has a cell naming no region") !=
        std::string::npos);
}

TEST_CASE("wafer view: the page draws the wafer in headless Chromium",
          "[cerebras][wafer][browser]") {
  const std::string browser = testing::find_chromium();
  if (browser.empty()) {
    WARN("skipped: no Chromium on PATH (scripts/install-deps.sh --browser installs it)");
    return;
  }
  testing::TempDir dir("ipuml_wafer_png");
  const std::string report = dir.file("report");
  compile_with_reports(report, true);
  std::ofstream(dir.file("page.html")) << emu::make_report_html(emu::load_report_programs(report));
  const std::string shot = dir.file("page.png");
  const std::string log =
      testing::screenshot(browser, dir.file("page.html"), shot, dir.file("profile"), 1000, 1400);
  INFO(log);
  REQUIRE(fs::exists(shot));
  const testing::Image img = testing::read_png(shot);
  // The wafer's 93 x 124 cells of 6 pixels, each region its own colour: a large block of
  // saturated pixels in many colours below the summary.
  std::set<uint32_t> colours;
  size_t saturated = 0;
  for (auto& p : img.rgb) {
    const int hi = std::max({p[0], p[1], p[2]}), lo = std::min({p[0], p[1], p[2]});
    if (hi - lo < 60) continue;
    ++saturated;
    colours.insert((uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]);
  }
  CHECK(saturated > 93 * 124 * 30);
  CHECK(colours.size() >= 6);
}
