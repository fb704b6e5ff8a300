// Test support: pins a compiled plan's figures (cycles per IPU and phase, memory per IPU and
// category, fit, program size) to tests/golden/ipu_figures/<name>.json, so that restructuring the
// emulator cannot move them unnoticed. A change that moves them on purpose regenerates the files
// with IPUML_UPDATE_FIGURES=1 and says why in its commit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/ipu/compile.hpp>

namespace ipuml::testing {

inline nlohmann::json plan_figures(const ipu::Plan& p) {
  using nlohmann::json;
  const int64_t T = p.machine.units_per_device;
  json per_ipu = json::array();
  for (int64_t i = 0; i < p.machine.devices; ++i) {
    const auto& c = p.cycles.per_device[static_cast<size_t>(i)];
    int64_t fullest = 0;
    for (int64_t k = 0; k < T; ++k)
      fullest = std::max(fullest, p.memory.units[static_cast<size_t>(i * T + k)].total());
    per_ipu.push_back({{"compute", c.compute},
                       {"exchange", c.exchange},
                       {"sync", c.sync},
                       {"host", c.host},
                       {"fullest_tile_bytes", fullest}});
  }
  json categories = json::object();
  for (int c = 0; c < ipu::kNumCategories; ++c) {
    int64_t s = 0;
    for (auto& t : p.memory.units) s += t.bytes[c];
    categories[ipu::category_name(p, c)] = s;  // the IPU model's names
  }
  double exchange_bytes = 0, inter_ipu_bytes = 0;
  for (auto& n : p.nodes) {
    exchange_bytes += n.exchange_bytes;
    inter_ipu_bytes += n.inter_device_bytes;
  }
  return {{"target", p.machine.name},
          {"num_ipus", p.machine.devices},
          {"total_cycles", p.cycles.total},
          {"per_ipu", per_ipu},
          {"out_of_memory", p.memory.out_of_memory},
          {"tiles_over", p.memory.units_over},
          {"worst_tile", p.memory.worst_unit},
          {"memory_bytes", p.memory.total_bytes()},
          {"categories", categories},
          {"supersteps", p.supersteps.size()},
          {"compute_sets", p.compute_sets},
          {"vertices", p.vertices},
          {"edges", p.edges},
          {"exchange_bytes", exchange_bytes},
          {"inter_ipu_bytes", inter_ipu_bytes},
          {"host_in_bytes", p.host_in_bytes},
          {"host_out_bytes", p.host_out_bytes}};
}

// Every number equal, floating ones to 1e-9 relative (compilers may contract a multiply-add
// differently; a planning decision that moved would move figures far more).
inline void check_same_figures(const nlohmann::json& got, const nlohmann::json& want,
                               const std::string& path) {
  INFO(path);
  if (want.is_object()) {
    REQUIRE(got.is_object());
    for (auto& [k, v] : want.items()) {
      REQUIRE(got.contains(k));
      check_same_figures(got.at(k), v, path + "." + k);
    }
    CHECK(got.size() == want.size());
  } else if (want.is_array()) {
    REQUIRE(got.is_array());
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i)
      check_same_figures(got[i], want[i], path + "[" + std::to_string(i) + "]");
  } else if (want.is_number_float() || got.is_number_float()) {
    const double g = got.get<double>(), w = want.get<double>();
    CHECK(std::abs(g - w) <= 1e-9 * std::max(1.0, std::abs(w)));
  } else {
    CHECK(got == want);
  }
}

// A traced graph lists the ops of independent subexpressions in the order the program evaluated
// them, and C++ leaves the order of a call's arguments to the compiler (GCC often evaluates
// `add(f(x), g(y))`'s g first, Clang f first). The same model can so trace a different but
// equivalent program order with each compiler, and its plan's liveness and placement differ
// slightly (BERT's activations by 944 bytes in 500 MB). Where they do, Clang's figures are pinned
// in <name>.clang.json beside GCC's <name>.json: the Release build (GCC) checks one, the
// sanitizer build (Clang) the other.
inline std::string figures_path(const std::string& name, bool writing) {
  const std::string base = std::string(IPUML_SOURCE_DIR) + "/tests/golden/ipu_figures/" + name;
#if defined(__clang__)
  const std::string own = base + ".clang.json";
  if (writing || std::ifstream(own).good()) return own;
#else
  (void)writing;
#endif
  return base + ".json";
}

// Compares the plan's figures with the pinned ones (writes this compiler's file instead under
// IPUML_UPDATE_FIGURES=1).
inline void pin_plan_figures(const ipu::Plan& p, const std::string& name) {
  const nlohmann::json got = plan_figures(p);
  const char* update = std::getenv("IPUML_UPDATE_FIGURES");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(figures_path(name, true)) << got.dump(2) << "\n";
    return;
  }
  const std::string path = figures_path(name, false);
  std::ifstream in(path);
  INFO("pinned figures " << path << " (IPUML_UPDATE_FIGURES=1 writes them)");
  REQUIRE(in.good());
  check_same_figures(got, nlohmann::json::parse(in), name);
}

}  // namespace ipuml::testing
