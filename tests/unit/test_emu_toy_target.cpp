// A second target of the emulator core, made up for this test: a 2-D mesh of 8 x 8 units with
// its own cost model (a compute rate per unit, exchange by bytes plus the mesh's diameter in
// hops, devices that overlap rather than take turns). It plans, accounts and runs graphs through
// the same planner, executor and reports as the IPU, and registers as a backend ("mesh-toy"), so
// the conformance suite (tests/conformance) runs every op family and a training step on it too.
// What it shows: nothing in the core assumes an IPU; every cost and memory term it charges comes
// from the target model.
#include <array>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/emu/backend_executable.hpp>
#include <ipuml/backends/emu/executor.hpp>
#include <ipuml/backends/emu/backend_options.hpp>
#include <ipuml/backends/emu/report_html.hpp>
#include <ipuml/backends/emu/target_model.hpp>
#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/mnist_cnn.hpp>

#include "../support/ipu_options.hpp"
#include "../support/mnist_step.hpp"

using namespace ipuml;

namespace {

// The toy's parameters: every number of its cost model.
struct MeshParams {
  int64_t devices = 1;
  int64_t columns = 8, rows = 8;
  int64_t bytes_per_unit = 512 * 1024;
  double clock_hz = 1e9;
  double matrix_flops_per_cycle = 8, vector_flops_per_cycle = 2, bytes_per_cycle = 16;
  double link_bytes_per_cycle = 8;  // into one unit from its neighbours
  double launch_cycles = 4;
  double barrier_cycles = 500;  // across devices and with the host
  double host_bytes_per_cycle = 4;
  int64_t stack_bytes = 1024;
  double extra_program_cycles = 0;  // added by program_cycles (a test of who combines steps)
  bool line = false;  // the same units told to the core as a line (no mesh): placement's test
};

class MeshModel final : public emu::TargetModel {
 public:
  explicit MeshModel(MeshParams p = {}) : p_(p) {
    m_.name = "mesh8x8";
    m_.devices = p.devices;
    m_.units_per_device = p.columns * p.rows;
    m_.bytes_per_unit = p.bytes_per_unit;
    m_.clock_hz = p.clock_hz;
    m_.alignment_bytes = 4;
    m_.mesh_columns = p.line ? 0 : p.columns;
  }
  // What the core asked, by hook (atomic: a model may be asked from several threads).
  enum Hook { kCompute, kExchange, kSync, kHost, kTerms, kProgram, kHooks };
  mutable std::array<std::atomic<int64_t>, kHooks> calls{};

  const emu::Machine& machine() const override { return m_; }
  std::string describe() const override {
    return "mesh8x8: " + std::to_string(p_.devices) + " device(s) x 8 x 8 units";
  }
  std::string to_json() const override {
    nlohmann::json j = {{"name", m_.name},
                        {"devices", p_.devices},
                        {"matrix_flops_per_cycle", p_.matrix_flops_per_cycle},
                        {"vector_flops_per_cycle", p_.vector_flops_per_cycle},
                        {"stack_bytes", p_.stack_bytes}};
    return j.dump();
  }
  double compute_cycles(double flops, double bytes, DType, bool matrix, int64_t) const override {
    ++calls[kCompute];
    const double rate = matrix ? p_.matrix_flops_per_cycle : p_.vector_flops_per_cycle;
    return p_.launch_cycles + std::ceil(std::max(flops / rate, bytes / p_.bytes_per_cycle));
  }
  double exchange_cycles(double bytes) const override {
    return region_exchange_cycles(bytes, p_.columns, p_.rows);  // across the whole mesh
  }
  // Operands cross the region's diameter; a line of units (a mesh the core was not told of) is
  // laid along the mesh's rows, snaking, so a run of w units spans ceil(w / columns) rows.
  double region_exchange_cycles(double bytes, int64_t width, int64_t height) const override {
    ++calls[kExchange];
    if (p_.line && height == 1 && width > p_.columns)
      height = (width + p_.columns - 1) / p_.columns, width = p_.columns;
    const double hops = static_cast<double>(width + height - 2);
    return bytes <= 0 ? 0.0 : std::ceil(bytes / p_.link_bytes_per_cycle) + hops;
  }
  double sync_cycles() const override {
    ++calls[kSync];
    return static_cast<double>(p_.columns + p_.rows);  // a wave across the mesh and back
  }
  double repeat_cycles() const override { return p_.launch_cycles; }
  double device_sync_cycles() const override { return p_.barrier_cycles; }
  double inter_device_cycles(double bytes) const override {
    return bytes <= 0 ? 0.0 : std::ceil(bytes / 16.0);
  }
  double host_cycles(double bytes, int64_t replicas) const override {
    (void)replicas;  // every replica has a link of its own
    ++calls[kHost];
    return bytes <= 0 ? 0.0 : std::ceil(bytes / p_.host_bytes_per_cycle);
  }
  double streaming_cycles(double bytes) const override { return std::ceil(bytes / 32.0); }
  // The mesh's own word for one category: the code that receives operands is its routes.
  std::string memory_category_name(int c) const override {
    return c == emu::kReceiveCode ? "routes" : emu::mem_category_name(c);
  }
  emu::MemoryTerms memory_terms() const override {
    ++calls[kTerms];
    emu::MemoryTerms t;
    t.code_bytes_matrix = 1024;
    t.code_bytes_vector = 256;
    t.state_bytes_per_field = 4;
    t.receive_code_bytes_per_transfer = 8;
    t.stack_bytes_per_unit = p_.stack_bytes;
    return t;
  }
  // Devices of a dataflow machine overlap: the slowest sets the step.
  double program_cycles(const std::vector<double>& per_device) const override {
    ++calls[kProgram];
    double m = 0;
    for (double c : per_device) m = std::max(m, c);
    return m + p_.extra_program_cycles;
  }
  double allreduce_cycles(double bytes, int64_t replicas, int64_t) const override {
    if (replicas <= 1) return 0;
    const double r = static_cast<double>(replicas);
    return std::ceil(2.0 * (r - 1.0) / r * bytes / 16.0) + 2.0 * (r - 1.0) * p_.barrier_cycles;
  }

 private:
  MeshParams p_;
  emu::Machine m_;
};

// The toy behind the backend interface: compiled programs run by the core's executor.
class MeshToyBackend : public backend::Backend {
 public:
  std::string name() const override { return "mesh-toy"; }
  std::vector<backend::DeviceInfo> devices() const override {
    backend::DeviceInfo d;
    d.name = "mesh8x8";
    d.description = MeshModel().describe();
    d.memory_bytes = static_cast<size_t>(MeshModel().machine().device_bytes());
    d.compute_units = 64;
    return {d};
  }
  bool supports(ir::OpKind) const override { return true; }
  using backend::Backend::compile;
  std::unique_ptr<backend::Executable> compile(
      const ir::Graph& graph, const backend::ProgramOptions& program,
      const backend::CompileOptions& options) const override {
    for (auto& [k, v] : options) fail("mesh-toy backend: unknown compile option '", k, "'");
    IPUML_CHECK(program.devices_per_replica == 1, "mesh-toy backend: one device per replica");
    emu::CompileOptions co = emu::compile_options_for(program, program.replicas);
    co.progress = false;
    return std::make_unique<emu::BackendExecutable>(
        emu::compile(graph, std::make_shared<const MeshModel>(), co), false);
  }
};
IPUML_REGISTER_BACKEND(MeshToyBackend);

std::vector<Tensor> copies(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (auto& t : ts) out.push_back(t.clone());
  return out;
}

}  // namespace

TEST_CASE("emu toy target: an 8 x 8 mesh plans and runs the MNIST CNN's training step", "[emu]") {
  auto tr = testing::mnist_step(8);
  auto model = std::make_shared<const MeshModel>();
  auto exe = emu::compile(tr.graph, model, testing::quiet());
  const emu::Plan& p = exe->plan();
  // The plan is the mesh's: 64 units, every piece of every op and value on one of them, every
  // unit's memory within its 512 KiB.
  CHECK(p.machine == model->machine());
  CHECK(p.target_json == model->to_json());
  REQUIRE(p.memory.units.size() == 64);
  CHECK_FALSE(p.memory.out_of_memory);
  for (auto& np : p.nodes) {
    CHECK(np.span.device == 0);
    CHECK(np.span.first_unit < 64);
    CHECK(np.span.parts <= 64);
  }
  for (auto& tm : p.memory.units) {
    CHECK(tm.total() <= 512 * 1024);
    CHECK(tm.bytes[emu::kStack] == 1024);  // the toy's stack, not the IPU's 7168
  }
  // The same numbers as the CPU executor, each from the same weights.
  Generator gen(4);
  Tensor x = randn({8, 1, 28, 28}, &gen), y = randint(0, 10, {8}, &gen);
  auto s_cpu = copies(tr.states), s_mesh = copies(tr.states);
  const float want = cpu::GraphExecutor(tr.graph).run({x, y}, s_cpu)[0].item<float>();
  const float got = exe->run({x, y}, s_mesh)[0].item<float>();
  CHECK(got == Approx(want).epsilon(1e-5));
  for (size_t i = 0; i < s_cpu.size(); ++i) {
    auto a = s_cpu[i].to_vector<float>(), b = s_mesh[i].to_vector<float>();
    for (size_t j = 0; j < a.size(); ++j) REQUIRE(b[j] == Approx(a[j]).epsilon(1e-5).margin(1e-6));
  }
  // Its reports: the profile names the mesh's shape, and the viewer draws it.
  const auto prof = nlohmann::json::parse(exe->profile_json());
  CHECK(prof.at("machine").at("name") == "mesh8x8");
  CHECK(prof.at("machine").at("units_per_device") == 64);
  CHECK(prof.at("machine").at("mesh_columns") == 8);
  CHECK(prof.at("target").at("matrix_flops_per_cycle") == 8);
  // Its memory categories in its own words (the core's, but for its routes), none of the IPU's.
  const auto& cats = prof.at("memory").at("categories");
  CHECK(cats.at("routes").get<int64_t>() > 0);
  CHECK(cats.at("kernel_state").get<int64_t>() > 0);
  CHECK_FALSE(cats.contains("receive_code"));
  CHECK_FALSE(cats.contains("exchange_code"));
  CHECK_FALSE(cats.contains("vertex_state"));
  const std::string html =
      emu::make_report_html({{"training", exe->profile_json(), exe->trace_json()}});
  CHECK_THAT(html, Catch::Contains("mesh8x8"));
  CHECK_THAT(html, Catch::Contains("Operations summary"));
  // Its peak, derived from its compute hook (8 matrix FLOPs per cycle per unit), measures each
  // op's fraction of peak: the summary's, over all the mesh's units.
  CHECK(model->peak_flops_per_cycle(kFloat32) == Approx(8.0).epsilon(1e-6));
  const auto& ops = prof.at("operation_summary");
  REQUIRE(ops.size() > 3);
  for (auto& x : ops) {
    INFO(x.at("op"));
    const double f = x.at("fraction_of_peak").get<double>();
    CHECK((f >= 0 && f <= 1));
    if (x.at("flops").get<double>() > 0 && x.at("cycles").get<double>() > 0)
      CHECK(f == Approx(x.at("flops").get<double>() /
                        (x.at("cycles").get<double>() * 64 * model->peak_flops_per_cycle(kFloat32)))
                     .epsilon(1e-9));
  }
  // The page's data: the mesh's shape and words, which its sections and heat map draw from.
  const std::string open = "<script type=\"application/json\" id=\"ipuml-data\">";
  const size_t at = html.find(open);
  REQUIRE(at != std::string::npos);
  const auto data = nlohmann::json::parse(
      html.substr(at + open.size(), html.find("</script>", at) - at - open.size()));
  const auto& shown = data.at("programs").at(0).at("machine");
  CHECK(shown.at("units") == 64);
  CHECK(shown.at("columns") == 8);
  CHECK(shown.at("unit") == "unit");
  CHECK(shown.at("device") == "device");
  std::ostringstream summary;
  exe->print_profile_summary(summary);
  CHECK_THAT(summary.str(), Catch::Contains("mesh8x8: 1 device(s) x 8 x 8 units"));
}

TEST_CASE("emu toy target: every cost and memory term the core charges is the target's", "[emu]") {
  auto tr = testing::mnist_step(4);
  auto base = std::make_shared<const MeshModel>();
  const emu::Plan a = emu::plan_graph(tr.graph, base, testing::quiet());
  for (int hook = 0; hook < MeshModel::kHooks; ++hook) {
    INFO("hook " << hook);
    CHECK(base->calls[static_cast<size_t>(hook)] > 0);
  }
  // How the devices' cycles combine is the target's to say.
  MeshParams extra;
  extra.extra_program_cycles = 12345;
  const emu::Plan b =
      emu::plan_graph(tr.graph, std::make_shared<const MeshModel>(extra), testing::quiet());
  CHECK(b.cycles.total == a.cycles.total + 12345);
  // A faster matrix engine makes the step cheaper in compute; nothing else it plans is slower.
  MeshParams fast;
  fast.matrix_flops_per_cycle = 64;
  const emu::Plan c =
      emu::plan_graph(tr.graph, std::make_shared<const MeshModel>(fast), testing::quiet());
  double ca = 0, cc = 0;
  for (auto& x : a.cycles.per_device) ca += x.compute;
  for (auto& x : c.cycles.per_device) cc += x.compute;
  CHECK(cc < ca);
  CHECK(c.cycles.total < a.cycles.total);
  // Memory: the stack the target asks for, on every unit.
  MeshParams big_stack;
  big_stack.stack_bytes = 4096;
  const emu::Plan d =
      emu::plan_graph(tr.graph, std::make_shared<const MeshModel>(big_stack), testing::quiet());
  for (size_t i = 0; i < d.memory.units.size(); ++i)
    CHECK(d.memory.units[i].bytes[emu::kStack] - a.memory.units[i].bytes[emu::kStack] == 3072);
  // And the plan of the same graph for an IPU is another one.
  const emu::Plan on_ipu = ipu::plan_graph(tr.graph, ipu::target_preset("ipu2"), testing::quiet());
  CHECK(on_ipu.memory.units.size() == 1472);
  CHECK(on_ipu.cycles.total != a.cycles.total);
  // A plan cached for one target is not taken for the other.
  CHECK_FALSE(emu::plan_fits_graph(tr.graph, *base, on_ipu));
  CHECK(emu::plan_fits_graph(tr.graph, *base, a));
}

TEST_CASE("emu toy target: the runtime trains the MNIST CNN on it like the CPU backend", "[emu]") {
  auto make = [] {
    manual_seed(7);
    return models::MnistCnn();
  };
  auto a = make(), b = make();
  optim::SGD oa(a->parameters(), optim::SGDOptions(0.05));
  optim::SGD ob(b->parameters(), optim::SGDOptions(0.05));
  auto loss = [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
  // The same seed: the dropout masks are drawn from it, the same on both.
  auto on_mesh = trainingModel(a.ptr(), Options().backend("mesh-toy").randomSeed(5), oa, loss);
  auto on_cpu = trainingModel(b.ptr(), Options().backend("cpu").randomSeed(5), ob, loss);
  Generator gen(8);
  for (int i = 0; i < 2; ++i) {
    Tensor x = randn({8, 1, 28, 28}, &gen), y = randint(0, 10, {8}, &gen);
    const float lm = on_mesh(x, y).item<float>(), lc = on_cpu(x, y).item<float>();
    CHECK(lm == Approx(lc).epsilon(1e-5));
  }
  auto pa = a->parameters(), pb = b->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto va = pa[i].to_vector<float>(), vb = pb[i].to_vector<float>();
    for (size_t k = 0; k < va.size(); ++k)
      REQUIRE(va[k] == Approx(vb[k]).epsilon(1e-4).margin(1e-6));
  }
  // Simulated time comes from the mesh's cost model, and the fit from its units.
  REQUIRE(on_mesh.last_stats().simulated_seconds.has_value());
  CHECK(*on_mesh.last_stats().simulated_seconds > 0);
  std::ostringstream summary;
  on_mesh.printProfileSummary(summary);
  CHECK_THAT(summary.str(), Catch::Contains("mesh8x8"));
}

TEST_CASE("emu toy target: its out-of-memory error speaks of its units and devices",
          "[emu][errors]") {
  MeshParams small;
  small.bytes_per_unit = 4096;
  Tensor w = zeros({512, 512});
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{256, 512}, kFloat32}, "x");
  tracer.name_state(w, "weight");
  auto tr = tracer.finish({matmul(x, w)});
  try {
    emu::plan_graph(tr.graph, std::make_shared<const MeshModel>(small), testing::quiet());
    FAIL("a 1 MB weight fitted 64 units of 4 KiB");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("Out of memory on unit"));
    CHECK_THAT(m, Catch::Contains("units only have 4096 bytes"));
    CHECK_THAT(m, Catch::Contains("target mesh8x8, device 0"));
    CHECK_THAT(m, !Catch::Contains("IPU") && !Catch::Contains("tile"));
  }
}

// The core's code without its comments: what it names, in identifiers and strings.
static std::string without_comments(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "//") == 0) {
      i = std::min(text.size(), text.find('\n', i));
    } else if (text.compare(i, 2, "/*") == 0) {
      const size_t end = text.find("*/", i + 2);
      i = end == std::string::npos ? text.size() : end + 2;
    } else if (text[i] == '"' || text[i] == '\'') {
      // A literal is kept whole, so a "//" inside it starts no comment.
      const char q = text[i];
      size_t j = i + 1;
      while (j < text.size() && text[j] != q) j += text[j] == '\\' ? 2 : 1;
      out.append(text, i, std::min(text.size(), j + 1) - i);
      i = j + 1;
    } else {
      out += text[i++];
    }
  }
  return out;
}

TEST_CASE("emu core: nothing in backends/emu includes an IPU header or names the IPU's words",
          "[emu]") {
  namespace fs = std::filesystem;
  const fs::path core = fs::path(IPUML_SOURCE_DIR) / "backends" / "emu";
  const std::regex ipu_include(R"(#include\s*<ipuml/backends/ipu/)");
  const std::regex ipu_name(R"(\bipu::|\bIpuModel\b)");
  // IPU and tile in any identifier, JSON key or message (ipuml, the library's own name, aside);
  // profiles of schema 1 were IPU profiles, and reading them names their keys.
  const std::regex ipu_word(R"([A-Za-z0-9_]*([Ii][Pp][Uu](?![Mm][Ll])|[Tt]iles?)[A-Za-z0-9_]*)");
  const std::set<std::string> schema1_keys{"per_tile", "top_tiles",     "tile",           "ipu",
                                           "num_ipus", "tiles_per_ipu", "bytes_per_tile", "IPU"};
  int files = 0;
  for (const auto& f : fs::directory_iterator(core)) {
    std::ifstream in(f.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(f.path().string());
    CHECK_FALSE(std::regex_search(text, ipu_include));
    CHECK_FALSE(std::regex_search(text, ipu_name));
    const std::string code = without_comments(text);
    std::vector<std::string> words;
    for (auto it = std::sregex_iterator(code.begin(), code.end(), ipu_word);
         it != std::sregex_iterator(); ++it)
      if (!schema1_keys.count(it->str()) || f.path().filename() != "report_html_impl.hpp")
        words.push_back(it->str());
    CHECK(words == std::vector<std::string>{});
    ++files;
  }
  CHECK(files >= 17);
  // The comment stripper itself: a "//" inside a string is code.
  CHECK(without_comments("a // b\nc /* d */ \"e // f\"") == "a \nc  \"e // f\"");
}

TEST_CASE("emu placement: regions are lines on a line machine and near-square rectangles on a mesh",
          "[emu]") {
  emu::Machine line;
  line.units_per_device = 64;
  const auto l = emu::region_shape(line, 10);
  CHECK((l.width == 10 && l.height == 1));
  CHECK(emu::region_origin(line, l, 60) == 60);  // a line wraps
  emu::Machine mesh = line;
  mesh.mesh_columns = 8;
  auto shape = [&](int64_t parts) {
    const auto r = emu::region_shape(mesh, parts);
    return std::pair<int64_t, int64_t>{r.width, r.height};
  };
  CHECK(shape(1) == std::pair<int64_t, int64_t>{1, 1});
  CHECK(shape(3) == std::pair<int64_t, int64_t>{2, 2});
  CHECK(shape(10) == std::pair<int64_t, int64_t>{4, 3});
  CHECK(shape(15) == std::pair<int64_t, int64_t>{4, 4});
  // A quarter of the mesh or more: a band of whole rows, which wraps from the last row.
  CHECK(shape(16) == std::pair<int64_t, int64_t>{8, 2});
  CHECK(shape(64) == std::pair<int64_t, int64_t>{8, 8});
  CHECK(emu::region_origin(mesh, {8, 2}, 6 * 8) == 6 * 8);
  CHECK(emu::region_origin(mesh, {8, 2}, 6 * 8 + 3) == 7 * 8);
  CHECK(emu::region_origin(mesh, {8, 2}, 7 * 8 + 3) == 0);
  emu::UnitSpan band{0, 7 * 8, 16, 16, 1, 8, 8};
  CHECK(band.unit(7, 64) == 63);
  CHECK(band.unit(8, 64) == 0);  // past the last row: the first
  // A rectangle starts where it fits: the next row when too wide, the corner when too tall.
  CHECK(emu::region_origin(mesh, {4, 4}, 3) == 3);
  CHECK(emu::region_origin(mesh, {4, 4}, 6) == 8);
  CHECK(emu::region_origin(mesh, {4, 4}, 5 * 8 + 2) == 0);
  // A wide, short mesh: no taller than its 2 rows, and 100 of its 128 units a band.
  emu::Machine strip = line;
  strip.units_per_device = 128;
  strip.mesh_columns = 64;
  const auto s = emu::region_shape(strip, 30);
  CHECK((s.width == 15 && s.height == 2));
  const auto b = emu::region_shape(strip, 100);
  CHECK((b.width == 64 && b.height == 2));
}

TEST_CASE("emu toy target: a mesh places every op and tensor on a rectangle of its units",
          "[emu]") {
  auto tr = testing::mnist_step(8);
  auto mesh = std::make_shared<const MeshModel>();
  const emu::Plan p = emu::plan_graph(tr.graph, mesh, testing::quiet());
  auto inside = [](const emu::UnitSpan& sp) {
    INFO("first unit " << sp.first_unit << ", " << sp.parts << " parts, width " << sp.width);
    REQUIRE(sp.width >= 1);
    CHECK(sp.columns == 8);
    const auto r = sp.shape();
    const int64_t row0 = sp.first_unit / 8, col0 = sp.first_unit % 8;
    CHECK(col0 + r.width <= 8);
    const bool band = r.width == 8;  // whole rows, which may wrap from the last to the first
    CHECK((band ? r.height <= 8 : row0 + r.height <= 8));
    if (band) CHECK(col0 == 0);
    // Its parts fill the rectangle row by row, each on a unit of its own.
    std::set<int32_t> units;
    for (int64_t q = 0; q < sp.parts; ++q) {
      const int32_t u = sp.unit(q, 64);
      CHECK((u / 8 - row0 + 8) % 8 == q / r.width);
      CHECK(u % 8 - col0 == q % r.width);
      units.insert(u);
    }
    CHECK(units.size() == static_cast<size_t>(sp.parts));
  };
  int64_t rectangles = 0;
  for (auto& np : p.nodes) {
    inside(np.span);
    rectangles += np.span.shape().height > 1;
  }
  for (auto& v : p.values) inside(v.span);
  CHECK(rectangles > 0);  // ops over several rows, not only runs along one
  // A plan read back from its JSON keeps the rectangles, and is checked against the mesh.
  CHECK(emu::plan_fits_graph(tr.graph, *mesh, p));
  emu::Plan bad = p;
  bad.nodes[0].span.first_unit = 7;  // a rectangle hanging over the mesh's edge
  bad.nodes[0].span.width = 4;
  CHECK_FALSE(emu::plan_fits_graph(tr.graph, *mesh, bad));
  // The same units as a line: runs of up to 64 units, which on this mesh snake over its rows
  // and cross more of it. The mesh's rectangles exchange in fewer cycles.
  MeshParams as_line;
  as_line.line = true;
  const emu::Plan q =
      emu::plan_graph(tr.graph, std::make_shared<const MeshModel>(as_line), testing::quiet());
  for (auto& np : q.nodes) CHECK(np.span.width == 0);
  double xa = 0, xb = 0;
  for (auto& c : p.cycles.per_device) xa += c.exchange;
  for (auto& c : q.cycles.per_device) xb += c.exchange;
  INFO("exchange cycles: mesh rectangles " << xa << ", line runs " << xb);
  CHECK(xa < xb);
}
