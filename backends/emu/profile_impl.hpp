// Bodies of the profile report writer and text summary (compiled once in src/lib/emu_profile.cpp).
#pragma once

#include <algorithm>
#include <map>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <ostream>
#include <set>

#include <nlohmann/json.hpp>

#include <ipuml/backends/emu/executor.hpp>
#include <ipuml/backends/emu/profile.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::emu {

IPUML_INLINE EngineOptions parse_engine_options(const std::string& text) {
  EngineOptions e;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& ex) {
    fail("IPUML_ENGINE_OPTIONS is not valid JSON (", ex.what(),
         "); expected e.g. {\"autoReport.all\":\"true\",\"autoReport.directory\":\"./report\"}");
  }
  IPUML_CHECK(j.is_object(), "IPUML_ENGINE_OPTIONS must be a JSON object, got ", j.dump());
  auto flag = [&](const nlohmann::json& v, const std::string& k) {
    if (v.is_boolean()) return v.get<bool>();
    IPUML_CHECK(v.is_string() && (v == "true" || v == "false"), "IPUML_ENGINE_OPTIONS: '", k,
                "' must be \"true\" or \"false\", got ", v.dump());
    return v == "true";
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k == "autoReport.all" || k == "autoReport.outputGraphProfile" ||
        k == "autoReport.outputExecutionProfile") {
      e.auto_report = e.auto_report || flag(it.value(), k);
    } else if (k == "autoReport.directory") {
      IPUML_CHECK(it.value().is_string() && !it.value().get<std::string>().empty(),
                  "IPUML_ENGINE_OPTIONS: 'autoReport.directory' must be a non-empty string, got ",
                  it.value().dump());
      e.directory = it.value().get<std::string>();
    } else if (k == "debug.checkExchange") {
      e.check_exchange = flag(it.value(), k);
    }
    // Other Poplar engine options are accepted and ignored, as Poplar ignores unknown reports.
  }
  return e;
}

IPUML_INLINE EngineOptions engine_options_from_env() {
  const char* v = std::getenv("IPUML_ENGINE_OPTIONS");
  if (!v || !*v) return {};
  return parse_engine_options(v);
}

namespace prdetail {

using nlohmann::json;

inline json cycles_json(const RunCycles& c, double clock) {
  json devices = json::array();
  for (size_t i = 0; i < c.per_device.size(); ++i) {
    const auto& x = c.per_device[i];
    devices.push_back({{"device", i},
                       {"compute", x.compute},
                       {"exchange", x.exchange},
                       {"sync", x.sync},
                       {"host", x.host},
                       {"total", x.total()}});
  }
  return {
      {"per_device", devices}, {"total_cycles", c.total}, {"simulated_seconds", c.total / clock}};
}

// Memory: totals, categories, per-unit totals, top units, histogram.
inline nlohmann::json memory_json(const Plan& p) {
  using nlohmann::json;
  const auto& t = p.machine;
  const auto& m = p.memory;
  json cats = json::object();
  int64_t used = 0, always = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    int64_t s = 0;
    for (auto& tm : m.units) s += tm.bytes[c];
    cats[category_name(p, c)] = s;
    used += s;
  }
  for (auto& tm : m.units) always += tm.always_live();
  json per_unit = json::array();
  for (auto& tm : m.units) per_unit.push_back(tm.total());
  std::vector<size_t> order(m.units.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t top = std::min<size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](size_t a, size_t b) { return m.units[a].total() > m.units[b].total(); });
  json top_units = json::array();
  for (size_t i = 0; i < top; ++i) {
    const auto& tm = m.units[order[i]];
    json c = json::object();
    for (int k = 0; k < kNumCategories; ++k) c[category_name(p, k)] = tm.bytes[k];
    top_units.push_back({{"unit", order[i] % static_cast<size_t>(t.units_per_device)},
                         {"device", order[i] / static_cast<size_t>(t.units_per_device)},
                         {"global_unit", order[i]},
                         {"bytes", tm.total()},
                         {"peak_step", tm.peak_step},
                         {"categories", c}});
  }
  const int buckets = 16;
  std::vector<int64_t> hist(buckets, 0);
  for (auto& tm : m.units) {
    const double f = static_cast<double>(tm.total()) / static_cast<double>(t.bytes_per_unit);
    hist[static_cast<size_t>(std::clamp(static_cast<int>(f * buckets), 0, buckets - 1))]++;
  }
  json worst = json::array();
  for (auto& x : m.worst_unit_tensors)
    worst.push_back({{"name", x.name}, {"bytes", x.bytes}, {"category", x.category}});
  return {{"bytes_per_unit", t.bytes_per_unit},
          {"total_available",
           static_cast<double>(t.bytes_per_unit) * static_cast<double>(m.units.size())},
          {"total_used", used},
          {"always_live", always},
          {"not_always_live_peak", used - always},
          {"categories", cats},
          {"out_of_memory", m.out_of_memory},
          {"units_over", m.units_over},
          {"replica_sharding_saved", m.replica_sharding_saved_bytes},
          {"oom_message", m.out_of_memory ? out_of_memory_message(p) : std::string()},
          {"per_unit", per_unit},
          {"top_units", top_units},
          {"histogram", {{"bucket_fraction", 1.0 / buckets}, {"counts", hist}}},
          {"worst_unit", {{"global_unit", m.worst_unit}, {"largest_tensors", worst}}}};
}

// Liveness per program step.
inline nlohmann::json liveness_json(const ir::Graph& g, const Plan& p) {
  using nlohmann::json;
  const auto& m = p.memory;
  json live = json::array();
  for (size_t s = 0; s < g.nodes.size() && s < m.always_live_per_step.size(); ++s)
    live.push_back({{"step", s},
                    {"op", ir::op_name(g.nodes[s].kind)},
                    {"always_live", m.always_live_per_step[s]},
                    {"not_always_live", m.not_always_live_per_step[s]}});
  return live;
}

// An op's cycles: its supersteps' compute, exchange and sync, and what crosses devices.
inline double op_cycles(const NodePlan& np) {
  return np.compute_cycles + np.exchange_cycles + np.sync_cycles + np.inter_device_cycles;
}

// The peak FLOPs per cycle of one device for node n's type (its first operand's, else its
// result's), from the plan's target model; 0 without one.
inline double device_peak(const ir::Graph& g, const Plan& p, size_t n) {
  if (!p.model) return 0.0;
  const auto& node = g.nodes[n];
  const DType dt = !node.inputs.empty()    ? g.meta(node.inputs[0]).dtype
                   : !node.outputs.empty() ? g.meta(node.outputs[0]).dtype
                                           : DType::Float32;
  return p.model->peak_flops_per_cycle(dt) * static_cast<double>(p.machine.units_per_device);
}

inline double fraction_of(double flops, double cycles, double peak) {
  return cycles > 0 && peak > 0 ? flops / (cycles * peak) : 0.0;
}

// Operations: FLOPs, split and cycles per op.
inline nlohmann::json operations_json(const ir::Graph& g, const Plan& p) {
  using nlohmann::json;
  json ops = json::array();
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const auto& np = p.nodes[n];
    const double cycles = op_cycles(np);
    ops.push_back({{"node", n},
                   {"op", ir::op_name(g.nodes[n].kind)},
                   {"device", np.span.device},
                   {"split", split_kind_name(np.spec.kind)},
                   {"split_dim", np.spec.kind == SplitKind::Axis ? np.spec.out_dim : -1},
                   {"grid", np.spec.kind == SplitKind::Grid ? to_string(np.grid) : std::string()},
                   {"reduce_units", np.reduce_units},
                   {"follows", np.follows},
                   {"units", np.span.parts},
                   {"first_unit", np.span.first_unit},
                   {"serial", np.serial},
                   {"vertices", np.vertices},
                   {"flops", np.flops},
                   {"compute_cycles", np.compute_cycles},
                   {"exchange_cycles", np.exchange_cycles},
                   {"sync_cycles", np.sync_cycles},
                   {"inter_device_cycles", np.inter_device_cycles},
                   {"exchange_bytes", np.exchange_bytes},
                   {"temporary_bytes_per_unit", np.max_temp_bytes},
                   {"cycles", cycles},
                   {"fraction_of_peak", fraction_of(np.flops, cycles, device_peak(g, p, n))}});
  }
  return ops;
}

// The operations summary (PopVision's most used view): per op type, how many, their cycles and
// share of all ops' cycles, FLOPs, achieved fraction of the device's peak, the bytes they
// exchange and their largest temporaries; the costliest first.
inline nlohmann::json operation_summary_json(const ir::Graph& g, const Plan& p) {
  using nlohmann::json;
  struct Row {
    int64_t count = 0;
    double cycles = 0, flops = 0, peak_cycles = 0, exchange_bytes = 0, temporary = 0;
  };
  std::map<std::string, Row> rows;
  double all = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const auto& np = p.nodes[n];
    Row& r = rows[ir::op_name(g.nodes[n].kind)];
    const double cycles = op_cycles(np);
    r.count += 1;
    r.cycles += cycles;
    r.flops += np.flops;
    // The peak each op could have reached in its own cycles, summed: a type's fraction weighs
    // its ops by their cycles whatever their dtypes.
    r.peak_cycles += cycles * device_peak(g, p, n);
    r.exchange_bytes += np.exchange_bytes;
    r.temporary = std::max(r.temporary, np.max_temp_bytes);
    all += cycles;
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.cycles > b.second.cycles; });
  json out = json::array();
  for (const auto& [op, r] : sorted)
    out.push_back({{"op", op},
                   {"count", r.count},
                   {"cycles", r.cycles},
                   {"share", all > 0 ? r.cycles / all : 0.0},
                   {"flops", r.flops},
                   {"fraction_of_peak", r.peak_cycles > 0 ? r.flops / r.peak_cycles : 0.0},
                   {"exchange_bytes", r.exchange_bytes},
                   {"temporary_bytes_per_unit", r.temporary}});
  return out;
}

// Program: supersteps of one step, and the runs seen so far.
inline nlohmann::json execution_json(const ir::Graph& g, const Plan& p,
                                     const std::vector<RunRecord>& runs, double samples_per_step) {
  using nlohmann::json;
  const auto& t = p.machine;
  json steps = json::array();
  for (auto& s : p.supersteps)
    steps.push_back(
        {{"node", s.node},
         {"name", s.node >= 0 ? ir::op_name(g.nodes[static_cast<size_t>(s.node)].kind)
                              : (s.node == -1 ? "state_writeback" : "replica_allreduce")},
         {"device", s.device},
         {"exchange", s.exchange},
         {"sync", s.sync},
         {"compute", s.compute}});
  json trace = json::array();
  double wall = 0;
  for (auto& r : runs) {
    json x = cycles_json(r.cycles, t.clock_hz);
    x["step"] = r.step;
    x["wall_seconds"] = r.wall_seconds;
    trace.push_back(x);
    wall += r.wall_seconds;
  }
  json ex = {{"clock_hz", t.clock_hz},
             {"host_in_bytes", p.host_in_bytes},
             {"host_out_bytes", p.host_out_bytes},
             {"per_step", cycles_json(p.cycles, t.clock_hz)},
             {"supersteps", steps},
             {"runs", trace}};
  if (samples_per_step > 0) {
    ex["samples_per_step"] = samples_per_step;
    ex["simulated_samples_per_second"] =
        p.cycles.total > 0 ? samples_per_step * t.clock_hz / p.cycles.total : 0.0;
    if (!runs.empty() && wall > 0)
      ex["wall_samples_per_second"] = samples_per_step * static_cast<double>(runs.size()) / wall;
  }
  return ex;
}

}  // namespace prdetail

IPUML_INLINE std::string make_profile_json(const ir::Graph& g, const Plan& p,
                                           const std::vector<RunRecord>& runs,
                                           double samples_per_step) {
  using nlohmann::json;
  const auto& mc = p.machine;
  json j;
  j["schema"] = "ipuml.profile/2";
  j["target"] = json::parse(p.target_json);
  j["machine"] = {{"name", mc.name},
                  {"devices", mc.devices},
                  {"units_per_device", mc.units_per_device},
                  {"bytes_per_unit", mc.bytes_per_unit},
                  {"clock_hz", mc.clock_hz},
                  {"mesh_columns", mc.mesh_columns},
                  {"device_noun", mc.device_noun},
                  {"unit_noun", mc.unit_noun}};
  j["graph"] = {{"nodes", g.nodes.size()},
                {"compute_sets", p.compute_sets},
                {"vertices", p.vertices},
                {"variables", g.values.size()},
                {"edges", p.edges},
                {"supersteps", p.supersteps.size()},
                {"inputs", g.inputs.size()},
                {"states", g.states.size()},
                {"outputs", g.outputs.size()},
                {"from_cache", p.from_cache}};
  j["memory"] = prdetail::memory_json(p);
  j["liveness"] = prdetail::liveness_json(g, p);
  j["operations"] = prdetail::operations_json(g, p);
  j["operation_summary"] = prdetail::operation_summary_json(g, p);
  j["execution"] = prdetail::execution_json(g, p, runs, samples_per_step);
  return j.dump(1);
}

IPUML_INLINE void write_report_file(const std::string& directory, const std::string& file_name,
                                    const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(directory, ec);
  IPUML_CHECK(!ec, "profile report: cannot create directory '", directory, "': ", ec.message());
  const fs::path path = fs::path(directory) / file_name;
  const fs::path tmp = fs::path(directory) / (file_name + ".tmp");
  {
    std::ofstream f(tmp, std::ios::trunc);
    IPUML_CHECK(static_cast<bool>(f), "profile report: cannot write '", tmp.string(), "'");
    f << text << '\n';
    IPUML_CHECK(static_cast<bool>(f), "profile report: writing '", tmp.string(), "' failed");
  }
  fs::rename(tmp, path, ec);
  IPUML_CHECK(!ec, "profile report: cannot rename to '", path.string(), "': ", ec.message());
}

IPUML_INLINE void write_profile_file(const std::string& directory, const std::string& json) {
  write_report_file(directory, "profile.json", json);
}

IPUML_INLINE std::string claim_report_directory(const std::string& directory,
                                                const std::string& name) {
  namespace fs = std::filesystem;
  std::string safe = name.empty() ? std::string("program") : name;
  for (char& c : safe)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  if (safe == "." || safe == "..") safe = "program";
  std::error_code ec;
  fs::path base = fs::absolute(fs::path(directory), ec);
  if (ec) base = fs::path(directory);
  base = base.lexically_normal();
  // Claimed for the life of the process: a later program of the same name is another program.
  static std::mutex mu;
  static std::set<std::string> claimed;
  std::lock_guard<std::mutex> lock(mu);
  std::string pick = safe;
  for (int k = 2; claimed.count((base / pick).string()) != 0; ++k)
    pick = safe + "_" + std::to_string(k);
  claimed.insert((base / pick).string());
  return (fs::path(directory) / pick).string();
}

IPUML_INLINE void print_profile_summary(std::ostream& os, const ir::Graph& g, const Plan& p,
                                        const std::vector<RunRecord>& runs,
                                        double samples_per_step) {
  const auto& t = p.machine;
  const auto& m = p.memory;
  const auto flags = os.flags();
  const auto prec = os.precision();
  os << std::fixed << std::setprecision(1);
  os << "Target: " << (p.model ? p.model->describe() : t.name) << "\n";
  os << "Graph: " << g.nodes.size() << " ops, " << p.compute_sets << " compute sets, " << p.vertices
     << " vertices, " << g.values.size() << " variables, " << p.edges << " edges"
     << (p.from_cache ? " (plan from cache)" : "") << "\n";
  const double total = static_cast<double>(m.total_bytes());
  const double avail = t.device_bytes() * static_cast<double>(t.devices);
  // MB here is 2^20 bytes, as Graphcore quotes 897 MB per GC200.
  const double mb = 1024.0 * 1024.0;
  os << "Memory: " << total / mb << " MB of " << avail / mb << " MB (" << std::setprecision(1)
     << 100.0 * total / avail << "%)" << (m.out_of_memory ? "  OUT OF MEMORY" : "") << "\n";
  if (m.replica_sharding_saved_bytes > 0)
    os << "Replicated tensor sharding: " << static_cast<double>(m.replica_sharding_saved_bytes) / mb
       << " MB of state held by the other replicas instead\n";
  std::vector<size_t> order(m.units.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t top = std::min<size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](size_t a, size_t b) { return m.units[a].total() > m.units[b].total(); });
  os << "Busiest " << t.unit_noun << "s:";
  for (size_t i = 0; i < top; ++i)
    os << (i ? ", " : " ") << t.unit_noun << " " << order[i] << " " << m.units[order[i]].total()
       << " B ("
       << 100.0 * static_cast<double>(m.units[order[i]].total()) /
              static_cast<double>(t.bytes_per_unit)
       << "%)";
  os << "\n";
  os << std::setprecision(0);
  os << "Cycles per step: " << p.cycles.total;
  for (size_t i = 0; i < p.cycles.per_device.size(); ++i) {
    const auto& c = p.cycles.per_device[i];
    os << "  [" << t.device_noun << " " << i << ": compute " << c.compute << ", exchange "
       << c.exchange << ", sync " << c.sync << ", host " << c.host << "]";
  }
  os << "\n" << std::setprecision(1);
  // The costliest op types (the profile's operation_summary, the viewer's table).
  const auto ops = prdetail::operation_summary_json(g, p);
  os << "Costliest ops:";
  for (size_t i = 0; i < std::min<size_t>(5, ops.size()); ++i)
    os << (i ? "; " : " ") << ops[i]["op"].get<std::string>() << " x"
       << ops[i]["count"].get<int64_t>() << " " << 100.0 * ops[i]["share"].get<double>()
       << "% of op cycles at " << 100.0 * ops[i]["fraction_of_peak"].get<double>() << "% of peak";
  os << "\n" << std::setprecision(3);
  os << "Simulated time per step: " << p.cycles.total / t.clock_hz * 1e6 << " us";
  if (!runs.empty()) {
    double wall = 0;
    for (auto& r : runs) wall += r.wall_seconds;
    os << ", wall time per step: " << wall / static_cast<double>(runs.size()) * 1e6 << " us over "
       << runs.size() << " runs";
    if (samples_per_step > 0)
      os << "\nThroughput of this program (one run, one replica): simulated "
         << samples_per_step * t.clock_hz / p.cycles.total << " samples/s, wall "
         << samples_per_step * static_cast<double>(runs.size()) / wall << " samples/s";
  } else if (samples_per_step > 0) {
    os << "\nThroughput of this program (one run, one replica): simulated "
       << samples_per_step * t.clock_hz / p.cycles.total << " samples/s";
  }
  os << "\n";
  os.flags(flags);
  os.precision(prec);
}

}  // namespace ipuml::emu
