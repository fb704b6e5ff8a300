// The profile viewer: one report directory per compiled program (training, weight update,
// evaluation), the Chrome/Perfetto trace checked against the executable's cycle counts, and
// ipuml-report's self-contained HTML page, rendered in headless Chromium where it is installed.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/ipu/ipu_backend.hpp>
#include <ipuml/backends/emu/report_html.hpp>
#include <ipuml/backends/emu/schedule.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/ir/stages.hpp>
#include <ipuml/runtime/block.hpp>

#include "../support/chromium.hpp"
#include "../support/png.hpp"
#include "../support/run_command.hpp"
#include "../support/temp_dir.hpp"

using namespace ipuml;
namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempDir;

namespace {

struct TowerImpl : nn::Module {
  nn::Linear l1{nullptr}, l2{nullptr}, head{nullptr};
  explicit TowerImpl(int64_t w) : nn::Module("Tower") {
    l1 = register_module("l1", nn::Linear(nn::LinearOptions(w, w)));
    l2 = register_module("l2", nn::Linear(nn::LinearOptions(w, w)));
    head = register_module("head", nn::Linear(nn::LinearOptions(w, 10)));
  }
  Tensor forward(const Tensor& x) override { return head(relu(l2(relu(l1(x))))); }
};
IPUML_MODULE(Tower);

Tower make_tower(int64_t w, bool split) {
  manual_seed(3);
  Tower t(w);
  if (split) runtime::BeginBlock(t->l2, 1);
  return t;
}

runtime::LossFn ce() {
  return [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  REQUIRE(static_cast<bool>(f));
  return json::parse(f);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A training model with a separate weight-update program (gradient accumulation 2), and two
// evaluation programs of the same name, all reporting into `dir`.
void make_reports(const fs::path& dir) {
  Tower t = make_tower(32, false);
  optim::SGD opt(t->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  const Options base =
      Options().showCompilationProgressBar(false).autoReportDirectory(dir.string());
  auto train = trainingModel(t.ptr(), Options(base).gradientAccumulation(2), opt, ce());
  Generator gen(1);
  train(randn({32, 32}, &gen), randint(0, 10, {32}, &gen));
  for (int k = 0; k < 2; ++k) {
    auto eval = inferenceModel(t.ptr(), Options(base).modelName("evaluation"));
    eval(randn({16, 32}, &gen));
  }
}

const ipu::Executable& ipu_of(const backend::Executable* e) {
  const auto* ib = dynamic_cast<const ipu::IpuBackendExecutable*>(e);
  REQUIRE(ib != nullptr);
  return ib->program();
}

struct XEvent {
  std::string name, cat;
  int64_t pid = 0, tid = 0;
  double ts = 0, dur = 0;
  json args;
};

// Every "ph":"X" event, checked for the trace-event format's fields on the way.
std::vector<XEvent> x_events(const json& tr) {
  REQUIRE(tr.contains("traceEvents"));
  REQUIRE(tr["traceEvents"].is_array());
  std::vector<XEvent> out;
  for (auto& e : tr["traceEvents"]) {
    REQUIRE(e.contains("ph"));
    if (e["ph"] == "M") {
      CHECK(e["args"].contains("name") != e["args"].contains("sort_index"));
      continue;
    }
    REQUIRE(e["ph"] == "X");
    for (const char* k : {"name", "cat", "pid", "tid", "ts", "dur", "args"}) REQUIRE(e.contains(k));
    XEvent x{e["name"], e["cat"], e["pid"], e["tid"], e["ts"], e["dur"], e["args"]};
    CHECK(x.ts >= 0);
    CHECK(x.dur > 0);
    out.push_back(std::move(x));
  }
  return out;
}

std::string tool(const std::string& name) {
  return (fs::path(IPUML_BINARY_DIR) / "src" / "tools" / name).string();
}

}  // namespace

TEST_CASE("profile reports: one directory per compiled program, none overwriting another",
          "[ipu][profile]") {
  TempDir dir("ipuml_reports");
  make_reports(dir.path);
  for (const char* p : {"training", "weight_update", "evaluation", "evaluation_2"}) {
    INFO(p);
    CHECK(fs::exists(dir.path / p / "profile.json"));
    CHECK(fs::exists(dir.path / p / "trace.json"));
  }
  CHECK_FALSE(fs::exists(dir.path / "profile.json"));  // the layout before: one file, overwritten
  const json train = read_json(dir.path / "training" / "profile.json");
  const json update = read_json(dir.path / "weight_update" / "profile.json");
  const json eval = read_json(dir.path / "evaluation" / "profile.json");
  // Each is its own program: the step has forward and backward, the update streams nothing
  // in, the evaluation is the forward alone; each was rewritten after its first run.
  CHECK(train["graph"]["nodes"].get<int64_t>() > eval["graph"]["nodes"].get<int64_t>());
  CHECK(train["graph"]["inputs"] == 2);
  CHECK(update["graph"]["inputs"] == 0);
  CHECK(update["graph"]["states"].get<int64_t>() > 0);
  CHECK(eval["graph"]["inputs"] == 1);
  for (const json* j : {&train, &update, &eval}) CHECK((*j)["execution"]["runs"].size() == 1);
  const json trace = read_json(dir.path / "evaluation_2" / "trace.json");
  CHECK(trace["otherData"]["program"] == "evaluation");

  // Options.modelName names a training model's programs too.
  Tower t = make_tower(16, false);
  optim::SGD opt(t->parameters(), optim::SGDOptions(0.05));
  auto named = trainingModel(t.ptr(),
                             Options()
                                 .showCompilationProgressBar(false)
                                 .autoReportDirectory(dir.path.string())
                                 .modelName("mnist")
                                 .gradientAccumulation(2),
                             opt, ce());
  named(randn({16, 16}), randint(0, 10, {16}));
  CHECK(fs::exists(dir.path / "mnist" / "profile.json"));
  CHECK(fs::exists(dir.path / "mnist_weight_update" / "profile.json"));
  CHECK(ipu_of(named.step_executable()).report_directory() == (dir.path / "mnist").string());
}

TEST_CASE("profile trace: the supersteps of each IPU add up to its cycles", "[ipu][profile]") {
  // Two IPUs, sharded: IPU 0 runs l1, IPU 1 the rest, and the backward pass comes back.
  Tower t = make_tower(64, true);
  optim::SGD opt(t->parameters(), optim::SGDOptions(0.05));
  auto model = trainingModel(t.ptr(), Options().showCompilationProgressBar(false), opt, ce());
  model(randn({16, 64}), randint(0, 10, {16}));
  const ipu::Executable& exe = ipu_of(model.step_executable());
  const auto& plan = exe.plan();
  const auto& tgt = ipu::target_of(exe);
  REQUIRE(tgt.num_ipus == 2);
  const json tr = json::parse(exe.trace_json());
  CHECK(tr["otherData"]["view"] == "step");
  CHECK(tr["otherData"]["program"] == "training");
  const double us = 1e6 / tgt.clock_hz;
  const auto events = x_events(tr);

  std::map<int64_t, double> per_ipu;
  std::vector<const XEvent*> row0;
  int computes = 0;
  for (auto& e : events) {
    REQUIRE(e.pid >= 0);
    REQUIRE(e.pid < tgt.num_ipus);
    CHECK(e.dur == Approx(e.args["cycles"].get<double>() * us));
    if (e.tid == 0) {
      per_ipu[e.pid] += e.dur;
      row0.push_back(&e);
      computes += e.cat == "compute";
    } else {
      // A tile group computes exactly when its IPU's row shows that superstep computing.
      CHECK(e.cat == "compute");
      CHECK(e.tid >= 1);
      CHECK(e.tid <= 8);
      CHECK(e.args["units"].get<int64_t>() >= 1);
      const bool matched = std::any_of(events.begin(), events.end(), [&](const XEvent& o) {
        return o.tid == 0 && o.pid == e.pid && o.cat == "compute" && o.ts == e.ts &&
               o.dur == e.dur && o.name == e.name;
      });
      CHECK(matched);
    }
  }
  // Each IPU's row is its cycles of one step, phase by phase.
  for (int64_t i = 0; i < tgt.num_ipus; ++i) {
    INFO("IPU " << i);
    CHECK(per_ipu[i] == Approx(plan.cycles.per_device[static_cast<size_t>(i)].total() * us));
  }
  int with_compute = 0;
  for (auto& s : plan.supersteps) with_compute += s.compute > 0;
  CHECK(computes == with_compute);
  // The IPUs of a sharded program take turns: the rows never overlap, leave no gap, and end at
  // the step's cycles.
  std::sort(row0.begin(), row0.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
  REQUIRE_FALSE(row0.empty());
  CHECK(row0.front()->ts == 0);
  for (size_t k = 1; k < row0.size(); ++k)
    CHECK(row0[k]->ts == Approx(row0[k - 1]->ts + row0[k - 1]->dur).margin(1e-9));
  CHECK(row0.back()->ts + row0.back()->dur == Approx(plan.cycles.total * us));
  CHECK(tr["otherData"]["total_cycles"].get<double>() == Approx(plan.cycles.total));
  // Both IPUs compute; names carry the op and the node.
  CHECK(per_ipu.size() == 2);
  CHECK(std::any_of(events.begin(), events.end(),
                    [](const XEvent& e) { return e.name.rfind("MatMul #", 0) == 0; }));
}

TEST_CASE("profile trace: a pipelined program's stages over its micro-batches",
          "[ipu][pipeline][profile]") {
  Tower t = make_tower(64, true);
  optim::SGD opt(t->parameters(), optim::SGDOptions(0.05));
  const int64_t g = 4;
  auto model = trainingModel(
      t.ptr(),
      Options().showCompilationProgressBar(false).gradientAccumulation(g).setExecutionStrategy(
          runtime::ExecutionStrategy::Pipelined),
      opt, ce());
  model(randn({16 * g, 64}), randint(0, 10, {16 * g}));
  const ipu::Executable& exe = ipu_of(model.step_executable());
  REQUIRE(exe.pipelinable());
  const int S = exe.num_stages();
  REQUIRE(S == 3);
  const json tr = json::parse(exe.trace_json());
  CHECK(tr["otherData"]["view"] == "pipeline");
  CHECK(tr["otherData"]["micro_batches"] == g);
  CHECK(tr["otherData"]["stages"] == S);
  const double us = 1e6 / ipu::target_of(exe).clock_hz;
  const auto sc = ipu::stage_cycles(exe.graph(), exe.plan());
  const auto events = x_events(tr);
  // Every micro-batch passes every stage, on the IPU that holds it, for that stage's cycles.
  std::map<std::pair<int64_t, int64_t>, int> seen;  // (stage, micro-batch) -> events
  double end = 0;
  for (auto& e : events) {
    end = std::max(end, e.ts + e.dur);
    if (e.tid == 0) continue;
    const int64_t s = e.args["stage"], mb = e.args["micro_batch"];
    CHECK(e.tid == 1 + s);
    CHECK(e.args["pipeline_cycle"] == s + mb);
    CHECK(e.dur == Approx(sc[static_cast<size_t>(s)][static_cast<size_t>(e.pid)] * us));
    seen[{s, mb}]++;
  }
  for (int s = 0; s < S; ++s)
    for (int64_t mb = 0; mb < g; ++mb) CHECK(seen[{s, mb}] >= 1);
  // The schedule ends where the cycle model's pipelined schedule does.
  CHECK(end == Approx(exe.cycles_for(g, true) * us));
  CHECK(tr["otherData"]["total_cycles"].get<double>() == Approx(exe.cycles_for(g, true)));
  // On one IPU, the stages of a pipeline cycle run one after another.
  for (int64_t i = 0; i < 2; ++i) {
    std::vector<const XEvent*> mine;
    for (auto& e : events)
      if (e.pid == i && e.tid > 0) mine.push_back(&e);
    std::sort(mine.begin(), mine.end(), [](auto* a, auto* b) { return a->ts < b->ts; });
    for (size_t k = 1; k < mine.size(); ++k)
      CHECK(mine[k]->ts >= mine[k - 1]->ts + mine[k - 1]->dur - 1e-9);
  }
}

TEST_CASE("ipuml-report: one self-contained page of every program", "[profile][cli]") {
  const std::string exe = tool("ipuml-report");
  if (!fs::exists(exe)) {
    WARN("ipuml-report not built, skipping (" << exe << ")");
    return;
  }
  TempDir dir("ipuml_report_page");
  make_reports(dir.path / "report");
  int status = -1;
  const std::string out = testing::run_command(
      "'" + exe + "' '" + (dir.path / "report").string() + "' -o '" + dir.file("page.html") + "'",
      &status);
  CHECK(status == 0);
  CHECK_THAT(out, Catch::Contains("wrote") &&
                      Catch::Contains("evaluation evaluation_2 training weight_update"));
  const std::string html = read_text(dir.path / "page.html");
  // Self-contained: nothing to fetch (the SVG namespace is a name, not a request).
  for (const char* bad : {"src=", "href=", "url(", "@import", "fetch(", "XMLHttpRequest"})
    CHECK(html.find(bad) == std::string::npos);
  std::string rest = html;
  for (size_t at; (at = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;)
    rest.erase(at, 26);
  CHECK(rest.find("http") == std::string::npos);
  CHECK(rest.find("//cdn") == std::string::npos);
  // The embedded data holds each program's per-unit bytes as its profile says.
  const std::string open = "<script type=\"application/json\" id=\"ipuml-data\">";
  const size_t a = html.find(open);
  REQUIRE(a != std::string::npos);
  const size_t b = html.find("</script>", a);
  const json data = json::parse(html.substr(a + open.size(), b - a - open.size()));
  REQUIRE(data["programs"].size() == 4);
  for (auto& p : data["programs"]) {
    const json prof =
        read_json(dir.path / "report" / p["name"].get<std::string>() / "profile.json");
    CHECK(p["memory"]["per_unit"] == prof["memory"]["per_unit"]);
    CHECK(p["liveness"]["ops"].size() == prof["liveness"].size());
    CHECK(p["trace"]["events"].size() > 0);
  }
  for (const char* section :
       {"Memory by category", "Liveness over program steps", "Execution timeline",
        "\"Memory per \" + p.machine.unit", "\"Busiest \" + p.machine.unit + \"s\""})
    CHECK(html.find(section) != std::string::npos);
  // The per-unit sections take the machine's words: an IPU's page says tiles and IPUs.
  for (auto& p : data["programs"]) {
    CHECK(p["machine"]["unit"] == "tile");
    CHECK(p["machine"]["device"] == "IPU");
    CHECK(p["machine"]["units"] == 1472);
  }

  // A "</script>" inside the data (a program's name) cannot end the element early.
  ipu::ReportProgram p;
  p.name = "a</script><b>";
  p.profile_json = read_text(dir.path / "report" / "training" / "profile.json");
  const std::string odd = ipu::make_report_html({p}, "t<i>");
  CHECK(odd.find("a</script>") == std::string::npos);
  CHECK(odd.find("a<\\/script><b>") != std::string::npos);
  CHECK(odd.find("<title>t&lt;i&gt;</title>") != std::string::npos);

  // A profile of schema 1 (IPU profiles before the core spoke of units: per_tile, top_tiles
  // with tile and ipu, and at first no "machine") draws the same page data.
  const json v2 = read_json(dir.path / "report" / "training" / "profile.json");
  REQUIRE(v2["schema"] == "ipuml.profile/2");
  json v1 = v2;
  v1["schema"] = "ipuml.profile/1";
  auto& mem = v1["memory"];
  mem["per_tile"] = mem["per_unit"];
  mem.erase("per_unit");
  mem["top_tiles"] = mem["top_units"];
  mem.erase("top_units");
  for (auto& x : mem["top_tiles"]) {
    x["tile"] = x["unit"], x["ipu"] = x["device"];
    x.erase("unit"), x.erase("device");
  }
  auto page_data = [](const json& profile) {
    ipu::ReportProgram q;
    q.name = "training";
    q.profile_json = profile.dump();
    const std::string html = ipu::make_report_html({q});
    const std::string open = "<script type=\"application/json\" id=\"ipuml-data\">";
    const size_t a = html.find(open);
    const size_t b = html.find("</script>", a);
    return json::parse(html.substr(a + open.size(), b - a - open.size()))["programs"][0];
  };
  const json now = page_data(v2), before = page_data(v1);
  CHECK(before["memory"] == now["memory"]);
  CHECK(before["machine"] == now["machine"]);
  json oldest = v1;
  oldest.erase("machine");
  const json first = page_data(oldest);
  CHECK(first["memory"] == now["memory"]);
  CHECK(first["machine"]["unit"] == "tile");
  CHECK(first["machine"]["units"] == 1472);

  // Errors: a path without reports is a usage error (2), a file that is no profile fails (1).
  const std::string empty = dir.file("empty");
  fs::create_directories(empty);
  std::string msg = testing::run_command("'" + exe + "' '" + empty + "'", &status);
  CHECK(status == 2);
  CHECK_THAT(msg, Catch::StartsWith("ipuml-report: '" + empty + "' holds no profile.json"));
  CHECK(std::count(msg.begin(), msg.end(), '\n') == 1);
  std::ofstream(dir.file("bad.json")) << "{\"schema\": \"something else\"}";
  msg = testing::run_command(
      "'" + exe + "' '" + dir.file("bad.json") + "' -o '" + dir.file("bad.html") + "'", &status);
  CHECK(status == 1);
  CHECK_THAT(msg,
             Catch::Contains("is not an ipuml profile (expected \"schema\": \"ipuml.profile/2\""));
  CHECK_FALSE(fs::exists(dir.file("bad.html")));
}

TEST_CASE("ipuml-report: the page renders in headless Chromium, heat map and all",
          "[profile][cli][browser]") {
  const std::string exe = tool("ipuml-report");
  const std::string browser = testing::find_chromium();
  if (browser.empty() || !fs::exists(exe)) {
    WARN(
        "skipped: no Chromium on PATH (scripts/install-deps.sh --browser installs Debian's "
        "chromium) or ipuml-report not built");
    return;
  }
  int status = -1;
  TempDir dir("ipuml_report_png");
  make_reports(dir.path / "report");
  testing::run_command(
      "'" + exe + "' '" + (dir.path / "report").string() + "' -o '" + dir.file("page.html") + "'",
      &status);
  REQUIRE(status == 0);
  const std::string shot = dir.file("page.png");
  const std::string log =
      testing::screenshot(browser, dir.file("page.html"), shot, dir.file("profile"), 1200, 1400);
  INFO(log);
  REQUIRE(fs::exists(shot));
  const testing::Image img = testing::read_png(shot);
  REQUIRE(img.width == 1200);
  REQUIRE(img.height == 1400);
  // Not blank: many pixels are not the background, in many colours.
  size_t ink = 0;
  std::map<uint32_t, int> colours;
  for (auto& p : img.rgb) {
    ink += p[0] < 235 || p[1] < 235 || p[2] < 235;
    colours[(uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]]++;
  }
  CHECK(ink > img.rgb.size() / 20);
  CHECK(colours.size() > 50);
  // The heat map: a block of the viridis ramp (dark purple to yellow) the size of the tiles. A
  // training step on 1472 tiles leaves most of them nearly empty (dark purple), so look for a
  // large run of ramp colours in the top half of the page, where the heat map is drawn.
  const int ramp[9][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                          {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                          {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
  auto on_ramp = [&](const std::array<uint8_t, 3>& p) {
    for (int k = 0; k < 8; ++k)
      for (int s = 0; s <= 16; ++s) {
        double d = 0;
        for (int c = 0; c < 3; ++c) {
          const double v = ramp[k][c] + (ramp[k + 1][c] - ramp[k][c]) * s / 16.0;
          d += (p[static_cast<size_t>(c)] - v) * (p[static_cast<size_t>(c)] - v);
        }
        if (d < 16 * 16) return true;
      }
    return false;
  };
  size_t heat = 0;
  int first_row = -1;
  for (int y = 0; y < img.height / 2; ++y)
    for (int x = 0; x < img.width; ++x)
      if (on_ramp(img.at(x, y))) {
        ++heat;
        if (first_row < 0) first_row = y;
      }
  // 1472 tiles of 8 x 8 pixels drawn: 94 208 pixels; ask for most of them.
  CHECK(heat > 60000);
  CHECK(first_row > 0);
}
