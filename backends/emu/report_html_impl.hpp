// Body of ipuml-report's page (compiled once in src/lib/emu_report_html.cpp): the reports are
// digested here into the few arrays the page draws, embedded as JSON, and drawn by the inline
// script when the page loads.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include <ipuml/backends/emu/report_html.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::emu {

namespace rhdetail {

using nlohmann::json;

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  IPUML_CHECK(static_cast<bool>(f), "ipuml-report: cannot read '", p.string(), "'");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// `file` (when it exists) as the profile's `key`, refused by name unless it is JSON of `schema`.
inline void attach_placement(ReportProgram& r, const std::filesystem::path& file, const char* key,
                             const char* schema, const char* what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return;
  json l;
  try {
    l = json::parse(read_text(file));
  } catch (const json::exception& e) {
    fail("ipuml-report: '", file.string(), "' is not valid JSON (", e.what(), ")");
  }
  IPUML_CHECK(l.is_object() && l.value("schema", std::string()) == schema, "ipuml-report: '",
              file.string(), "' is not ", what, " (expected \"schema\": \"", schema, "\")");
  json prof = json::parse(r.profile_json, nullptr, false);
  if (prof.is_object()) {
    prof[key] = std::move(l);
    r.profile_json = prof.dump();
  }
}

inline ReportProgram load_one(const std::filesystem::path& profile, const std::string& name) {
  ReportProgram r;
  r.name = name;
  r.profile_json = read_text(profile);
  const auto trace = profile.parent_path() / "trace.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(trace, ec)) r.trace_json = read_text(trace);
  // A target's placement of the program on its device (the CS-2's wafer: layout.json; the
  // RDU's sections: sections.json) joins the profile under its own key; a profile that is not
  // JSON is left for digest() to refuse.
  attach_placement(r, profile.parent_path() / "layout.json", "layout", "ipuml.layout/1",
                   "an ipuml layout");
  attach_placement(r, profile.parent_path() / "sections.json", "sections", "ipuml.sections/1",
                   "an ipuml section plan");
  return r;
}

// Timeline rows beyond this many events are cut (a model of thousands of ops still draws).
inline constexpr size_t kMaxTimelineEvents = 40000;

inline json digest_trace(const std::string& text, const std::string& program,
                         const std::string& device) {
  json out = json::object();
  if (text.empty()) return out;
  json tr;
  try {
    tr = json::parse(text);
  } catch (const std::exception& e) {
    fail("ipuml-report: the trace.json of program '", program, "' is not valid JSON (", e.what(),
         ")");
  }
  IPUML_CHECK(tr.is_object() && tr.contains("traceEvents") && tr["traceEvents"].is_array(),
              "ipuml-report: the trace.json of program '", program,
              "' has no traceEvents array (expected Chrome trace-event JSON)");
  const std::string view =
      tr.contains("otherData") ? tr["otherData"].value("view", std::string("step")) : "step";
  // Lanes: the per-device rows (tid 0) and, for a pipeline, its stages; unit groups are left to
  // Perfetto, where trace.json opens with every row.
  std::map<std::pair<int64_t, int64_t>, std::string> names;
  for (auto& e : tr["traceEvents"])
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name" && e.contains("tid"))
      names[{e.value("pid", int64_t{0}), e.value("tid", int64_t{0})}] =
          e["args"].value("name", std::string());
  std::map<std::string, int> cat_index, name_index;
  json cats = json::array(), labels = json::array(), events = json::array();
  std::map<std::pair<int64_t, int64_t>, int> lane_index;
  json lanes = json::array();
  size_t total = 0;
  for (auto& e : tr["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const int64_t pid = e.value("pid", int64_t{0}), tid = e.value("tid", int64_t{0});
    if (view != "pipeline" && tid != 0) continue;
    ++total;
    if (events.size() >= kMaxTimelineEvents) continue;
    auto lane = lane_index.find({pid, tid});
    if (lane == lane_index.end()) {
      lane = lane_index.emplace(std::make_pair(pid, tid), static_cast<int>(lanes.size())).first;
      auto nm = names.find({pid, tid});
      lanes.push_back({{"pid", pid},
                       {"tid", tid},
                       {"name", device + " " + std::to_string(pid) + " " +
                                    (nm == names.end() ? std::to_string(tid) : nm->second)}});
    }
    const std::string cat = e.value("cat", std::string("compute"));
    auto c = cat_index.find(cat);
    if (c == cat_index.end()) {
      c = cat_index.emplace(cat, static_cast<int>(cats.size())).first;
      cats.push_back(cat);
    }
    const std::string label = e.value("name", std::string());
    auto n = name_index.find(label);
    if (n == name_index.end()) {
      n = name_index.emplace(label, static_cast<int>(labels.size())).first;
      labels.push_back(label);
    }
    events.push_back({lane->second, e.value("ts", 0.0), e.value("dur", 0.0), c->second, n->second});
  }
  // Lanes in device order, each device's rows in tid order.
  out["view"] = view;
  out["lanes"] = lanes;
  out["categories"] = cats;
  out["labels"] = labels;
  out["events"] = events;
  out["total_events"] = total;
  out["total_us"] = tr.contains("otherData") ? tr["otherData"].value("total_us", 0.0) : 0.0;
  return out;
}

// layout.json's fields the wafer section draws, checked so that a damaged file is refused by
// name rather than drawn wrong.
inline json digest_layout(const json& l, const std::string& program) {
  const auto bad = [&](const std::string& what) {
    fail("ipuml-report: the layout of program '", program, "' ", what);
  };
  if (!l.is_object() || l.value("schema", std::string()) != "ipuml.layout/1")
    bad("is not an ipuml layout (expected \"schema\": \"ipuml.layout/1\")");
  json d = {{"mode", l.value("mode", std::string())},
            {"why", l.value("why", std::string())},
            {"device", l.value("device", std::string("device"))},
            {"note", l.value("note", std::string())},
            {"regions", json::array()}};
  const json& regions = l.contains("regions") ? l.at("regions") : json::array();
  if (!regions.is_array()) bad("has \"regions\" that is not a list");
  if (regions.empty()) return d;
  try {
    const auto& g = l.at("grid");
    const int64_t cols = g.at("columns").get<int64_t>(), rows = g.at("rows").get<int64_t>();
    const auto& cells = g.at("cells");
    if (cols <= 0 || rows <= 0 || cols * rows > (int64_t{1} << 22) || !cells.is_array() ||
        static_cast<int64_t>(cells.size()) != cols * rows)
      bad("has a grid whose cells are not columns x rows");
    const auto n = static_cast<int64_t>(regions.size());
    for (const auto& c : cells)
      if (!c.is_number_integer() || c.get<int64_t>() < -1 || c.get<int64_t>() >= n)
        bad("has a cell naming no region");
    json rs = json::array();
    for (const auto& r : regions)
      rs.push_back(
          {{"name", r.at("name").get<std::string>()},
           {"pes", r.at("pes").get<double>()},
           {"bytes", r.at("state_bytes").get<double>() + r.at("activation_bytes").get<double>()},
           {"cycles", r.at("cycles_per_sample").get<double>()},
           {"utilisation", r.at("utilisation").get<double>()}});
    d["regions"] = rs;
    d["grid"] = {{"columns", cols},
                 {"rows", rows},
                 {"pes_per_cell", g.at("pes_per_cell")},
                 {"cells", cells}};
    d["slowest"] = l.at("slowest");
    d["samples"] = l.at("samples");
    d["pes_used"] = l.at("pes_used");
    d["pes"] = l.at("fabric").at("pes");
    d["sample_cycles"] = l.at("sample_cycles");
    d["step_cycles"] = l.at("step_cycles");
    d["utilisation"] = l.at("utilisation");
  } catch (const json::exception& e) {
    bad(std::string("lacks a field the wafer section needs (") + e.what() + ")");
  }
  return d;
}

// sections.json's fields the sections view draws (a target that runs a program as sections
// loaded one after another, the RDU's), checked so that a damaged file is refused by name rather
// than drawn wrong. The target names what the program holds and its two kinds of unit.
inline json digest_sections(const json& l, const std::string& program) {
  const auto bad = [&](const std::string& what) {
    fail("ipuml-report: the section plan of program '", program, "' ", what);
  };
  if (!l.is_object() || l.value("schema", std::string()) != "ipuml.sections/1")
    bad("is not an ipuml section plan (expected \"schema\": \"ipuml.sections/1\")");
  json d;
  try {
    const auto& secs = l.at("sections");
    if (!secs.is_array()) bad("has \"sections\" that is not a list");
    json ss = json::array();
    for (const auto& s : secs) {
      const std::string bound = s.at("bound").get<std::string>();
      if (bound != "compute" && bound != "DDR" && bound != "switch")
        bad("has a section bound by '" + bound + "' (expected compute, DDR or switch)");
      const double cycles = s.at("cycles").get<double>();
      if (!(cycles >= 0) || !std::isfinite(cycles)) bad("has a section of negative cycles");
      ss.push_back({{"label", s.at("label").get<std::string>()},
                    {"ops", s.at("ops").get<int64_t>()},
                    {"compute_units", s.at("compute_units").get<int64_t>()},
                    {"memory_units", s.at("memory_units").get<int64_t>()},
                    {"flops", s.at("flops").get<double>()},
                    {"ddr_read", s.at("ddr_read_bytes").get<double>()},
                    {"ddr_write", s.at("ddr_write_bytes").get<double>()},
                    {"compute", s.at("compute_cycles").get<double>()},
                    {"ddr", s.at("ddr_cycles").get<double>()},
                    {"switch", s.at("switch_cycles").get<double>()},
                    {"cycles", cycles},
                    {"bound", bound}});
    }
    d = {{"target", l.at("target").get<std::string>()},
         {"optimization", l.at("optimization").get<std::string>()},
         {"held", l.at("held").get<std::string>()},
         {"compute_noun", l.at("compute_noun").get<std::string>()},
         {"memory_noun", l.at("memory_noun").get<std::string>()},
         {"samples", l.at("samples").get<int64_t>()},
         {"compute_units", l.at("compute_units").get<int64_t>()},
         {"memory_units", l.at("memory_units").get<int64_t>()},
         {"fits", l.at("fits").get<bool>()},
         {"message", l.at("message").get<std::string>()},
         {"step_cycles", l.at("step_cycles").get<double>()},
         {"ddr_peak_bytes", l.at("ddr_peak_bytes").get<double>()},
         {"ddr_capacity_bytes", l.at("ddr_capacity_bytes").get<double>()},
         {"ddr_bytes_moved", l.at("ddr_bytes_moved").get<double>()},
         {"slowest", l.at("slowest").get<int64_t>()},
         {"sections", ss}};
    const int64_t slowest = d["slowest"].get<int64_t>();
    if (slowest < -1 || slowest >= static_cast<int64_t>(ss.size()))
      bad("names a slowest section it does not have");
  } catch (const json::exception& e) {
    bad(std::string("lacks a field the sections view needs (") + e.what() + ")");
  }
  return d;
}

inline json digest(const ReportProgram& p) {
  json prof;
  try {
    prof = json::parse(p.profile_json);
  } catch (const std::exception& e) {
    fail("ipuml-report: the profile of program '", p.name, "' is not valid JSON (", e.what(), ")");
  }
  const std::string schema = prof.is_object() ? prof.value("schema", std::string()) : "";
  IPUML_CHECK(schema == "ipuml.profile/2" || schema == "ipuml.profile/1",
              "ipuml-report: the profile of program '", p.name,
              "' is not an ipuml profile (expected \"schema\": \"ipuml.profile/2\", as "
              "profile.json has, or an earlier \"ipuml.profile/1\")");
  // Version 1 (every profile an IPU's) named the memory's units after the IPU's tiles.
  const bool v1 = schema == "ipuml.profile/1";
  const char* per_unit = v1 ? "per_tile" : "per_unit";
  const char* top_units = v1 ? "top_tiles" : "top_units";
  try {
    const auto& m = prof.at("memory");
    json d;
    d["name"] = p.name;
    // The machine's shape, whatever the target (profiles written before "machine" existed
    // were all IPU profiles and carry the IPU's own words in "target").
    if (prof.contains("machine")) {
      const auto& mc = prof.at("machine");
      d["machine"] = {{"name", mc.at("name")},
                      {"devices", mc.at("devices")},
                      {"units", mc.at("units_per_device")},
                      {"unit_bytes", mc.at("bytes_per_unit")},
                      {"clock_hz", mc.at("clock_hz")},
                      {"columns", mc.value("mesh_columns", 0)},
                      {"device", mc.value("device_noun", std::string("device"))},
                      {"unit", mc.value("unit_noun", std::string("unit"))}};
    } else {
      const auto& t = prof.at("target");
      d["machine"] = {{"name", t.at("name")},
                      {"devices", t.at("num_ipus")},
                      {"units", t.at("tiles_per_ipu")},
                      {"unit_bytes", t.at("bytes_per_tile")},
                      {"clock_hz", t.at("clock_hz")},
                      {"columns", 0},
                      {"device", "IPU"},
                      {"unit", "tile"}};
    }
    d["graph"] = prof.at("graph");
    json top = m.at(top_units);
    if (v1)
      for (auto& x : top) {
        x["unit"] = x.at("tile"), x["device"] = x.at("ipu");
        x.erase("tile"), x.erase("ipu");
      }
    d["memory"] = {{"per_unit", m.at(per_unit)},
                   {"categories", m.at("categories")},
                   {"top_units", top},
                   {"total_used", m.at("total_used")},
                   {"total_available", m.at("total_available")},
                   {"always_live", m.at("always_live")},
                   {"out_of_memory", m.at("out_of_memory")},
                   {"oom_message", m.value("oom_message", std::string())}};
    json ops = json::array(), always = json::array(), notalways = json::array();
    for (auto& s : prof.at("liveness")) {
      ops.push_back(s.at("op"));
      always.push_back(s.at("always_live"));
      notalways.push_back(s.at("not_always_live"));
    }
    d["liveness"] = {{"ops", ops}, {"always_live", always}, {"not_always_live", notalways}};
    d["operations"] = prof.value("operation_summary", json::array());
    const auto& ex = prof.at("execution");
    d["execution"] = {{"per_step", ex.at("per_step")}};
    d["trace"] = digest_trace(p.trace_json, p.name, d["machine"]["device"].get<std::string>());
    if (prof.contains("layout")) d["layout"] = digest_layout(prof.at("layout"), p.name);
    if (prof.contains("sections")) d["sections"] = digest_sections(prof.at("sections"), p.name);
    return d;
  } catch (const nlohmann::json::exception& e) {
    fail("ipuml-report: the profile of program '", p.name, "' lacks a field the page needs (",
         e.what(), ")");
  }
}

// The page's script, in parts joined by page_script(): the data and drawing helpers, the
// memory sections, liveness and busiest units, the device's layout (a target's placement), then
// the operations and timeline sections and the tabs.
inline const char* page_script_helpers() {
  return R"JS(
"use strict";
const DATA = JSON.parse(document.getElementById("ipuml-data").textContent);
const VIRIDIS = [[68,1,84],[71,44,122],[59,81,139],[44,113,142],[33,144,141],[39,173,129],
                 [92,200,99],[170,220,50],[253,231,37]];
const OVER = [220,20,60];
function ramp(f) {
  if (!(f >= 0)) f = 0;
  if (f > 1) return OVER;
  const x = f * (VIRIDIS.length - 1), i = Math.min(Math.floor(x), VIRIDIS.length - 2), t = x - i;
  return VIRIDIS[i].map((v, k) => Math.round(v + (VIRIDIS[i + 1][k] - v) * t));
}
const rgb = c => "rgb(" + c[0] + "," + c[1] + "," + c[2] + ")";
function bytes(b) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; ++i; }
  return (i ? b.toFixed(1) : String(Math.round(b))) + " " + u[i];
}
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
// A table of one header row and a row per entry of `rows` (each a list of cell values).
function table(headers, rows) {
  const t = el("table"), head = el("tr");
  for (const h of headers) head.appendChild(el("th", {}, h));
  t.appendChild(head);
  for (const r of rows) {
    const tr = el("tr");
    for (const v of r) tr.appendChild(el("td", {}, String(v)));
    t.appendChild(tr);
  }
  return t;
}
const SVG = "http://www.w3.org/2000/svg";  // a namespace name, never fetched
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
const tip = document.getElementById("tip");
function showTip(ev, text) {
  tip.textContent = text; tip.style.display = "block";
  tip.style.left = (ev.pageX + 12) + "px"; tip.style.top = (ev.pageY + 12) + "px";
}
function hideTip() { tip.style.display = "none"; }

)JS";
}

// Summary, memory per unit as a heat map, memory by category.
inline const char* page_script_memory() {
  return R"JS(
function summary(p, box) {
  const m = p.memory, t = p.machine, c = p.execution.per_step;
  const pct = 100 * m.total_used / m.total_available;
  const items = [
    ["Target", t.name + ", " + t.devices + " " + t.device + (t.devices > 1 ? "s" : "") + " x " +
               t.units + " " + t.unit + "s x " + bytes(t.unit_bytes)],
    ["Graph", p.graph.nodes + " ops, " + p.graph.compute_sets + " compute sets, " +
              p.graph.vertices + " vertices, " + p.graph.variables + " variables"],
    ["Memory", bytes(m.total_used) + " of " + bytes(m.total_available) + " (" + pct.toFixed(1) +
               " %), always live " + bytes(m.always_live)],
    ["Cycles per step", Math.round(c.total_cycles) + " (" + (c.simulated_seconds * 1e6).toFixed(2) +
                        " us simulated)"]];
  const dl = el("dl");
  for (const [k, v] of items) { dl.appendChild(el("dt", {}, k)); dl.appendChild(el("dd", {}, v)); }
  box.appendChild(dl);
  if (m.out_of_memory) box.appendChild(el("p", {"class": "oom"}, m.oom_message));
}

// Coloured by the fraction of unit memory used (PopVision's scale); "relative" rescales to the
// fullest unit, since a small model leaves every unit in the darkest colour.
let relative = false;
function heatmap(p, box) {
  const t = p.machine, per = p.memory.per_unit, T = t.units;
  const full = relative ? Math.max(1, ...per) : t.unit_bytes;
  // A mesh is drawn as its mesh; units in a line wrap at 64.
  const cols = t.columns > 0 ? Math.min(T, t.columns) : Math.min(T, 64);
  const rows = Math.ceil(T / cols), cell = 9, gap = 18;
  const cv = el("canvas", {id: "heatmap"});
  const devices = Math.max(1, Math.ceil(per.length / T));
  cv.width = cols * cell; cv.height = devices * (rows * cell + gap);
  const g = cv.getContext("2d");
  g.fillStyle = "#fff"; g.fillRect(0, 0, cv.width, cv.height);
  g.font = "12px sans-serif";
  for (let i = 0; i < devices; ++i) {
    const y0 = i * (rows * cell + gap);
    g.fillStyle = "#333"; g.fillText(t.device + " " + i, 0, y0 + 13);
    for (let k = 0; k < T && i * T + k < per.length; ++k) {
      const b = per[i * T + k];
      g.fillStyle = rgb(b > t.unit_bytes ? OVER : ramp(Math.min(b / full, 1)));
      g.fillRect((k % cols) * cell, y0 + gap + Math.floor(k / cols) * cell, cell - 1, cell - 1);
    }
  }
  cv.addEventListener("mousemove", ev => {
    const r = cv.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    const i = Math.floor(y / (rows * cell + gap)), yy = y - i * (rows * cell + gap) - gap;
    const k = Math.floor(yy / cell) * cols + Math.floor(x / cell);
    if (yy < 0 || k < 0 || k >= T || i * T + k >= per.length) return hideTip();
    const b = per[i * T + k];
    showTip(ev, t.device + " " + i + " " + t.unit + " " + k + ": " + bytes(b) + " (" +
                (100 * b / t.unit_bytes).toFixed(1) + " % of " + bytes(t.unit_bytes) + ")");
  });
  cv.addEventListener("mouseleave", hideTip);
  box.appendChild(cv);
  const lg = el("canvas", {"class": "legend"});
  lg.width = 256; lg.height = 12;
  const lgc = lg.getContext("2d");
  for (let x = 0; x < 256; ++x) { lgc.fillStyle = rgb(ramp(x / 255)); lgc.fillRect(x, 0, 1, 12); }
  const row = el("div", {"class": "legendrow"});
  row.appendChild(el("span", {}, "0 "));
  row.appendChild(lg);
  row.appendChild(el("span", {}, " " + bytes(full) + (relative ? " (the fullest " + t.unit + ")" :
                                 " per " + t.unit) + "; red: over " + bytes(t.unit_bytes)));
  const lab = el("label", {});
  const cb = el("input", {type: "checkbox"});
  cb.checked = relative;
  cb.addEventListener("change", () => {
    relative = cb.checked;
    const fresh = el("div");
    heatmap(p, fresh);
    box.replaceChildren(box.firstChild, ...fresh.childNodes);
  });
  lab.appendChild(cb);
  lab.appendChild(document.createTextNode(" relative to the fullest " + t.unit));
  row.appendChild(lab);
  box.appendChild(row);
}

function categories(p, box) {
  const cats = Object.entries(p.memory.categories);
  const max = Math.max(1, ...cats.map(c => c[1]));
  const W = 440, rowH = 22, left = 120;
  const s = svg("svg", {width: left + W + 110, height: cats.length * rowH + 4});
  cats.forEach(([name, b], i) => {
    const y = i * rowH, w = Math.max(1, W * b / max);
    s.appendChild(svg("text", {x: left - 6, y: y + 15, "text-anchor": "end"}, name));
    s.appendChild(svg("rect", {x: left, y: y + 3, width: w, height: rowH - 6, fill: "#4c78a8"}));
    s.appendChild(svg("text", {x: left + w + 6, y: y + 15}, bytes(b)));
  });
  box.appendChild(s);
}

)JS";
}

// Liveness over the program's steps, and the busiest units.
inline const char* page_script_liveness() {
  return R"JS(
function liveness(p, box) {
  const L = p.liveness, n = L.always_live.length;
  if (!n) { box.appendChild(el("p", {}, "No program steps.")); return; }
  const W = 900, H = 220, l = 70, b = 24;
  const tot = L.always_live.map((a, i) => a + L.not_always_live[i]);
  const max = Math.max(1, ...tot);
  const X = i => l + (n === 1 ? 0 : (W - l - 10) * i / (n - 1));
  const Y = v => H - b - (H - b - 24) * v / max;  // room above the peak for its label
  const s = svg("svg", {width: W, height: H});
  const area = (lo, hi, fill) => {
    let d = "M" + X(0) + "," + Y(hi[0]);
    for (let i = 1; i < n; ++i) d += "L" + X(i) + "," + Y(hi[i]);
    for (let i = n - 1; i >= 0; --i) d += "L" + X(i) + "," + Y(lo[i]);
    s.appendChild(svg("path", {d: d + "Z", fill: fill, stroke: "none"}));
  };
  area(L.always_live.map(() => 0), L.always_live, "#9ecae9");
  area(L.always_live, tot, "#f58518");
  s.appendChild(svg("line", {x1: l, y1: H - b, x2: W - 10, y2: H - b, stroke: "#333"}));
  s.appendChild(svg("line", {x1: l, y1: 24, x2: l, y2: H - b, stroke: "#333"}));
  s.appendChild(svg("text", {x: l - 4, y: 30, "text-anchor": "end"}, bytes(max)));
  s.appendChild(svg("text", {x: l - 4, y: H - b, "text-anchor": "end"}, "0"));
  s.appendChild(svg("text", {x: l, y: H - 6}, "step 0"));
  s.appendChild(svg("text", {x: W - 10, y: H - 6, "text-anchor": "end"}, "step " + (n - 1)));
  let peak = 0;
  for (let i = 1; i < n; ++i) if (tot[i] > tot[peak]) peak = i;
  s.appendChild(svg("text", {x: X(peak), y: Y(tot[peak]) - 3, "text-anchor": "middle"},
                    "peak: step " + peak + " " + L.ops[peak]));
  s.addEventListener("mousemove", ev => {
    const r = s.getBoundingClientRect();
    const i = Math.round((ev.clientX - r.left - l) / Math.max(1e-9, (W - l - 10)) * (n - 1));
    if (i < 0 || i >= n) return hideTip();
    showTip(ev, "step " + i + " " + L.ops[i] + ": always live " + bytes(L.always_live[i]) +
                ", not always live " + bytes(L.not_always_live[i]));
  });
  s.addEventListener("mouseleave", hideTip);
  box.appendChild(s);
  const k = el("p", {"class": "key"});
  k.innerHTML = '<span style="background:#9ecae9"></span>always live ' +
                '<span style="background:#f58518"></span>not always live (all ' + p.machine.unit + 's)';
  box.appendChild(k);
}

function busiest(p, box) {
  const t = p.machine, units = p.memory.top_units;
  box.appendChild(table(
      [t.unit, t.device, "bytes", "% of " + t.unit, "peak step", "largest categories"],
      units.map(x => {
        const cats = Object.entries(x.categories).filter(c => c[1] > 0)
                         .sort((a, b) => b[1] - a[1]);
        const step = x.peak_step >= 0 && x.peak_step < p.liveness.ops.length ?
            x.peak_step + " " + p.liveness.ops[x.peak_step] : "-";
        return [x.unit, x.device, bytes(x.bytes), (100 * x.bytes / t.unit_bytes).toFixed(1),
                step, cats.slice(0, 3).map(c => c[0] + " " + bytes(c[1])).join(", ")];
      })));
}

)JS";
}

// The program's sections as the target runs them one after another (sections.json; the RDU's).
inline const char* page_script_sections() {
  return R"JS(
// The sections one after another across the step (an RDU's: SambaTune's section report and
// sntilestat in one view): a bar per section as long as its time, coloured by what bounds it,
// then the slowest sections with their compute and memory units and DDR traffic.
const BOUND = {compute: "#4c78a8", DDR: "#f58518", "switch": "#b279a2"};
function rduSections(p, box) {
  const Q = p.sections, S = Q.sections;
  const CU = Q.compute_noun, MU = Q.memory_noun;
  box.appendChild(el("p", {}, S.length + " sections (" + Q.optimization + ") on " + Q.held +
      " (" + Q.compute_units + " " + CU + "s, " + Q.memory_units + " " + MU + "s), " +
      Q.samples + " samples a step in " + Math.round(Q.step_cycles) + " cycles; " +
      bytes(Q.ddr_bytes_moved) + " of DDR traffic; " + bytes(Q.ddr_peak_bytes) + " of its " +
      bytes(Q.ddr_capacity_bytes) + " of DDR in use at most"));
  if (!Q.fits) box.appendChild(el("p", {"class": "oom"}, Q.message));
  if (!S.length) return;
  const W = 900, H = 36, cv = el("canvas", {id: "rdusections"});
  cv.width = W; cv.height = H;
  const g = cv.getContext("2d"), total = Math.max(1, Q.step_cycles);
  const starts = [];
  let at = 0;
  S.forEach((s, k) => {
    starts.push(at);
    const x = at / total * W, w = Math.max(1, s.cycles / total * W);
    g.fillStyle = BOUND[s.bound] || "#888";
    g.fillRect(x, 4, w, H - 8);
    if (k === Q.slowest) { g.strokeStyle = "rgb(220,20,60)"; g.lineWidth = 2;
                           g.strokeRect(x, 3, w, H - 6); }
    at += s.cycles;
  });
  cv.addEventListener("mousemove", ev => {
    const r = cv.getBoundingClientRect(), c = (ev.clientX - r.left) / W * total;
    let k = starts.findIndex((s0, i) => c >= s0 && c < s0 + S[i].cycles);
    if (k < 0) return hideTip();
    const s = S[k];
    showTip(ev, "section " + k + ": " + s.label + ", " + s.compute_units + " " + CU + "s, " +
                s.memory_units + " " + MU + "s, DDR " + bytes(s.ddr_read) + " in / " + bytes(s.ddr_write) + " out, " +
                Math.round(s.cycles) + " cycles, " + s.bound + "-bound" +
                (k === Q.slowest ? " (slowest)" : ""));
  });
  cv.addEventListener("mouseleave", hideTip);
  box.appendChild(cv);
  const k = el("p", {"class": "key"});
  let html = "";
  for (const b of ["compute", "DDR", "switch"])
    html += '<span style="background:' + BOUND[b] + '"></span>' + b + "-bound ";
  k.innerHTML = html + " - outlined in red: the slowest section";
  box.appendChild(k);
  const share = (n, of) => n + " (" + (100 * n / of).toFixed(0) + " %)";
  const order = S.map((s, i) => i).sort((a, b) => S[b].cycles - S[a].cycles).slice(0, 20);
  box.appendChild(el("p", {}, "Sections by time" +
      (S.length > 20 ? " (the 20 slowest of " + S.length + ")" : "") + ":"));
  box.appendChild(table(
      ["#", "operators", CU + "s", MU + "s", "DDR read", "DDR write", "cycles", "bound",
       "first operator"],
      order.map(i => {
        const s = S[i];
        return [i, s.ops, share(s.compute_units, Q.compute_units),
                share(s.memory_units, Q.memory_units), bytes(s.ddr_read), bytes(s.ddr_write),
                Math.round(s.cycles), s.bound, s.label + (i === Q.slowest ? " (slowest)" : "")];
      })));
}
)JS";
}

// The device as a target placed the program (layout.json; the CS-2's wafer).
inline const char* page_script_layout() {
  return R"JS(
// The device as the target placed the program (a CS-2's wafer: a region of PEs per layer's
// kernel), coloured by region or by how busy each region is at the pipeline's rate.
let byBusy = false;
function wafer(p, box) {
  const L = p.layout;
  box.appendChild(el("p", {}, "Execution mode: " + L.mode + (L.why ? " (" + L.why + ")" : "")));
  if (!L.regions.length) { box.appendChild(el("p", {}, L.note)); return; }
  const G = L.grid, R = L.regions, slow = R[L.slowest];
  box.appendChild(el("p", {}, R.length + " regions on " + Math.round(L.pes_used) + " of " +
      L.pes + " PEs; the slowest, " + slow.name + ", sets the rate at " +
      slow.cycles.toFixed(1) + " cycles a sample (" + L.samples + " samples, " +
      Math.round(L.step_cycles) + " cycles a step); PEs busy in the steady state: " +
      (100 * L.utilisation).toFixed(1) + " %"));
  const cell = Math.max(2, Math.min(8, Math.floor(720 / G.columns)));
  const cv = el("canvas", {id: "wafer"});
  cv.width = G.columns * cell; cv.height = G.rows * cell;
  const g = cv.getContext("2d");
  g.fillStyle = "#ddd"; g.fillRect(0, 0, cv.width, cv.height);
  const hue = k => "hsl(" + Math.round((k * 137.508) % 360) + ",60%," + (k % 2 ? 45 : 60) + "%)";
  G.cells.forEach((k, i) => {
    if (k < 0) return;
    g.fillStyle = byBusy ? rgb(ramp(R[k].utilisation)) : hue(k);
    g.fillRect((i % G.columns) * cell, Math.floor(i / G.columns) * cell, cell, cell);
  });
  // The slowest region outlined: every edge of its cells that borders another region.
  g.strokeStyle = "rgb(220,20,60)"; g.lineWidth = 2;
  G.cells.forEach((k, i) => {
    if (k !== L.slowest) return;
    const x = i % G.columns, y = Math.floor(i / G.columns);
    const at = (xx, yy) => xx < 0 || yy < 0 || xx >= G.columns || yy >= G.rows ? -2 :
                           G.cells[yy * G.columns + xx];
    g.beginPath();
    if (at(x, y - 1) !== k) { g.moveTo(x * cell, y * cell); g.lineTo((x + 1) * cell, y * cell); }
    if (at(x, y + 1) !== k) { g.moveTo(x * cell, (y + 1) * cell); g.lineTo((x + 1) * cell, (y + 1) * cell); }
    if (at(x - 1, y) !== k) { g.moveTo(x * cell, y * cell); g.lineTo(x * cell, (y + 1) * cell); }
    if (at(x + 1, y) !== k) { g.moveTo((x + 1) * cell, y * cell); g.lineTo((x + 1) * cell, (y + 1) * cell); }
    g.stroke();
  });
  cv.addEventListener("mousemove", ev => {
    const r = cv.getBoundingClientRect();
    const x = Math.floor((ev.clientX - r.left) / cell), y = Math.floor((ev.clientY - r.top) / cell);
    const k = x >= 0 && y >= 0 && x < G.columns && y < G.rows ? G.cells[y * G.columns + x] : -1;
    if (k < 0) return hideTip();
    const q = R[k];
    showTip(ev, "region " + k + ": " + q.name + ", " + Math.round(q.pes) + " PEs, " +
                bytes(q.bytes) + ", " + q.cycles.toFixed(1) + " cycles a sample, busy " +
                (100 * q.utilisation).toFixed(1) + " %" + (k === L.slowest ? " (slowest)" : ""));
  });
  cv.addEventListener("mouseleave", hideTip);
  box.appendChild(cv);
  const row = el("div", {"class": "legendrow"});
  const lab = el("label", {});
  const cb = el("input", {type: "checkbox"});
  cb.checked = byBusy;
  cb.addEventListener("change", () => {
    byBusy = cb.checked;
    box.textContent = "";
    box.appendChild(el("h2", {}, "The wafer: a region per kernel"));
    wafer(p, box);
  });
  lab.appendChild(cb);
  lab.appendChild(document.createTextNode(" colour by busy time (viridis, 1 = the slowest); " +
      "outlined in red: the slowest region; one cell: " + G.pes_per_cell.toFixed(1) + " PEs"));
  row.appendChild(lab);
  box.appendChild(row);
  const order = R.map((q, k) => k).sort((a, b) => R[b].cycles - R[a].cycles).slice(0, 20);
  box.appendChild(el("p", {}, "Regions by cycles a sample" +
      (R.length > 20 ? " (the 20 slowest of " + R.length + ")" : "") + ":"));
  box.appendChild(table(["#", "PEs", "memory", "cycles/sample", "busy", "kernel"],
      order.map(k => {
        const q = R[k];
        return [k, Math.round(q.pes), bytes(q.bytes), q.cycles.toFixed(1),
                (100 * q.utilisation).toFixed(1) + " %",
                q.name + (k === L.slowest ? " (slowest)" : "")];
      })));
}
)JS";
}

// The operations summary and the execution timeline.
inline const char* page_script_operations() {
  return R"JS(
// Per op type: cycles and their share, FLOPs, the fraction of the device's peak they reached.
function operations(p, box) {
  if (!p.operations.length) {
    box.appendChild(el("p", {}, "(no operations summary: a profile written before it existed)"));
    return;
  }
  box.appendChild(table(
      ["op", "count", "cycles", "% of cycles", "GFLOP", "% of peak", "exchanged",
       "largest temporaries per " + p.machine.unit],
      p.operations.map(x => [x.op, x.count, Math.round(x.cycles).toLocaleString("en-US"),
                             (100 * x.share).toFixed(1), (x.flops / 1e9).toFixed(3),
                             (100 * x.fraction_of_peak).toFixed(1), bytes(x.exchange_bytes),
                             bytes(x.temporary_bytes_per_unit)])));
}

const PHASE = {compute: "#4c78a8", exchange: "#f58518", sync: "#e45756", host: "#b279a2"};
function timeline(p, box) {
  const tr = p.trace;
  if (!tr.events || !tr.events.length) {
    box.appendChild(el("p", {}, "No trace.json beside this profile."));
    return;
  }
  const order = tr.lanes.map((x, i) => i).sort((a, b) =>
      tr.lanes[a].pid - tr.lanes[b].pid || tr.lanes[a].tid - tr.lanes[b].tid);
  const row = {};
  order.forEach((lane, i) => row[lane] = i);
  let end = 0;
  for (const e of tr.events) end = Math.max(end, e[1] + e[2]);
  const W = 1100, left = 170, laneH = 22, top = 6, axis = 22;
  const cv = el("canvas", {id: "timeline"});
  cv.width = W; cv.height = top + order.length * laneH + axis;
  const g = cv.getContext("2d");
  g.fillStyle = "#fff"; g.fillRect(0, 0, cv.width, cv.height);
  const X = us => left + (W - left - 10) * us / Math.max(end, 1e-12);
  g.font = "12px sans-serif";
  order.forEach((lane, i) => {
    g.fillStyle = i % 2 ? "#f4f4f4" : "#fafafa";
    g.fillRect(left, top + i * laneH, W - left - 10, laneH);
    g.fillStyle = "#333";
    g.fillText(tr.lanes[lane].name, 4, top + i * laneH + 15);
  });
  for (const e of tr.events) {
    const x0 = X(e[1]), w = Math.max(1, X(e[1] + e[2]) - x0);
    g.fillStyle = PHASE[tr.categories[e[3]]] || "#54a24b";
    g.fillRect(x0, top + row[e[0]] * laneH + 3, w, laneH - 6);
  }
  const yAxis = top + order.length * laneH + 14;
  g.fillStyle = "#333";
  g.fillText("0 us", left, yAxis);
  const endText = end.toFixed(2) + " us simulated";
  g.fillText(endText, W - 10 - g.measureText(endText).width, yAxis);
  cv.addEventListener("mousemove", ev => {
    const r = cv.getBoundingClientRect(), x = ev.clientX - r.left, y = ev.clientY - r.top;
    const i = Math.floor((y - top) / laneH);
    if (i < 0 || i >= order.length || x < left) return hideTip();
    const us = (x - left) / (W - left - 10) * end;
    for (const e of tr.events)
      if (row[e[0]] === i && e[1] <= us && us <= e[1] + e[2])
        return showTip(ev, tr.labels[e[4]] + " (" + tr.categories[e[3]] + "): " +
                           e[2].toFixed(3) + " us at " + e[1].toFixed(3) + " us");
    hideTip();
  });
  cv.addEventListener("mouseleave", hideTip);
  box.appendChild(cv);
  const k = el("p", {"class": "key"});
  let html = "";
  for (const c of tr.categories)
    html += '<span style="background:' + (PHASE[c] || "#54a24b") + '"></span>' + c + " ";
  if (tr.total_events > tr.events.length)
    html += " (the first " + tr.events.length + " of " + tr.total_events + " events)";
  html += tr.view === "pipeline" ? " - pipelined schedule" : " - one step, superstep by superstep";
  k.innerHTML = html;
  box.appendChild(k);
}
)JS";
}

// The page's sections in order, and the tabs that show one program at a time.
inline const char* page_script_tabs() {
  return R"JS(
const SECTIONS = [["summary", "Summary", summary],
                  ["wafer", "The wafer: a region per kernel", wafer, p => !!p.layout],
                  ["rdusections", "Sections: one after another", rduSections,
                   p => !!p.sections],
                  ["heat", p => "Memory per " + p.machine.unit, heatmap],
                  ["cats", "Memory by category", categories],
                  ["live", "Liveness over program steps", liveness],
                  ["busy", p => "Busiest " + p.machine.unit + "s", busiest],
                  ["ops", "Operations summary", operations],
                  ["time", "Execution timeline", timeline]];
function show(index) {
  const main = document.getElementById("main");
  main.textContent = "";
  document.querySelectorAll("#tabs button").forEach((b, i) =>
      b.className = i === index ? "on" : "");
  const p = DATA.programs[index];
  for (const [id, title, draw, when] of SECTIONS) {
    if (when && !when(p)) continue;
    const sec = el("section", {id: id});
    sec.appendChild(el("h2", {}, typeof title === "function" ? title(p) : title));
    draw(p, sec);
    main.appendChild(sec);
  }
}
const tabs = document.getElementById("tabs");
DATA.programs.forEach((p, i) => {
  const b = el("button", {}, p.name);
  b.addEventListener("click", () => { history.replaceState(null, "", "#" + p.name); show(i); });
  tabs.appendChild(b);
});
// page.html#training opens that program's tab.
const wanted = DATA.programs.findIndex(p => "#" + p.name === decodeURIComponent(location.hash));
show(wanted >= 0 ? wanted : 0);
)JS";
}

// The page's script: draws one program at a time into the page's sections.
inline std::string page_script() {
  return std::string(page_script_helpers()) + page_script_memory() + page_script_liveness() +
         page_script_layout() + page_script_sections() + page_script_operations() +
         page_script_tabs();
}

inline const char* page_style() {
  return R"CSS(
body { font: 14px sans-serif; margin: 16px; color: #222; background: #fff; }
h1 { font-size: 20px; margin: 0 0 8px 0; }
h2 { font-size: 16px; margin: 18px 0 6px 0; }
#tabs button { font: inherit; margin-right: 4px; padding: 4px 10px; border: 1px solid #888;
               background: #eee; cursor: pointer; }
#tabs button.on { background: #4c78a8; color: #fff; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 12px; margin: 0; }
dt { font-weight: bold; }
dd { margin: 0; }
.oom { color: #b00; font-weight: bold; white-space: pre-wrap; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
td:last-child { text-align: left; }
.legendrow { display: flex; align-items: center; gap: 4px; margin-top: 4px; }
.legendrow label { margin-left: 16px; }
.key span { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 10px;
            vertical-align: middle; }
svg text { font: 12px sans-serif; fill: #333; }
#tip { position: absolute; display: none; background: #333; color: #fff; padding: 3px 6px;
       font-size: 12px; pointer-events: none; }
)CSS";
}

inline std::string escape_html(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

}  // namespace rhdetail

IPUML_INLINE std::vector<ReportProgram> load_report_programs(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  IPUML_CHECK(fs::exists(p, ec), "ipuml-report: '", path, "' does not exist");
  if (fs::is_regular_file(p, ec)) {
    const std::string dir = p.parent_path().filename().string();
    return {rhdetail::load_one(p, dir.empty() ? p.stem().string() : dir)};
  }
  IPUML_CHECK(fs::is_directory(p, ec), "ipuml-report: '", path,
              "' is neither a profile.json nor a directory");
  if (fs::is_regular_file(p / "profile.json", ec)) {
    const std::string name = fs::absolute(p, ec).lexically_normal().filename().string();
    return {rhdetail::load_one(p / "profile.json", name.empty() ? "program" : name)};
  }
  std::vector<fs::path> dirs;
  for (auto& e : fs::directory_iterator(p, ec))
    if (e.is_directory(ec) && fs::is_regular_file(e.path() / "profile.json", ec))
      dirs.push_back(e.path());
  IPUML_CHECK(!dirs.empty(), "ipuml-report: '", path,
              "' holds no profile.json, directly or in a program's subdirectory (expected the "
              "autoReport.directory of IPUML_ENGINE_OPTIONS or Options.autoReportDirectory)");
  std::sort(dirs.begin(), dirs.end());
  std::vector<ReportProgram> out;
  for (auto& d : dirs) out.push_back(rhdetail::load_one(d / "profile.json", d.filename().string()));
  return out;
}

IPUML_INLINE std::string make_report_html(const std::vector<ReportProgram>& programs,
                                          const std::string& title) {
  using nlohmann::json;
  IPUML_CHECK(!programs.empty(), "ipuml-report: no programs to show");
  json data;
  data["programs"] = json::array();
  for (auto& p : programs) data["programs"].push_back(rhdetail::digest(p));
  // Inside <script>, "</" could end the element early; "<\/" is the same JSON string.
  std::string payload = data.dump();
  for (size_t at = payload.find("</"); at != std::string::npos; at = payload.find("</", at + 3))
    payload.replace(at, 2, "<\\/");
  std::string html;
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>";
  html += rhdetail::escape_html(title);
  html += "</title>\n<style>";
  html += rhdetail::page_style();
  html += "</style>\n</head>\n<body>\n<h1>";
  html += rhdetail::escape_html(title);
  html += "</h1>\n<div id=\"tabs\"></div>\n<div id=\"main\"></div>\n<div id=\"tip\"></div>\n";
  html += "<script type=\"application/json\" id=\"ipuml-data\">";
  html += payload;
  html += "</script>\n<script>";
  html += rhdetail::page_script();
  html += "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace ipuml::emu
