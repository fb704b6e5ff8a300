// The IPU plan cache against hostile entries (issue 19): forged plans with a valid keyed
// checksum (grain 0, an extent x100, in_dim [9, 0, 0], TreeSum on a convolution, indices out of
// range) are recompiled, never run; entries are HMAC-checked under a per-cache 0600 key; a FIFO
// at an entry's or the key's path does not block.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <ipuml/backends/ipu/ipu.hpp>
#include <ipuml/ipuml.hpp>
#include <ipuml/models/mnist_cnn.hpp>

#include "../support/ipu_options.hpp"
#include "../support/mnist_step.hpp"
#include "../support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

using namespace ipuml;
namespace fs = std::filesystem;

namespace {

using testing::mnist_step;

// The first node of a plan that `pred` accepts.
size_t first_node(const ipu::Plan& p, const std::function<bool(const ipu::NodePlan&)>& pred) {
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (pred(p.nodes[i])) return i;
  FAIL("no node of the kind looked for");
  return 0;
}

}  // namespace

TEST_CASE("ipu plan cache: forged entries with a valid keyed checksum are recompiled",
          "[ipu][hostile]") {
  testing::TempDir dir("ipuml_plan_hostile");
  auto tr = mnist_step(4);
  const auto t = ipu::target_preset("ipu2");
  auto o = testing::quiet();
  o.cache_dir = dir.path.string();
  auto first = ipu::compile(tr.graph, t, o);
  CHECK_FALSE(first->loaded_from_cache());
  const uint64_t key = ipu::plan_key(tr.graph, t, o);
  const std::string path = ipu::plan_cache_path(o.cache_dir, key);
  CHECK(ipu::plan_fits_graph(tr.graph, t, first->plan()));  // what the planner makes passes
  REQUIRE(ipu::compile(tr.graph, t, o)->loaded_from_cache());

  // The key: 32 bytes, readable by its owner only.
  struct stat st {};
  REQUIRE(::stat((dir.path / "ipuml-cache.key").c_str(), &st) == 0);
  CHECK(st.st_size == 32);
  CHECK((st.st_mode & 0777) == 0600);

  ipu::Plan fresh;
  REQUIRE(ipu::load_plan(path, key, fresh));
  const auto& g = tr.graph;
  const size_t flat = first_node(fresh, [](const ipu::NodePlan& n) {
    return n.follows < 0 && n.span.parts > 1 &&
           (n.spec.kind == ipu::SplitKind::Flat || n.spec.kind == ipu::SplitKind::Rows);
  });
  size_t conv = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (std::string(ir::op_name(g.nodes[i].kind)) == "Conv") {
      conv = i;
      break;
    }
  REQUIRE(std::string(ir::op_name(g.nodes[conv].kind)) == "Conv");
  const size_t multi_input = first_node(fresh, [&](const ipu::NodePlan& n) {
    const size_t i = static_cast<size_t>(&n - fresh.nodes.data());
    return n.spec.kind != ipu::SplitKind::Grid && g.nodes[i].inputs.size() >= 2;
  });

  // The forgeries, then indices a report would follow.
  const std::vector<std::pair<std::string, std::function<void(ipu::Plan&)>>> forgeries = {
      {"span grain 0 (a division by zero)", [&](ipu::Plan& p) { p.nodes[flat].span.grain = 0; }},
      {"spec grain 0", [&](ipu::Plan& p) { p.nodes[flat].spec.grain = 0; }},
      {"extent x100 (reads past the buffer)",
       [&](ipu::Plan& p) {
         p.nodes[flat].span.extent *= 100;
         p.nodes[flat].spec.extent *= 100;
       }},
      {"in_dim [9, 0, 0]",
       [&](ipu::Plan& p) {
         p.nodes[multi_input].spec.in_dim = {9, 0, 0};
       }},
      {"TreeSum on a convolution",
       [&](ipu::Plan& p) { p.nodes[conv].spec.kind = ipu::SplitKind::TreeSum; }},
      {"more parts than the split allows",
       [&](ipu::Plan& p) { p.nodes[flat].span.parts = 1 << 30; }},
      {"a value on axis 7", [&](ipu::Plan& p) { p.values[0].axis = 7; }},
      {"a value's extent x100", [&](ipu::Plan& p) { p.values[0].span.extent *= 100; }},
      {"a superstep of node 10^6", [&](ipu::Plan& p) { p.supersteps.at(0).node = 1000000; }},
      {"worst tile -1", [&](ipu::Plan& p) { p.memory.worst_unit = -1; }},
      {"serial 0", [&](ipu::Plan& p) { p.nodes[flat].serial = 0; }},
      {"another machine", [&](ipu::Plan& p) { p.machine.units_per_device *= 2; }},
      {"another target", [&](ipu::Plan& p) { p.target_json += " "; }},
  };
  for (const auto& [what, forge] : forgeries) {
    INFO(what);
    ipu::Plan p = fresh;
    forge(p);
    REQUIRE(ipu::save_plan(p, path));  // a correct keyed checksum, as save_plan writes any plan
    ipu::Plan back;
    REQUIRE(ipu::load_plan(path, key, back));
    CHECK_FALSE(ipu::plan_fits_graph(g, t, back));
    CHECK_FALSE(ipu::compile(g, t, o)->loaded_from_cache());  // recompiled and rewritten
    CHECK(ipu::compile(g, t, o)->loaded_from_cache());
  }
}

TEST_CASE("ipu plan cache: entries are checked under the cache's key, FIFOs do not block",
          "[ipu][hostile]") {
  testing::TempDir dir("ipuml_plan_key");
  Tensor w = zeros({16, 8});
  ir::Tracer tracer;
  Tensor x = tracer.input(ir::TensorMeta{{4, 16}, kFloat32}, "x");
  tracer.name_state(w, "weight");
  auto tr = tracer.finish({relu(matmul(x, w))});
  const auto t = ipu::target_preset("tiny");
  auto o = testing::quiet();
  o.cache_dir = dir.path.string();
  const uint64_t key = ipu::plan_key(tr.graph, t, o);
  const std::string path = ipu::plan_cache_path(o.cache_dir, key);
  const std::string key_file = (dir.path / "ipuml-cache.key").string();
  ipu::compile(tr.graph, t, o);
  REQUIRE(ipu::compile(tr.graph, t, o)->loaded_from_cache());

  // A flipped payload byte, or an entry written under another cache's key: not trusted.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::string flipped = bytes;
  flipped[bytes.size() - 5] = static_cast<char>(flipped[bytes.size() - 5] ^ 1);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << flipped;
  ipu::Plan p;
  CHECK_FALSE(ipu::load_plan(path, key, p));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  REQUIRE(ipu::load_plan(path, key, p));
  std::string other_key(32, 'k');
  fs::remove(key_file);
  { std::ofstream(key_file, std::ios::binary) << other_key; }
  ::chmod(key_file.c_str(), 0600);
  CHECK_FALSE(ipu::load_plan(path, key, p));
  // A key others may read is not used.
  ipu::compile(tr.graph, t, o);
  REQUIRE(ipu::load_plan(path, key, p));
  ::chmod(key_file.c_str(), 0644);
  CHECK_FALSE(ipu::load_plan(path, key, p));
  ::chmod(key_file.c_str(), 0600);

  // A FIFO at the entry's path or the key's path: refused at once, the plan compiled anew.
  const auto t0 = std::chrono::steady_clock::now();
  fs::remove(path);
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  CHECK_FALSE(ipu::load_plan(path, key, p));
  CHECK_FALSE(ipu::compile(tr.graph, t, o)->loaded_from_cache());
  CHECK(fs::is_regular_file(path));  // the entry replaced the FIFO
  fs::remove(key_file);
  REQUIRE(::mkfifo(key_file.c_str(), 0600) == 0);
  CHECK_FALSE(ipu::load_plan(path, key, p));
  CHECK_FALSE(ipu::compile(tr.graph, t, o)->loaded_from_cache());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  // No temporaries left behind.
  for (auto& e : fs::directory_iterator(dir.path))
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}
