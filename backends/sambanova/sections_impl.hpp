// Bodies of the section plan (compiled once in src/lib/sambanova_backend.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include <ipuml/backends/emu/node_roles.hpp>
#include <ipuml/backends/sambanova/sections.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::sambanova {

namespace sdetail {

inline double nbytes(const ir::Graph& g, int64_t v) {
  return static_cast<double>(g.values[static_cast<size_t>(v)].meta.nbytes());
}

// What the plan knows of each value: the value a view of it aliases (views move no data on the
// RDU: they are address patterns), and whether it is a small constant baked into a section's
// configuration.
struct ValueRoots {
  std::vector<int64_t> root;
  std::vector<char> constant;
};

inline ValueRoots value_roots(const ir::Graph& g) {
  ValueRoots r;
  r.root.resize(g.values.size());
  std::iota(r.root.begin(), r.root.end(), int64_t{0});
  r.constant.assign(g.values.size(), 0);
  for (const ir::Node& n : g.nodes) {
    if (!emu::idle_node(g, n)) continue;
    for (auto o : n.outputs) {
      const auto ou = static_cast<size_t>(o);
      if (n.inputs.empty()) {
        r.constant[ou] = 1;
      } else {
        r.root[ou] = r.root[static_cast<size_t>(n.inputs[0])];
        r.constant[ou] = r.constant[static_cast<size_t>(r.root[ou])];
      }
    }
  }
  return r;
}

// One operator's needs: its work on one PCU over the whole batch, the weights a matrix operator
// keeps in PMUs while its section runs, and a PMU buffer per operand that flows through it.
inline SectionOp make_op(const ir::Graph& g, const RduModel& model, const ValueRoots& r,
                         size_t ni) {
  const ir::Node& n = g.nodes[ni];
  const Target& t = model.target();
  SectionOp op;
  op.node = static_cast<int64_t>(ni);
  op.op = ir::op_name(n.kind);
  std::vector<ir::TensorMeta> ins, outs;
  double bytes = 0;
  const bool matrix = emu::matrix_like(n.kind);
  for (auto v : n.inputs) {
    const auto vu = static_cast<size_t>(v);
    ins.push_back(g.values[vu].meta);
    bytes += nbytes(g, v);
    if (r.constant[vu]) continue;
    const auto& rv = g.values[static_cast<size_t>(r.root[vu])];
    if (matrix && rv.kind == ir::ValueKind::State)
      op.resident_bytes += nbytes(g, v);
    else
      ++op.stream_pmus;
  }
  for (auto v : n.outputs) {
    outs.push_back(g.values[static_cast<size_t>(v)].meta);
    bytes += nbytes(g, v);
    ++op.stream_pmus;
  }
  op.stream_pmus = std::max<int64_t>(1, op.stream_pmus);
  op.flops = ir::op_flops(n.kind, n.attrs, ins, outs);
  const DType dt = !outs.empty() ? outs[0].dtype : (!ins.empty() ? ins[0].dtype : kFloat32);
  op.work_cycles = std::max(op.flops / model.rate(dt, matrix), bytes / t.pmu_bytes_per_cycle);
  return op;
}

inline int64_t min_pmus(const SectionOp& op, const Target& t) {
  return op.stream_pmus +
         static_cast<int64_t>(std::ceil(op.resident_bytes / static_cast<double>(t.pmu_bytes)));
}

// PCUs per operator: the smallest stage time tau for which every operator, given the PCUs its
// work needs at tau (at least one), fits the section's PCUs.
inline void balance_pcus(Section& s, int64_t pcus_total) {
  double hi = 0;
  for (auto& op : s.ops) hi = std::max(hi, op.work_cycles);
  auto pcus_for = [](const SectionOp& op, double tau) {
    return tau <= 0 ? 1.0 : std::max(1.0, std::ceil(op.work_cycles / tau));
  };
  if (hi > 0) {
    auto total = [&](double tau) {
      double sum = 0;
      for (auto& op : s.ops) sum += pcus_for(op, tau);
      return sum;
    };
    double lo = hi * 1e-12;
    for (int it = 0; it < 200 && hi - lo > 1e-9 * hi; ++it) {
      const double mid = std::sqrt(lo * hi);
      (total(mid) > static_cast<double>(pcus_total) ? lo : hi) = mid;
    }
  }
  s.pcus = 0;
  for (auto& op : s.ops) {
    op.pcus = static_cast<int64_t>(pcus_for(op, hi));
    op.stage_cycles = op.work_cycles / static_cast<double>(op.pcus);
    s.pcus += op.pcus;
  }
}

// The operators of each section, in graph order.
inline std::vector<Section> cut_sections(const std::vector<SectionOp>& ops, const RduModel& model,
                                         int64_t pcus_total, int64_t pmus_total) {
  std::vector<Section> out;
  int64_t pmus = 0;
  for (const auto& op : ops) {
    const int64_t need = min_pmus(op, model.target());
    const bool join = model.optimization() == Optimization::O1 && !out.empty() &&
                      static_cast<int64_t>(out.back().ops.size()) < pcus_total &&
                      pmus + need <= pmus_total;
    if (!join) {
      out.emplace_back();
      pmus = 0;
    }
    out.back().ops.push_back(op);
    pmus += need;
  }
  return out;
}

inline std::string not_fit_on_chip(const SectionPlan& p, size_t si, const SectionOp& op,
                                   const Target& t) {
  std::ostringstream os;
  os << "section " << si << " (" << op.op << ", node " << op.node << ") needs " << op.stream_pmus
     << " PMU buffers for the operands that flow through it and at least one more for its "
     << emu::bytes_text(op.resident_bytes) << " of weights, but " << p.num_tiles << " tile"
     << (p.num_tiles == 1 ? "" : "s") << " of " << t.name << " have " << p.pmus_total
     << " PMUs; give the program more tiles (--num-tiles, at most " << t.tiles_per_rdu << ")";
  return os.str();
}

inline std::string not_fit_ddr(const SectionPlan& p, double between, int64_t at, const Target& t) {
  std::ostringstream os;
  os << "the program does not fit the DDR of its " << p.num_tiles << " tile"
     << (p.num_tiles == 1 ? "" : "s") << " of " << t.name << ": it needs "
     << emu::bytes_text(p.ddr_peak_bytes) << " at once (" << emu::bytes_text(p.state_bytes)
     << " of weights and optimizer state, " << emu::bytes_text(between)
     << " of tensors between sections while section " << at << " runs), the tiles' share of the "
     << "RDU's DDR is " << emu::bytes_text(p.ddr_capacity_bytes) << ". A smaller batch (-b) "
     << "keeps fewer activations; more tiles (--num-tiles) give a larger share of the DDR";
  return os.str();
}

// Each section's reads and writes of DDR, and the most bytes that wait in DDR between sections
// at once (returns it, with the section where it happens in `at`).
inline double ddr_traffic(SectionPlan& p, const ir::Graph& g, const ValueRoots& r,
                          const std::vector<int64_t>& section_of_node, int64_t& at) {
  const size_t V = g.values.size();
  const auto S = static_cast<int64_t>(p.sections.size());
  std::vector<int64_t> producer(V, -1), last_reader(V, -1);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni)
    if (section_of_node[ni] >= 0)
      for (auto o : g.nodes[ni].outputs) producer[static_cast<size_t>(o)] = section_of_node[ni];
  std::vector<char> leaves(V, 0);  // read after the step: outputs and new values of states
  for (auto v : g.outputs) leaves[static_cast<size_t>(r.root[static_cast<size_t>(v)])] = 1;
  for (auto& u : g.updates) leaves[static_cast<size_t>(r.root[static_cast<size_t>(u.value)])] = 1;

  for (int64_t s = 0; s < S; ++s) {
    Section& sec = p.sections[static_cast<size_t>(s)];
    std::vector<std::pair<int64_t, int64_t>> read;  // (value, passes), each value once
    for (auto& op : sec.ops) {
      const ir::Node& n = g.nodes[static_cast<size_t>(op.node)];
      const bool update = ir::op_category(n.kind) == ir::OpCategory::Update;
      for (auto v : n.inputs) {
        const auto vu = static_cast<size_t>(v);
        if (r.constant[vu]) continue;
        const auto root = static_cast<size_t>(r.root[vu]);
        last_reader[root] = std::max(last_reader[root], s);
        // Updated in place: the new value goes back to DDR.
        if (update && g.values[root].kind == ir::ValueKind::State)
          sec.ddr_write_bytes += nbytes(g, v);
        if (producer[root] == s) continue;
        // Resident weights come in once; what streams past them, once a pass.
        const bool resident =
            emu::matrix_like(n.kind) && g.values[root].kind == ir::ValueKind::State;
        const int64_t passes = resident ? 1 : op.passes;
        auto it = std::find_if(read.begin(), read.end(), [&](auto& e) { return e.first == v; });
        if (it == read.end())
          read.emplace_back(v, passes);
        else
          it->second = std::max(it->second, passes);
      }
    }
    for (auto& [v, passes] : read) sec.ddr_read_bytes += nbytes(g, v) * static_cast<double>(passes);
  }
  // A value read by a later section (or after the step) is written once by its own and waits
  // in DDR until its last reader has run.
  std::vector<double> live(static_cast<size_t>(S) + 2, 0.0);
  for (size_t v = 0; v < V; ++v) {
    const bool input = g.values[v].kind == ir::ValueKind::Input && last_reader[v] >= 0;
    const int64_t from = input ? 0 : producer[v];
    if (from < 0 || static_cast<int64_t>(v) != r.root[v]) continue;
    // Read after the step: kept past the last section.
    const int64_t until = leaves[v] ? S : last_reader[v];
    if (!input && until <= from) continue;
    if (!input)
      p.sections[static_cast<size_t>(from)].ddr_write_bytes += nbytes(g, static_cast<int64_t>(v));
    live[static_cast<size_t>(from)] += nbytes(g, static_cast<int64_t>(v));
    live[static_cast<size_t>(until) + 1] -= nbytes(g, static_cast<int64_t>(v));
  }
  double cur = 0, peak = 0;
  at = 0;
  for (int64_t s = 0; s < S; ++s) {
    cur += live[static_cast<size_t>(s)];
    if (cur > peak) peak = cur, at = s;
  }
  return peak;
}

// Each section's PMUs (tiling an operator whose weights exceed them), PCUs and time.
inline void size_section(SectionPlan& p, Section& s, const RduModel& model) {
  const Target& t = model.target();
  int64_t pmus = 0;
  for (auto& op : s.ops) {
    op.pmus = min_pmus(op, t);
    pmus += op.pmus;
    s.resident_bytes += op.resident_bytes;
    s.flops += op.flops;
  }
  if (pmus > p.pmus_total && s.ops.size() == 1) {  // tiled over its weights: several passes
    auto& op = s.ops[0];
    const int64_t room = p.pmus_total - op.stream_pmus;
    if (room >= 1) {
      op.passes = static_cast<int64_t>(std::ceil(
          op.resident_bytes / (static_cast<double>(room) * static_cast<double>(t.pmu_bytes))));
      op.pmus = p.pmus_total;
      pmus = p.pmus_total;
    }
  }
  s.pmus = pmus;
  balance_pcus(s, p.pcus_total);
  double slowest = 0, sum = 0;
  for (size_t i = 0; i < s.ops.size(); ++i) {
    sum += s.ops[i].stage_cycles;
    if (s.slowest_op < 0 || s.ops[i].stage_cycles > slowest)
      slowest = s.ops[i].stage_cycles, s.slowest_op = static_cast<int64_t>(i);
  }
  const double chunks = static_cast<double>(std::max(p.samples, t.pipeline_chunks));
  s.compute_cycles = std::ceil(slowest + (sum - slowest) / chunks);
  s.switch_cycles = model.section_switch_cycles();
  s.label = s.ops.front().op + (s.ops.size() > 1 ? " +" + std::to_string(s.ops.size() - 1) : "");
}

}  // namespace sdetail

IPUML_INLINE SectionPlan plan_sections(const ir::Graph& g, const RduModel& model,
                                       double extra_state_bytes) {
  using namespace sdetail;
  const Target& t = model.target();
  SectionPlan p;
  p.target = t.name;
  p.optimization = model.optimization();
  p.num_tiles = model.num_tiles();
  p.samples = emu::batch_of(g);  // the batch one instance runs
  p.pcus_total = p.num_tiles * t.pcus_per_tile;
  p.pmus_total = p.num_tiles * t.pmus_per_tile;
  p.ddr_capacity_bytes = t.ddr_bytes * model.share();
  const ValueRoots r = value_roots(g);

  std::vector<SectionOp> ops;
  for (size_t ni = 0; ni < g.nodes.size(); ++ni)
    if (!emu::idle_node(g, g.nodes[ni])) ops.push_back(make_op(g, model, r, ni));
  p.sections = cut_sections(ops, model, p.pcus_total, p.pmus_total);
  std::vector<int64_t> section_of_node(g.nodes.size(), -1);
  for (size_t s = 0; s < p.sections.size(); ++s)
    for (auto& op : p.sections[s].ops)
      section_of_node[static_cast<size_t>(op.node)] = static_cast<int64_t>(s);

  for (size_t s = 0; s < p.sections.size(); ++s) {
    Section& sec = p.sections[s];
    size_section(p, sec, model);
    if (sec.pmus > p.pmus_total && p.message.empty())
      p.message = not_fit_on_chip(p, s, sec.ops[0], t);
  }
  for (auto v : g.states) p.state_bytes += nbytes(g, v);
  p.state_bytes += extra_state_bytes;
  int64_t at = 0;
  const double between = ddr_traffic(p, g, r, section_of_node, at);
  p.ddr_peak_bytes = p.state_bytes + between;

  for (size_t s = 0; s < p.sections.size(); ++s) {
    Section& sec = p.sections[s];
    sec.ddr_cycles = model.ddr_cycles(sec.ddr_read_bytes + sec.ddr_write_bytes);
    const double busy = std::max(sec.compute_cycles, sec.ddr_cycles);
    sec.cycles = busy + sec.switch_cycles;
    sec.bound = sec.switch_cycles > busy              ? "switch"
                : sec.ddr_cycles > sec.compute_cycles ? "DDR"
                                                      : "compute";
    p.step_cycles += sec.cycles;
    p.flops += sec.flops;
    p.ddr_bytes_moved += sec.ddr_read_bytes + sec.ddr_write_bytes;
    if (p.slowest < 0 || sec.cycles > p.sections[static_cast<size_t>(p.slowest)].cycles)
      p.slowest = static_cast<int64_t>(s);
  }
  if (p.message.empty() && p.ddr_peak_bytes > p.ddr_capacity_bytes)
    p.message = not_fit_ddr(p, between, at, t);
  p.fits = p.message.empty();
  return p;
}

IPUML_INLINE std::string describe(const SectionPlan& p, size_t max_rows) {
  std::ostringstream os;
  if (!p.fits) return p.message + "\n";
  os << "Sections on " << p.target << " (" << p.num_tiles << " tile"
     << (p.num_tiles == 1 ? "" : "s") << ", " << optimization_name(p.optimization)
     << "): " << p.sections.size() << " section" << (p.sections.size() == 1 ? "" : "s") << ", "
     << emu::bytes_text(p.ddr_bytes_moved) << " of DDR traffic per step, "
     << emu::bytes_text(p.ddr_peak_bytes) << " of " << emu::bytes_text(p.ddr_capacity_bytes)
     << " DDR in use at most\n";
  std::vector<size_t> order(p.sections.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return p.sections[a].cycles > p.sections[b].cycles; });
  os << "  section  first op +more            PCUs   PMUs   DDR read  DDR write     cycles  "
        "bound\n";
  for (size_t i = 0; i < std::min(max_rows, order.size()); ++i) {
    const Section& s = p.sections[order[i]];
    os << "  " << std::setw(7) << order[i] << "  " << std::left << std::setw(22)
       << s.label.substr(0, 22) << std::right << std::setw(7) << s.pcus << std::setw(7) << s.pmus
       << std::setw(11) << emu::bytes_text(s.ddr_read_bytes) << std::setw(11)
       << emu::bytes_text(s.ddr_write_bytes) << std::setw(11) << std::fixed << std::setprecision(0)
       << s.cycles << "  " << s.bound << "\n";
  }
  if (order.size() > max_rows) os << "  ... " << order.size() - max_rows << " more sections\n";
  return os.str();
}

IPUML_INLINE std::string sections_json(const SectionPlan& p) {
  nlohmann::json j;
  j["schema"] = "ipuml.sections/1";
  j["target"] = p.target;
  j["optimization"] = optimization_name(p.optimization);
  j["num_tiles"] = p.num_tiles;
  // What the program holds, in the RDU's words, for reports that do not know them.
  j["held"] =
      std::to_string(p.num_tiles) + " tile" + (p.num_tiles == 1 ? "" : "s") + " of " + p.target;
  j["compute_noun"] = "PCU";
  j["memory_noun"] = "PMU";
  j["samples"] = p.samples;
  j["compute_units"] = p.pcus_total;
  j["memory_units"] = p.pmus_total;
  j["fits"] = p.fits;
  j["message"] = p.message;
  j["step_cycles"] = p.step_cycles;
  j["flops"] = p.flops;
  j["state_bytes"] = p.state_bytes;
  j["ddr_peak_bytes"] = p.ddr_peak_bytes;
  j["ddr_capacity_bytes"] = p.ddr_capacity_bytes;
  j["ddr_bytes_moved"] = p.ddr_bytes_moved;
  j["slowest"] = p.slowest;
  auto& arr = j["sections"] = nlohmann::json::array();
  for (const Section& s : p.sections) {
    nlohmann::json e;
    e["label"] = s.label;
    e["ops"] = s.ops.size();
    e["first_node"] = s.ops.empty() ? -1 : s.ops.front().node;
    e["compute_units"] = s.pcus;
    e["memory_units"] = s.pmus;
    e["flops"] = s.flops;
    e["resident_bytes"] = s.resident_bytes;
    e["ddr_read_bytes"] = s.ddr_read_bytes;
    e["ddr_write_bytes"] = s.ddr_write_bytes;
    e["compute_cycles"] = s.compute_cycles;
    e["ddr_cycles"] = s.ddr_cycles;
    e["switch_cycles"] = s.switch_cycles;
    e["cycles"] = s.cycles;
    e["bound"] = s.bound;
    if (s.slowest_op >= 0) e["slowest_op"] = s.ops[static_cast<size_t>(s.slowest_op)].op;
    arr.push_back(std::move(e));
  }
  return j.dump();
}

}  // namespace ipuml::sambanova
