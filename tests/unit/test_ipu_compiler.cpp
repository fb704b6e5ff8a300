// The IPU emulator's compiler and reports: targets and overrides, out-of-memory errors, the
// compiled-plan cache (hit, corrupt, truncated, stale), cycle-model sanity and the profile report.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/ipuml.hpp>

#include "../support/ipu_options.hpp"

using namespace ipuml;
namespace fs = std::filesystem;

using testing::quiet;

namespace {

// y = relu(x @ w) with a weight state of [k, n].
ir::Trace matmul_graph(int64_t m, int64_t k, int64_t n) {
  Tensor w = randn({k, n}).detach();
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{m, k}, kFloat32}, "x");
  tracer.name_state(w, "weight");
  Tensor y = relu(matmul(x, w));
  return tracer.finish({y});
}

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() / ("ipuml-test-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

struct EnvGuard {
  std::string name;
  explicit EnvGuard(std::string n, const std::string& value) : name(std::move(n)) {
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~EnvGuard() { ::unsetenv(name.c_str()); }
};

}  // namespace

TEST_CASE("ipu targets: presets, derived numbers and overrides", "[ipu]") {
  auto t2 = ipu::target_preset("ipu2");
  CHECK(t2.tiles_per_ipu == 1472);
  CHECK(t2.bytes_per_tile == 638976);
  CHECK(t2.worker_contexts == 6);
  CHECK(t2.flops_per_cycle_fp32 * 1472 * t2.clock_hz == Approx(62.5e12));
  CHECK(t2.flops_per_cycle_fp16 * 1472 * t2.clock_hz == Approx(250e12));
  CHECK(t2.ipu_bytes() / (1024.0 * 1024.0) == Approx(897.0).epsilon(0.001));
  auto t1 = ipu::target_preset("ipu1");
  CHECK(t1.tiles_per_ipu == 1216);
  CHECK(t1.bytes_per_tile == 262144);
  CHECK(t1.clock_hz == 1.6e9);
  auto bow = ipu::target_preset("bow");
  CHECK(bow.clock_hz == 1.85e9);
  CHECK(bow.flops_per_cycle_fp32 == Approx(t2.flops_per_cycle_fp32));
  CHECK(ipu::target_preset("tiny").tiles_per_ipu == 4);
  CHECK_THROWS_WITH(ipu::target_preset("ipu9"),
                    Catch::Contains("unknown IPU target 'ipu9'") && Catch::Contains("tiny"));

  ipu::apply_override(t2, "num_ipus=4");
  ipu::apply_override(t2, " clock_hz = 1.85e9 ");
  ipu::apply_override(t2, "tiles_per_ipu=16");
  CHECK(t2.num_ipus == 4);
  CHECK(t2.clock_hz == 1.85e9);
  CHECK(t2.total_tiles() == 64);
  for (const auto& f : ipu::target_field_names()) {  // every field is reachable by name
    auto t = ipu::target_preset("ipu2");
    const auto j = nlohmann::json::parse(ipu::to_json(t));
    REQUIRE(j.contains(f));
    const std::string v = j[f].is_string() ? j[f].get<std::string>() : j[f].dump();
    CHECK_NOTHROW(ipu::apply_override(t, f + "=" + v));
  }
  CHECK_THROWS_WITH(ipu::apply_override(t2, "tiles=3"),
                    Catch::Contains("unknown field 'tiles'") && Catch::Contains("tiles_per_ipu") &&
                        Catch::Contains("exchange_bytes_per_cycle"));
  CHECK_THROWS_WITH(ipu::apply_override(t2, "num_ipus=two"),
                    Catch::Contains("num_ipus expects an integer"));
  CHECK_THROWS_WITH(ipu::apply_override(t2, "num_ipus=1.5"), Catch::Contains("expects an integer"));
  CHECK_THROWS_WITH(ipu::apply_override(t2, "bytes_per_tile=-1"),
                    Catch::Contains("bytes_per_tile must be in [64, "));
  CHECK_THROWS_WITH(ipu::apply_override(t2, "clock_hz"), Catch::Contains("field=value"));
  CHECK(t2.num_ipus == 4);  // a failed override leaves the target unchanged
  auto round = ipu::target_from_json(ipu::to_json(t2));
  CHECK(ipu::to_json(round) == ipu::to_json(t2));
  CHECK_THAT(ipu::to_string(ipu::target_preset("ipu2")),
             Catch::Contains("1472 tiles") && Catch::Contains("1.33 GHz"));
}

TEST_CASE("ipu compile: out of memory has Poplar's message, allow_out_of_memory reports it",
          "[ipu]") {
  auto tr = matmul_graph(256, 256, 256);  // 256 KiB of weights alone on a 4 x 64 KiB target
  auto tiny = ipu::target_preset("tiny");
  try {
    ipu::compile(tr.graph, tiny, quiet());
    FAIL("expected an out-of-memory error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(std::regex_search(
        msg, std::regex("^Out of memory on tile [0-9]+: [0-9]+ bytes used but tiles only have "
                        "65536 bytes of memory")));
    CHECK_THAT(msg, Catch::Contains("top tiles") && Catch::Contains("weight") &&
                        Catch::Contains("largest tensors"));
  }
  // The same form with the ipu2 tile size.
  auto small_ipu2 = ipu::target_preset("ipu2");
  ipu::apply_override(small_ipu2, "tiles_per_ipu=2");
  auto big = matmul_graph(512, 512, 512);
  CHECK_THROWS_WITH(
      ipu::compile(big.graph, small_ipu2, quiet()),
      Catch::Matches(
          "^Out of memory on tile [0-9]+: [0-9]+ bytes used but tiles only have 638976 bytes "
          "of memory(.|\n)*"));

  auto o = quiet();
  o.allow_out_of_memory = true;
  auto exe = ipu::compile(tr.graph, tiny, o);
  const auto& m = exe->memory_report();
  CHECK(m.out_of_memory);
  CHECK(m.units_over > 0);
  CHECK(m.units[static_cast<size_t>(m.worst_unit)].total() > tiny.bytes_per_tile);
  auto j = nlohmann::json::parse(exe->profile_json());
  CHECK(j["memory"]["out_of_memory"] == true);
  CHECK_THAT(j["memory"]["oom_message"].get<std::string>(),
             Catch::StartsWith("Out of memory on tile"));
  // It still runs, with the CPU's numbers up to the order of the K split's partial sums.
  Tensor x = randn({256, 256});
  cpu::GraphExecutor ref(tr.graph);
  auto a = ref.run({x}, tr.states)[0].to_vector<float>();
  auto b = exe->run({x}, tr.states)[0].to_vector<float>();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-5).margin(1e-4));
}

TEST_CASE("ipu compile: memory accounting by category and liveness", "[ipu]") {
  auto tr = matmul_graph(64, 128, 96);
  auto exe = ipu::compile(tr.graph, ipu::target_preset("ipu2"), quiet());
  const auto& m = exe->memory_report();
  CHECK_FALSE(m.out_of_memory);
  int64_t state = 0, stream = 0, code = 0;
  for (auto& t : m.units) {
    state += t.bytes[ipu::kState];
    stream += t.bytes[ipu::kStream];
    code += t.bytes[ipu::kCode];
  }
  CHECK(state == 128 * 96 * 4);   // the weight, spread over tiles, counted once
  CHECK(stream == 64 * 128 * 4);  // the streamed input
  CHECK(code > 0);
  REQUIRE(m.always_live_per_step.size() == tr.graph.nodes.size());
  for (size_t s = 0; s < tr.graph.nodes.size(); ++s) CHECK(m.not_always_live_per_step[s] > 0);
  // The matmul is spread over many tiles, not one.
  CHECK(exe->plan().nodes[0].span.parts > 8);
  std::ostringstream os;
  exe->print_profile_summary(os, 64);
  CHECK_THAT(os.str(), Catch::Contains("Memory: ") && Catch::Contains(" MB of 897.0 MB (") &&
                           Catch::Contains("Cycles per step"));
}

TEST_CASE("ipu compile: reshapes slices and concats are views as in Poplar", "[ipu]") {
  // a = x @ w; r = reshape(a) (a view: no bytes of its own, nothing moved); s = slice(r) keeps
  // a's bytes live until s's reader, after an unrelated b = x @ w2; c = cat(b, b) is a view too.
  Tensor w = randn({128, 96}).detach(), w2 = randn({128, 96}).detach();
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{64, 128}, kFloat32}, "x");
  tracer.name_state(w, "w");
  tracer.name_state(w2, "w2");
  Tensor a = matmul(x, w);
  Tensor r = reshape(a, {96, 64});
  Tensor s = slice(r, 0, 0, 1);
  Tensor b = matmul(x, w2);
  Tensor c = cat({b, b}, 0);
  Tensor y = add(exp(c), reshape(s, {1, 64}).sum());
  auto tr = tracer.finish({y});
  auto exe = ipu::compile(tr.graph, ipu::target_preset("ipu2"), quiet());
  const auto& g = tr.graph;
  const auto& m = exe->memory_report();
  auto step_of = [&](ir::OpKind k, int nth) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].kind == k && nth-- == 0) return i;
    FAIL("no such node");
    return size_t{0};
  };
  const size_t reshape_step = step_of(ir::OpKind::Reshape, 0);
  const size_t slice_step = step_of(ir::OpKind::Slice, 0);
  const size_t b_step = step_of(ir::OpKind::MatMul, 1);
  const size_t cat_step = step_of(ir::OpKind::Cat, 0);
  REQUIRE(slice_step < b_step);
  const int64_t one = 64 * 96 * 4;  // a, r or b's bytes (with at most 8 bytes' padding a piece)
  const int64_t pad = 8 * 1472;
  // At the reshape and the slice only a is live: no copy, no temporaries.
  CHECK(m.not_always_live_per_step[reshape_step] >= one);
  CHECK(m.not_always_live_per_step[reshape_step] <= one + pad);
  CHECK(m.not_always_live_per_step[slice_step] <= one + pad);
  // While b is computed, a is still held for s's reader (a copy of the slice would have let it
  // go); at the concat both live and the [128, 96] view adds nothing.
  CHECK(m.not_always_live_per_step[b_step] >= 2 * one);
  CHECK(m.not_always_live_per_step[cat_step] >= 2 * one);
  CHECK(m.not_always_live_per_step[cat_step] <= 2 * (one + pad));
  // A view runs no vertex and has no superstep of its own: no compute, no sync, no vertices;
  // only moving its elements to where a reader wants them is exchange. The ops that compute
  // have all three.
  const auto& plan = exe->plan();
  for (size_t step : {reshape_step, slice_step, cat_step}) {
    INFO("step " << step << " " << ir::op_name(g.nodes[step].kind));
    CHECK(plan.nodes[step].compute_cycles == 0);
    CHECK(plan.nodes[step].sync_cycles == 0);
    CHECK(plan.nodes[step].vertices == 0);
  }
  for (size_t step : {b_step, step_of(ir::OpKind::Exp, 0)}) {
    CHECK(plan.nodes[step].compute_cycles > 0);
    CHECK(plan.nodes[step].sync_cycles > 0);
    CHECK(plan.nodes[step].vertices > 0);
  }
}

TEST_CASE("ipu compile: small constants are Poplar constants and larger fills are programs",
          "[ipu]") {
  // y = (x * 0.5 + [1, 2, 3, 4]) + a [64, 128] fill: the scalar and the 4 values are graph
  // constants, loaded with the program (no vertex, no superstep); the large fill runs as
  // popops::fill does, on its tiles.
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{64, 4}, kFloat32}, "x");
  Tensor big = full({64, 128}, 3.0, kFloat32);
  Tensor y = add(mul(x, scalar_tensor(0.5, kFloat32)), full({4}, 2.0, kFloat32));
  Tensor z = add(big, matmul(y, ones({4, 128}, kFloat32)));
  auto tr = tracer.finish({z});
  auto exe = ipu::compile(tr.graph, ipu::target_preset("ipu2"), quiet());
  const auto& g = tr.graph;
  const auto& plan = exe->plan();
  int small = 0, large = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].kind != ir::OpKind::Full) continue;
    const int64_t numel = g.meta(g.nodes[i].outputs[0]).numel();
    INFO("Full of " << numel << " elements");
    if (numel <= 16) {
      ++small;
      CHECK(plan.nodes[i].compute_cycles == 0);
      CHECK(plan.nodes[i].sync_cycles == 0);
      CHECK(plan.nodes[i].vertices == 0);
    } else {
      ++large;
      CHECK(plan.nodes[i].compute_cycles > 0);
      CHECK(plan.nodes[i].sync_cycles > 0);
      CHECK(plan.nodes[i].vertices > 0);
    }
  }
  CHECK(small == 2);
  CHECK(large == 2);  // the [64, 128] fill and the ones of the matmul's [4, 128] operand
  // The constants still compute the right values.
  Tensor xv = randn({64, 4});
  const auto got = exe->run({xv}, tr.states)[0].to_vector<float>();
  const auto xs = xv.to_vector<float>();
  REQUIRE(got.size() == 64 * 128);
  for (size_t r = 0; r < 64; ++r) {
    double want = 3.0;
    for (size_t c = 0; c < 4; ++c) want += 0.5 * double(xs[r * 4 + c]) + 2.0;
    for (size_t j = 0; j < 128; ++j) CHECK(got[r * 128 + j] == Approx(want).epsilon(1e-5));
  }
}

TEST_CASE("ipu plan cache: hit, corrupt, truncated and stale entries", "[ipu]") {
  TempDir dir("cache");
  auto o = quiet();
  o.cache_dir = dir.path.string();
  auto t = ipu::target_preset("ipu2");
  auto tr = matmul_graph(32, 64, 48);
  const auto key = ipu::plan_key(tr.graph, t, o);
  const auto path = ipu::plan_cache_path(o.cache_dir, key);
  Tensor x = randn({32, 64});
  cpu::GraphExecutor ref(tr.graph);
  const auto want = ref.run({x}, tr.states)[0].to_vector<float>();

  auto first = ipu::compile(tr.graph, t, o);
  CHECK_FALSE(first->loaded_from_cache());
  REQUIRE(fs::exists(path));
  auto second = ipu::compile(tr.graph, t, o);
  CHECK(second->loaded_from_cache());
  CHECK(second->plan().cycles.total == first->plan().cycles.total);
  CHECK(second->memory_report().total_bytes() == first->memory_report().total_bytes());
  CHECK(second->run({x}, tr.states)[0].to_vector<float>() == want);

  SECTION("a corrupt payload is detected and rebuilt") {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(path) - 10));
    f.put('\x5a');
    f.close();
    ipu::Plan p;
    CHECK_FALSE(ipu::load_plan(path, key, p));
    auto again = ipu::compile(tr.graph, t, o);
    CHECK_FALSE(again->loaded_from_cache());
    CHECK(again->run({x}, tr.states)[0].to_vector<float>() == want);
    CHECK(ipu::compile(tr.graph, t, o)->loaded_from_cache());  // rewritten
  }
  SECTION("a truncated entry is detected and rebuilt") {
    fs::resize_file(path, fs::file_size(path) / 2);
    auto again = ipu::compile(tr.graph, t, o);
    CHECK_FALSE(again->loaded_from_cache());
    CHECK(ipu::compile(tr.graph, t, o)->loaded_from_cache());
  }
  SECTION("garbage with the right name is ignored") {
    std::ofstream(path, std::ios::trunc) << "not a plan";
    CHECK_FALSE(ipu::compile(tr.graph, t, o)->loaded_from_cache());
  }
  SECTION("a stale entry (another graph's plan) is never trusted") {
    auto other = matmul_graph(32, 64, 40);
    const auto other_path = ipu::plan_cache_path(o.cache_dir, ipu::plan_key(other.graph, t, o));
    fs::copy_file(path, other_path, fs::copy_options::overwrite_existing);
    auto exe = ipu::compile(other.graph, t, o);
    CHECK_FALSE(exe->loaded_from_cache());
    CHECK(exe->plan().values.size() == other.graph.values.size());
  }
  SECTION("the key covers target and options") {
    auto t4 = t;
    ipu::apply_override(t4, "tiles_per_ipu=64");
    CHECK(ipu::plan_key(tr.graph, t4, o) != key);
    auto o2 = o;
    o2.available_memory_proportion = 0.3;
    CHECK(ipu::plan_key(tr.graph, t, o2) != key);
    CHECK_FALSE(ipu::compile(tr.graph, t4, o)->loaded_from_cache());
  }
  SECTION("IPUML_CACHE_DIR is used when no directory is given") {
    EnvGuard env("IPUML_CACHE_DIR", o.cache_dir);
    CHECK(ipu::compile(tr.graph, t, quiet())->loaded_from_cache());
  }
}

TEST_CASE("ipu cycle model sanity", "[ipu]") {
  const auto t = ipu::target_preset("ipu2");
  // More FLOPs on the same vertex cost more cycles; vertex overhead is always paid.
  CHECK(ipu::vertex_cycles(t, 2e6, 0, kFloat32, true, 64) >
        ipu::vertex_cycles(t, 1e6, 0, kFloat32, true, 64));
  CHECK(ipu::vertex_cycles(t, 0, 0, kFloat32, false, 1) == t.vertex_overhead_cycles);
  CHECK(ipu::vertex_cycles(t, 1e6, 0, kFloat16, true, 64) <
        ipu::vertex_cycles(t, 1e6, 0, kFloat32, true, 64));
  CHECK(ipu::vertex_cycles(t, 1e6, 0, kFloat32, false, 64) >
        ipu::vertex_cycles(t, 1e6, 0, kFloat32, true, 64));
  CHECK(ipu::exchange_cycles(t, 800) == Approx(800 / t.exchange_bytes_per_cycle));
  CHECK(ipu::host_cycles(t, t.host_bytes_per_second) == Approx(t.clock_hz));
  CHECK(ipu::allreduce_cycles(t, 1e6, 1) == 0);
  CHECK(ipu::allreduce_cycles(t, 2e6, 4) > ipu::allreduce_cycles(t, 1e6, 4));
  CHECK(ipu::allreduce_cycles(t, 1e6, 8) > ipu::allreduce_cycles(t, 1e6, 2));

  auto compute_of = [](const ir::Trace& tr, const ipu::Target& tg) {
    auto exe = ipu::compile(tr.graph, tg, quiet());
    return exe->plan().cycles.per_device[0].compute;
  };
  // Doubling the FLOPs (inner dimension) on the same mapping increases compute cycles.
  auto small = matmul_graph(64, 128, 64), twice = matmul_graph(64, 256, 64);
  auto t64 = t;
  ipu::apply_override(t64, "tiles_per_ipu=64");
  CHECK(compute_of(twice, t64) > compute_of(small, t64));
  // More tiles reduce compute cycles.
  auto t16 = t;
  ipu::apply_override(t16, "tiles_per_ipu=16");
  CHECK(compute_of(small, t64) < compute_of(small, t16));
  // Sync is charged per superstep.
  auto exe = ipu::compile(small.graph, t, quiet());
  const auto& p = exe->plan();
  double node_sync = 0;
  for (auto& s : p.supersteps)
    if (s.node >= 0) {
      CHECK(s.sync >= static_cast<double>(t.sync_cycles));
      node_sync += s.sync;
    }
  CHECK(node_sync >= static_cast<double>(t.sync_cycles * p.compute_sets));
  auto t0 = t;
  ipu::apply_override(t0, "sync_cycles=0");
  auto exe0 = ipu::compile(small.graph, t0, quiet());
  CHECK(exe0->plan().cycles.total < p.cycles.total);
  CHECK(p.cycles.simulated_seconds == Approx(p.cycles.total / t.clock_hz));
  // Host transfers: input in, output out.
  CHECK(p.cycles.per_device[0].host > 0);
  // Replication adds the all-reduce of the updated state (none here) and never lowers cycles.
  auto o = quiet();
  o.replication_factor = 4;
  CHECK(ipu::compile(small.graph, t, o)->plan().cycles.total >= p.cycles.total);
}

TEST_CASE("ipu model parallelism: nodes on IPU 1 need two IPUs and pay inter-IPU exchange",
          "[ipu]") {
  Tensor w1 = randn({32, 32}).detach(), w2 = randn({32, 16}).detach();
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{8, 32}, kFloat32}, "x");
  Tensor h = relu(matmul(x, w1));
  Tensor y;
  {
    ir::PlacementGuard on1(1);
    y = matmul(h, w2);
  }
  auto tr = tracer.finish({y});
  CHECK_THROWS_WITH(ipu::compile(tr.graph, ipu::target_preset("ipu2"), quiet()),
                    Catch::Contains("placed on IPU 1") && Catch::Contains("num_ipus"));
  auto t2 = ipu::target_preset("ipu2");
  ipu::apply_override(t2, "num_ipus=2");
  auto exe = ipu::compile(tr.graph, t2, quiet());
  const auto& p = exe->plan();
  REQUIRE(p.cycles.per_device.size() == 2);
  CHECK(p.cycles.per_device[1].compute > 0);
  CHECK(p.cycles.per_device[1].exchange > 0);  // h crosses from IPU 0
  Tensor xv = randn({8, 32});
  cpu::GraphExecutor ref(tr.graph);
  CHECK(ref.run({xv}, tr.states)[0].to_vector<float>() ==
        exe->run({xv}, tr.states)[0].to_vector<float>());
}

TEST_CASE("ipu profile report: written on request and through IPUML_ENGINE_OPTIONS", "[ipu]") {
  TempDir dir("report");
  auto tr = matmul_graph(16, 32, 24);
  {
    EnvGuard env(
        "IPUML_ENGINE_OPTIONS",
        "{\"autoReport.all\":\"true\",\"autoReport.directory\":\"" + dir.path.string() + "\"}");
    auto exe = ipu::compile(tr.graph, ipu::target_preset("ipu2"), quiet());
    CHECK(exe->report_directory() == (dir.path / "program").string());
    exe->run({randn({16, 32})}, tr.states);
  }
  // One subdirectory per program, named by CompileOptions::program_name ("program" unnamed).
  const auto file = dir.path / "program" / "profile.json";
  REQUIRE(fs::exists(file));
  CHECK(fs::exists(dir.path / "program" / "trace.json"));
  std::ifstream f(file);
  auto j = nlohmann::json::parse(f);
  CHECK(j["schema"] == "ipuml.profile/2");
  CHECK(j["target"]["tiles_per_ipu"] == 1472);
  CHECK(j["graph"]["compute_sets"].get<int64_t>() >= 2);
  CHECK(j["graph"]["vertices"].get<int64_t>() > 0);
  CHECK(j["memory"]["top_units"].size() == 5);
  CHECK(j["memory"]["per_unit"].size() == 1472);
  CHECK(j["memory"]["categories"].contains("vertex_state"));  // the IPU's names for its memory
  CHECK(j["memory"]["categories"].contains("exchange_code"));
  CHECK(j["memory"]["histogram"]["counts"].size() == 16);
  CHECK(j["liveness"].size() == tr.graph.nodes.size());
  CHECK(j["operations"][0]["op"] == "MatMul");
  CHECK(j["operations"][0]["flops"].get<double>() == Approx(2.0 * 16 * 32 * 24));
  // Each op's cycles are its supersteps'; its fraction of peak, its FLOPs over those cycles
  // times the IPU's fp32 peak (62.5 TFLOP/s: 1472 tiles x 31.92 FLOPs per cycle at 1.33 GHz).
  const auto& mm = j["operations"][0];
  const double mm_cycles = mm["cycles"].get<double>();
  CHECK(mm_cycles ==
        Approx(mm["compute_cycles"].get<double>() + mm["exchange_cycles"].get<double>() +
               mm["sync_cycles"].get<double>() + mm["inter_device_cycles"].get<double>()));
  CHECK(mm["fraction_of_peak"].get<double>() ==
        Approx(2.0 * 16 * 32 * 24 / (mm_cycles * 62.5e12 / 1.33e9)));
  // The operations summary adds them up by op type, costliest first, shares summing to 1.
  const auto& summary = j["operation_summary"];
  double op_cycles = 0, summary_cycles = 0, shares = 0, last = 1e300;
  for (auto& o : j["operations"]) op_cycles += o["cycles"].get<double>();
  for (auto& x : summary) {
    summary_cycles += x["cycles"].get<double>();
    shares += x["share"].get<double>();
    CHECK(x["cycles"].get<double>() <= last);
    last = x["cycles"].get<double>();
    if (x["op"] == "MatMul") {
      CHECK(x["count"] == 1);
      CHECK(x["fraction_of_peak"].get<double>() == Approx(mm["fraction_of_peak"].get<double>()));
    }
  }
  CHECK(summary_cycles == Approx(op_cycles));
  CHECK(shares == Approx(1.0));
  REQUIRE(j["execution"]["runs"].size() == 1);
  CHECK(j["execution"]["runs"][0]["per_device"][0]["compute"].get<double>() > 0);

  EnvGuard bad("IPUML_ENGINE_OPTIONS", "{autoReport.all: true");
  CHECK_THROWS_WITH(ipu::compile(tr.graph, ipu::target_preset("ipu2"), quiet()),
                    Catch::Contains("IPUML_ENGINE_OPTIONS is not valid JSON"));
  CHECK_THROWS_WITH(ipu::parse_engine_options("{\"autoReport.all\":\"yes\"}"),
                    Catch::Contains("\"true\" or \"false\""));
  CHECK_THROWS_WITH(ipu::parse_engine_options("[1]"), Catch::Contains("must be a JSON object"));
  CHECK(ipu::parse_engine_options("{\"autoReport.all\":\"true\"}").directory == "./report");
}
