// Body of the trace-event writer (compiled once in src/lib/emu_trace.cpp).
#pragma once

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include <ipuml/backends/emu/schedule.hpp>
#include <ipuml/backends/emu/trace.hpp>
#include <ipuml/ir/stages.hpp>

namespace ipuml::emu {

namespace trdetail {

using nlohmann::json;

inline json meta(const char* what, int64_t pid, int64_t tid, const std::string& name) {
  json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

inline json sort_index(const char* what, int64_t pid, int64_t tid, int64_t index) {
  json e = {{"name", what}, {"ph", "M"}, {"pid", pid}, {"args", {{"sort_index", index}}}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

// The events of one trace, timed in cycles and written in microseconds.
struct Events {
  json ev = json::array();
  double us = 0;  // microseconds per cycle

  void x(const std::string& name, const char* cat, int64_t pid, int64_t tid, double start,
         double cycles, json args) {
    args["cycles"] = cycles;
    ev.push_back({{"name", name},
                  {"cat", cat},
                  {"ph", "X"},
                  {"pid", pid},
                  {"tid", tid},
                  {"ts", start * us},
                  {"dur", cycles * us},
                  {"args", std::move(args)}});
  }
};

// One step: the supersteps in program order, devices of a sharded program one after another.
// Each device's host streams (and the two syncs around them) come before its first superstep.
// Returns the step's cycles.
inline double step_events(Events& e, const ir::Graph& g, const Plan& p, int64_t groups) {
  const emu::Machine& t = p.machine;
  const int64_t devices = t.devices;
  const int64_t T = t.units_per_device;
  for (int64_t i = 0; i < devices; ++i) {
    e.ev.push_back(meta("thread_name", i, 0, "supersteps"));
    e.ev.push_back(sort_index("thread_sort_index", i, 0, 0));
    for (int64_t k = 0; k < groups; ++k) {
      const int64_t lo = k * T / groups, hi = (k + 1) * T / groups - 1;
      e.ev.push_back(meta("thread_name", i, 1 + k,
                          t.unit_noun + "s " + std::to_string(lo) + "-" + std::to_string(hi)));
      e.ev.push_back(sort_index("thread_sort_index", i, 1 + k, 1 + k));
    }
  }
  std::vector<double> host(static_cast<size_t>(devices), 0.0);
  for (int64_t i = 0; i < devices && i < static_cast<int64_t>(p.cycles.per_device.size()); ++i) {
    const auto& c = p.cycles.per_device[static_cast<size_t>(i)];
    host[static_cast<size_t>(i)] = c.host + c.sync;
  }
  for (auto& s : p.supersteps) host[static_cast<size_t>(s.device)] -= s.sync;
  std::vector<bool> host_done(static_cast<size_t>(devices), false);
  double cursor = 0;
  auto emit_host = [&](int64_t i) {
    if (host_done[static_cast<size_t>(i)]) return;
    host_done[static_cast<size_t>(i)] = true;
    const double h = std::max(host[static_cast<size_t>(i)], 0.0);
    if (h <= 0) return;
    e.x("host streams", "host", i, 0, cursor, h,
        {{"in_bytes", p.host_in_bytes}, {"out_bytes", p.host_out_bytes}});
    cursor += h;
  };
  std::vector<bool> touched(static_cast<size_t>(groups));
  for (auto& s : p.supersteps) {
    emit_host(s.device);
    const bool op = s.node >= 0;
    const std::string name =
        op ? std::string(ir::op_name(g.nodes[static_cast<size_t>(s.node)].kind)) + " #" +
                 std::to_string(s.node)
           : std::string("state write-back");
    const json args = {{"node", s.node}};
    const std::pair<const char*, double> phases[] = {
        {"sync", s.sync}, {"exchange", s.exchange}, {"compute", s.compute}};
    for (auto& [phase, cycles] : phases) {
      if (cycles <= 0) continue;
      e.x(name, phase, s.device, 0, cursor, cycles, args);
      if (std::string(phase) == "compute" && op) {
        // The unit groups holding the op's vertices compute; the others wait at the sync.
        const auto& span = p.nodes[static_cast<size_t>(s.node)].span;
        std::fill(touched.begin(), touched.end(), false);
        std::vector<int64_t> count(static_cast<size_t>(groups), 0);
        const int64_t parts = std::min<int64_t>(span.parts, T);
        for (int64_t q = 0; q < parts; ++q) {
          const int64_t unit = span.unit(q, T);
          count[static_cast<size_t>(unit * groups / T)]++;
        }
        for (int64_t k = 0; k < groups; ++k)
          if (count[static_cast<size_t>(k)] > 0)
            e.x(name, "compute", s.device, 1 + k, cursor, cycles,
                {{"node", s.node}, {"units", count[static_cast<size_t>(k)]}});
      }
      cursor += cycles;
    }
  }
  for (int64_t i = 0; i < devices; ++i) emit_host(i);
  return cursor;
}

// Pipelined: in pipeline cycle c stage s works on micro-batch c - s; a device runs the stages it
// holds one after another, and the cycle ends with a global sync once the busiest device is done
// (pipelined_cycles, whose sum this reproduces step for step). Returns the cycles of all
// `micro_batches`.
inline double pipeline_events(Events& e, const ir::Graph& g, const Plan& p, int64_t micro_batches) {
  const int64_t devices = p.machine.devices;
  const double device_sync = p.model->device_sync_cycles();
  const auto sc = stage_cycles(g, p);
  const int64_t S = static_cast<int64_t>(sc.size());
  const int64_t G = micro_batches;
  for (int64_t i = 0; i < devices; ++i) {
    e.ev.push_back(meta("thread_name", i, 0, "pipeline cycles"));
    e.ev.push_back(sort_index("thread_sort_index", i, 0, 0));
    for (int64_t s = 0; s < S; ++s) {
      e.ev.push_back(meta("thread_name", i, 1 + s, "stage " + std::to_string(s)));
      e.ev.push_back(sort_index("thread_sort_index", i, 1 + s, 1 + s));
    }
  }
  double cursor = 0;
  std::vector<double> work(static_cast<size_t>(devices));
  for (int64_t cyc = 0; cyc < G + S - 1; ++cyc) {
    std::fill(work.begin(), work.end(), 0.0);
    for (int64_t s = 0; s < S; ++s) {
      const int64_t mb = cyc - s;
      if (mb < 0 || mb >= G) continue;
      for (int64_t i = 0; i < devices; ++i) {
        const double c = sc[static_cast<size_t>(s)][static_cast<size_t>(i)];
        if (c <= 0) continue;
        e.x("stage " + std::to_string(s) + ", micro-batch " + std::to_string(mb), "compute", i,
            1 + s, cursor + work[static_cast<size_t>(i)], c,
            {{"stage", s}, {"micro_batch", mb}, {"pipeline_cycle", cyc}});
        work[static_cast<size_t>(i)] += c;
      }
    }
    const double len = *std::max_element(work.begin(), work.end());
    for (int64_t i = 0; i < devices; ++i)
      if (work[static_cast<size_t>(i)] > 0)
        e.x("pipeline cycle " + std::to_string(cyc), "compute", i, 0, cursor,
            work[static_cast<size_t>(i)], {{"pipeline_cycle", cyc}});
    cursor += len;
    for (int64_t i = 0; i < devices; ++i)
      e.x("global sync", "sync", i, 0, cursor, device_sync, {{"pipeline_cycle", cyc}});
    cursor += device_sync;
  }
  return cursor;
}

}  // namespace trdetail

IPUML_INLINE std::string make_trace_json(const ir::Graph& g, const Plan& p, const TraceOptions& o) {
  using nlohmann::json;
  const emu::Machine& t = p.machine;
  const double us = 1e6 / t.clock_hz;  // microseconds per cycle
  const int64_t devices = t.devices;
  const int64_t T = t.units_per_device;
  const int64_t groups = std::clamp<int64_t>(o.unit_groups, 1, std::max<int64_t>(T, 1));
  trdetail::Events e;
  e.us = us;
  for (int64_t i = 0; i < devices; ++i) {
    e.ev.push_back(trdetail::meta("process_name", i, -1,
                                  t.device_noun + " " + std::to_string(i) + " (" + t.name + ")"));
    e.ev.push_back(trdetail::sort_index("process_sort_index", i, -1, i));
  }
  const int stages = ir::stage_count(g);
  const bool pipeline = o.pipelined_micro_batches > 0 && stages > 1;
  const double end = pipeline ? trdetail::pipeline_events(e, g, p, o.pipelined_micro_batches)
                              : trdetail::step_events(e, g, p, groups);
  json j;
  j["traceEvents"] = std::move(e.ev);
  j["displayTimeUnit"] = "ns";
  j["otherData"] = {{"schema", "ipuml.trace/2"},
                    {"program", o.program},
                    {"target", t.name},
                    {"clock_hz", t.clock_hz},
                    {"view", pipeline ? "pipeline" : "step"},
                    {"stages", stages},
                    {"micro_batches", pipeline ? o.pipelined_micro_batches : 1},
                    {"total_cycles", end},
                    {"total_us", end * us}};
  return j.dump();
}

}  // namespace ipuml::emu
