// Bodies of the device compiler: planner, unit mapping, memory accounting, supersteps and the plan
// cache (compiled once in src/lib/emu_compiler.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unordered_map>

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/core/sha256.hpp>
#include <ipuml/io/file.hpp>

namespace ipuml::emu {

IPUML_INLINE std::string category_name(const Plan& p, int c) {
  return p.model ? p.model->memory_category_name(c) : std::string(mem_category_name(c));
}

namespace cdetail {

inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

inline int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t r = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) r *= s[i];
  return r;
}

struct Need {
  bool whole = true;
  ValueLayout layout;  // valid when !whole
  double bytes = 0;    // what the largest part reads of it
  double read = 0;     // what all parts read of it together
};

// The layout a part-split needs of a tensor sliced along `d` (flat when nothing precedes d).
inline ValueLayout axis_layout(const ir::TensorMeta& m, int d, const UnitSpan& s) {
  ValueLayout l;
  l.bytes = static_cast<int64_t>(m.nbytes());
  l.span = s;
  if (d < 0) {  // flat: s is already in elements
    l.axis = -1;
    return l;
  }
  const size_t du = static_cast<size_t>(d);
  if (prod(m.shape, 0, du) == 1) {
    const int64_t inner = prod(m.shape, du + 1, m.shape.size());
    l.axis = -1;
    l.span.extent = s.extent * inner;
    l.span.grain = s.grain * inner;
  } else {
    l.axis = d;
  }
  return l;
}

// A grid's output before its K reduction: blocks that no other split lines up with.
inline constexpr int32_t kBlockedAxis = -2;

struct Planner {
  const ir::Graph& g;
  const emu::TargetModel& t;  // every cost and memory term
  const emu::Machine& mc;     // where work can go
  const emu::MemoryTerms terms;
  const CompileOptions& o;
  Plan plan;
  std::vector<int64_t> last;
  std::vector<int64_t> read_until;  // the last read of each value or of a view of it
  // Set by account(): results that are views of their inputs (no bytes of their own), and the
  // step until which each value's bytes stay live (its last reader's, or a view's of it).
  std::vector<char> view;
  std::vector<int64_t> held_until;
  std::vector<bool> placed;
  std::vector<int32_t> next_unit;
  // Mesh machines: how many placements made at the cursor cover each unit of each device, plus
  // the bytes long-held results put on it (cover_bytes), and the prefix sums and chosen origins
  // cursor_span derives from them until they change.
  std::vector<std::vector<int64_t>> coverage;
  std::vector<uint64_t> coverage_version;
  struct OriginMemo {
    uint64_t version = ~uint64_t{0};
    std::vector<int64_t> prefix;
    std::unordered_map<uint64_t, int64_t> origins;
  };
  std::vector<OriginMemo> origin_memo;
  // Bytes streamed to and from off-chip memory at each step (account_liveness).
  std::vector<double> streamed_per_node;
  // Per step: whether it runs beside the off-chip memory (TargetModel::computes_offchip), set
  // by account().
  std::vector<char> offchip_node;
  std::unordered_map<std::string, MatrixGrid> grids;  // identical matrix ops plan once

  Planner(const ir::Graph& graph, const TargetModelPtr& target, const CompileOptions& opts)
      : g(graph), t(*target), mc(target->machine()), terms(target->memory_terms()), o(opts) {
    plan.model = target;
    plan.machine = mc;
    plan.target_json = t.to_json();
    plan.nodes.resize(g.nodes.size());
    plan.values.resize(g.values.size());
    last = g.last_use();
    // Until when each value is read, itself or through views of it (reshapes, slices).
    read_until = last;
    for (auto ni = static_cast<int64_t>(g.nodes.size()) - 1; ni >= 0; --ni) {
      const auto& n = g.nodes[static_cast<size_t>(ni)];
      if (!view_kind(n.kind) || n.outputs.size() != 1) continue;
      const int64_t end = std::max(ni, read_until[static_cast<size_t>(n.outputs[0])]);
      for (auto in : n.inputs)
        read_until[static_cast<size_t>(in)] = std::max(read_until[static_cast<size_t>(in)], end);
    }
    placed.assign(g.values.size(), false);
    next_unit.assign(static_cast<size_t>(mc.devices), 0);
    if (mc.mesh_columns > 0) {
      coverage.assign(static_cast<size_t>(mc.devices),
                      std::vector<int64_t>(static_cast<size_t>(mc.units_per_device), 0));
      coverage_version.assign(static_cast<size_t>(mc.devices), 0);
      origin_memo.assign(static_cast<size_t>(mc.devices), OriginMemo{});
    }
  }

  int64_t T() const { return mc.units_per_device; }

  // `parts` parts of an axis of `extent` on the device's units from `first` on, in the machine's
  // placement shape: a run of units, or a mesh rectangle whose corner is `first` (moved to where
  // the rectangle fits, placement.hpp).
  UnitSpan span_at(int32_t device, int64_t first, int64_t parts, int64_t extent,
                   int64_t grain) const {
    UnitSpan sp{device, static_cast<int32_t>(first), static_cast<int32_t>(parts), extent, grain};
    if (mc.mesh_columns > 0) {
      const RegionShape r = region_shape(mc, parts);
      sp.first_unit = static_cast<int32_t>(region_origin(mc, r, first));
      sp.width = static_cast<int32_t>(r.width);
      sp.columns = static_cast<int32_t>(mc.mesh_columns);
    }
    return sp;
  }
  // The next placement starts after `sp`: past its run of units, right of its rectangle, or
  // below its band. On a mesh, the units it covers count towards where the next large region
  // goes (cursor_span).
  void advance_past(const UnitSpan& sp) {
    const bool band = sp.width > 0 && sp.width == sp.columns;
    const int64_t past = sp.first_unit + (sp.width > 0 && !band ? sp.width : sp.parts);
    next_unit[static_cast<size_t>(sp.device)] = static_cast<int32_t>(past % T());
    if (mc.mesh_columns > 0) {
      auto& cov = coverage[static_cast<size_t>(sp.device)];
      for (int64_t q = 0; q < sp.parts; ++q) ++cov[static_cast<size_t>(sp.unit(q, T()))];
      ++coverage_version[static_cast<size_t>(sp.device)];
    }
  }
  // A placement at the cursor. On a mesh a region of at least kSpreadParts units goes where the
  // regions placed so far cover its units least (ties: the first such place from the cursor on),
  // so that regions in sequence spread over the whole mesh rather than piling onto its first
  // rows or its middle; smaller ones, and every region on a line machine, start at the cursor.
  static constexpr int64_t kSpreadParts = 64;
  UnitSpan cursor_span(int32_t device, int64_t parts, int64_t extent, int64_t grain) {
    const int64_t cursor = next_unit[static_cast<size_t>(device)];
    UnitSpan sp = span_at(device, cursor, parts, extent, grain);
    if (mc.mesh_columns <= 0 || parts < kSpreadParts) return sp;
    sp.first_unit = static_cast<int32_t>(least_covered_origin(device, sp.shape(), cursor));
    return sp;
  }
  // Prefix sums of a device's coverage, rebuilt when it changed: the sum over rows [0, y) and
  // columns [0, x) at (y, x).
  const std::vector<int64_t>& coverage_prefix(int32_t device) {
    const auto d = static_cast<size_t>(device);
    auto& memo = origin_memo[d];
    if (memo.version != coverage_version[d]) {
      memo.version = coverage_version[d];
      memo.origins.clear();
      const int64_t cols = mc.mesh_columns, rows = mesh_rows(mc);
      auto& ps = memo.prefix;
      ps.assign(static_cast<size_t>((rows + 1) * (cols + 1)), 0);
      const auto& cov = coverage[d];
      for (int64_t y = 0; y < rows; ++y)
        for (int64_t x = 0; x < cols; ++x)
          ps[static_cast<size_t>((y + 1) * (cols + 1) + x + 1)] =
              cov[static_cast<size_t>(y * cols + x)] +
              ps[static_cast<size_t>(y * (cols + 1) + x + 1)] +
              ps[static_cast<size_t>((y + 1) * (cols + 1) + x)] -
              ps[static_cast<size_t>(y * (cols + 1) + x)];
    }
    return memo.prefix;
  }
  // The coverage of an h x w rectangle at row y0, column x0, its rows wrapping from the mesh's
  // last to its first.
  int64_t covered(const std::vector<int64_t>& ps, int64_t y0, int64_t x0, int64_t h,
                  int64_t w) const {
    const int64_t cols = mc.mesh_columns, rows = mesh_rows(mc);
    const auto at = [&](int64_t y, int64_t x) {
      return ps[static_cast<size_t>(y * (cols + 1) + x)];
    };
    const auto rect = [&](int64_t y, int64_t hh) {
      return at(y + hh, x0 + w) - at(y, x0 + w) - at(y + hh, x0) + at(y, x0);
    };
    y0 %= rows;
    const int64_t h1 = std::min(h, rows - y0);
    return rect(y0, h1) + (h > h1 ? rect(0, h - h1) : 0);
  }
  int64_t least_covered_origin(int32_t device, RegionShape r, int64_t cursor) {
    const int64_t cols = mc.mesh_columns, rows = mesh_rows(mc);
    const uint64_t key = (static_cast<uint64_t>(r.width) << 40) ^
                         (static_cast<uint64_t>(r.height) << 20) ^ static_cast<uint64_t>(cursor);
    const auto& ps = coverage_prefix(device);
    auto& memo = origin_memo[static_cast<size_t>(device)];
    if (auto it = memo.origins.find(key); it != memo.origins.end()) return it->second;
    const int64_t base = region_origin(mc, r, cursor);
    int64_t best = base, best_sum = -1, best_dist = 0;
    auto consider = [&](int64_t origin, int64_t sum) {
      const int64_t dist = (origin - base + T()) % T();
      if (best_sum < 0 || sum < best_sum || (sum == best_sum && dist < best_dist))
        best = origin, best_sum = sum, best_dist = dist;
    };
    if (r.width >= cols) {  // a band of whole rows, wrapping from the last to the first
      for (int64_t y = 0; y < rows; ++y) consider(y * cols, covered(ps, y, 0, r.height, cols));
    } else {
      // Every half a region's height and width apart, and flush with the mesh's last row and
      // column.
      const int64_t sy = std::max<int64_t>(1, r.height / 2), sx = std::max<int64_t>(1, r.width / 2);
      for (int64_t y = 0;; y = std::min(y + sy, rows - r.height)) {
        for (int64_t x = 0;; x = std::min(x + sx, cols - r.width)) {
          consider(y * cols + x, covered(ps, y, x, r.height, r.width));
          if (x == cols - r.width) break;
        }
        if (y == rows - r.height) break;
      }
      consider(base, covered(ps, base / cols, base % cols, r.height, r.width));
    }
    memo.origins.emplace(key, best);
    return best;
  }
  // Counts the bytes a long-held value puts on each of its units as coverage too: what decides
  // whether the mesh's units fit is where those pile up, more than how many regions cover them.
  void cover_bytes(const ValueLayout& l) {
    auto& cov = coverage[static_cast<size_t>(l.span.device)];
    for (int64_t q = 0; q < l.span.parts; ++q)
      cov[static_cast<size_t>(l.span.unit(q, T()))] += static_cast<int64_t>(l.bytes_on_part(q));
    ++coverage_version[static_cast<size_t>(l.span.device)];
  }
  // A step's exchange into its busiest unit, `bytes` of it, on the units of `sp`.
  double exchange_on(double bytes, const UnitSpan& sp) const {
    const RegionShape r = sp.shape();
    return t.region_exchange_cycles(bytes, r.width, r.height);
  }

  // Bytes a unit may use for one op's temporaries: node, then device, then global proportion.
  double limit_of(const ir::Node& n) const {
    double p = o.available_memory_proportion;
    const auto device = static_cast<size_t>(n.placement);
    if (device < o.available_memory_proportion_per_device.size() &&
        o.available_memory_proportion_per_device[device] > 0)
      p = o.available_memory_proportion_per_device[device];
    if (n.available_memory_proportion > 0) p = n.available_memory_proportion;
    return static_cast<double>(mc.bytes_per_unit) * p;
  }

  // The share of the split axis the largest part holds.
  static double largest_frac(const SliceSpec& s, const UnitSpan& span) {
    if (s.kind == SplitKind::Whole) return 1.0;
    return static_cast<double>(max_part_rows(span.extent, span.grain, span.parts)) /
           static_cast<double>(span.extent);
  }

  Need need(const ir::Node& n, const SliceSpec& s, const UnitSpan& span, size_t j) const {
    Need r;
    const auto& m = g.meta(n.inputs[j]);
    // A slice reads only the input elements its output holds, however it is split: a slice of a
    // 50257 x 768 embedding moves its rows, not the table to every unit.
    const bool slice = n.kind == ir::OpKind::Slice;
    r.read = static_cast<double>(slice ? g.meta(n.outputs[0]).nbytes() : m.nbytes());
    r.bytes = r.read;
    if (s.kind == SplitKind::Whole || s.kind == SplitKind::Grid) return r;
    const double frac = largest_frac(s, span);
    if (s.kind == SplitKind::Flat || s.kind == SplitKind::TreeSum ||
        (s.kind == SplitKind::Rows && s.in_dim[j] == 0)) {
      r.whole = false;
      r.layout = axis_layout(m, -1, span);
      r.bytes *= frac;
      return r;
    }
    if (s.kind == SplitKind::Rows) {
      // A broadcast input: a part of r output elements reads at most r of its elements.
      const double rows = std::ceil(frac * static_cast<double>(g.meta(n.outputs[0]).numel()));
      r.bytes = std::min<double>(static_cast<double>(m.numel()), rows) *
                static_cast<double>(dtype_size(m.dtype));
      return r;
    }
    const int d = s.in_dim[j];
    if (d < 0) {
      if (slice) r.bytes *= frac;  // each part its own rows, not the whole input
      return r;
    }
    r.whole = false;
    r.layout = axis_layout(m, d, span);
    r.bytes *= frac;
    return r;
  }

  bool is_free(int64_t v) const {  // a State/Input not placed yet goes where it is first needed
    return g.values[static_cast<size_t>(v)].kind != ir::ValueKind::Op &&
           !placed[static_cast<size_t>(v)];
  }

  struct Cost {
    double compute = 0, exchange = 0, sync = 0, inter = 0, inter_bytes = 0;
    double temp = 0, exchange_total = 0;
    int32_t serial = 1;
    int64_t transfers = 0;  // operands a unit receives over the exchange
    bool fits = true;
    double total() const { return compute + exchange + sync + inter; }
  };

  // Operands held by another device cross the device-Links first.
  void add_inter_device(const ir::Node& n, int32_t device, bool planning, Cost& c) const {
    for (auto v : n.inputs) {
      if (planning && is_free(v)) continue;
      if (plan.values[static_cast<size_t>(v)].span.device != device)
        c.inter_bytes += static_cast<double>(g.meta(v).nbytes());
    }
    if (c.inter_bytes > 0) c.inter = t.inter_device_cycles(c.inter_bytes) + t.device_sync_cycles();
  }

  Cost evaluate_grid(int64_t ni, const MatrixGrid& grid, int32_t device, bool planning) const {
    const auto& n = g.nodes[static_cast<size_t>(ni)];
    MatrixProblem p = matrix_problem(g, n);
    const auto& np = plan.nodes[static_cast<size_t>(ni)];
    p.a_resident = (np.resident & 1) != 0;
    p.b_resident = (np.resident & 2) != 0;
    const MatrixCost mc = matrix_cost(t, p, grid, o.partials_type, limit_of(n));
    Cost c;
    c.compute = mc.compute;
    c.exchange = mc.exchange;
    c.sync = mc.sync;
    c.temp = mc.temp;
    c.exchange_total = mc.exchange_bytes;
    c.serial = grid.sk;
    c.transfers = p.b_bytes > 0 ? 2 : 1;
    c.fits = mc.fits;
    add_inter_device(n, device, planning, c);
    return c;
  }

  // An elementwise op computed where input `j` lives (popops maps its output like its input):
  // j never moves, an input laid out the same way neither, the others come to it.
  Cost evaluate_following(int64_t ni, size_t j, bool planning) const {
    const auto& n = g.nodes[static_cast<size_t>(ni)];
    const auto& lj = plan.values[static_cast<size_t>(n.inputs[j])];
    const auto& out = g.meta(n.outputs[0]);
    const double frac =
        static_cast<double>(max_part_rows(lj.span.extent, lj.span.grain, lj.span.parts)) /
        static_cast<double>(lj.span.extent);
    Cost c;
    double recv = 0, touched = 0;
    for (auto v : n.outputs) touched += static_cast<double>(g.meta(v).nbytes()) * frac;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const int64_t v = n.inputs[k];
      const auto& m = g.meta(v);
      const auto& lk = plan.values[static_cast<size_t>(v)];
      const bool same_shape = m.shape == out.shape;
      const double bytes = same_shape ? static_cast<double>(m.nbytes()) * frac
                                      : std::min<double>(static_cast<double>(m.numel()),
                                                         std::ceil(frac * out.numel())) *
                                            static_cast<double>(dtype_size(m.dtype));
      touched += bytes;
      const bool local = k == j || (planning && is_free(v)) ||
                         (same_shape && lk.axis == lj.axis && lk.span == lj.span);
      if (!local) {
        recv += bytes;
        c.exchange_total += same_shape ? static_cast<double>(m.nbytes()) : bytes * lj.span.parts;
        c.transfers += 1;
      }
    }
    const double items = std::max(1.0, static_cast<double>(out.numel()) * frac);
    c.compute = t.compute_cycles(plan.nodes[static_cast<size_t>(ni)].flops * frac, touched,
                                 g.meta(n.inputs[j]).dtype, false, static_cast<int64_t>(items));
    c.exchange = exchange_on(recv, lj.span);
    c.sync = t.sync_cycles();
    c.temp = recv;
    add_inter_device(n, lj.span.device, planning, c);
    c.fits = c.temp <= limit_of(n);
    return c;
  }

  Cost evaluate(int64_t ni, const SliceSpec& s, const UnitSpan& span, bool planning,
                int32_t follows = -1) const {
    const auto& n = g.nodes[static_cast<size_t>(ni)];
    if (s.kind == SplitKind::Grid)
      return evaluate_grid(ni, plan.nodes[static_cast<size_t>(ni)].grid, span.device, planning);
    if (follows >= 0) return evaluate_following(ni, static_cast<size_t>(follows), planning);
    Cost c;
    const double limit = limit_of(n);
    const double flops = plan.nodes[static_cast<size_t>(ni)].flops;
    double out_bytes = 0, out_elems = 0;
    for (auto v : n.outputs) {
      out_bytes += static_cast<double>(g.meta(v).nbytes());
      out_elems += static_cast<double>(g.meta(v).numel());
    }
    // Cost and fit follow the largest part: the slowest unit sets the superstep's length.
    const double frac = largest_frac(s, span);
    double sliced_recv = 0, whole_recv = 0, touched = out_bytes * frac;
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      const int64_t v = n.inputs[j];
      const auto& lay = plan.values[static_cast<size_t>(v)];
      const bool free = planning && is_free(v);
      const Need nd = need(n, s, span, j);
      const bool other_device = !free && lay.span.device != span.device;
      touched += nd.bytes;
      if (nd.whole) {
        // What the unit holds of it already need not move.
        double own = 0;
        if (!other_device && !free && nd.bytes >= static_cast<double>(lay.bytes))
          for (int64_t p = 0; p < lay.span.parts; ++p)
            if (lay.span.unit(p, T()) == span.first_unit) own += lay.bytes_on_part(p);
        if (free && s.kind == SplitKind::Rows) own = nd.bytes;  // laid where this op reads it
        const double moved = std::max(0.0, nd.bytes - own);
        whole_recv += moved;
        c.exchange_total += moved * span.parts;
        c.transfers += moved > 0 ? 1 : 0;
      } else {
        const bool local =
            free || (!other_device && lay.axis == nd.layout.axis && lay.span == nd.layout.span);
        if (!local) {
          sliced_recv += nd.bytes;
          c.exchange_total += nd.read;
          c.transfers += 1;
        }
      }
    }
    const double items = std::max(1.0, out_elems * frac);
    if (s.kind == SplitKind::TreeSum) {
      c.compute = t.compute_cycles(flops * frac, touched, DType::Float32, false,
                                   static_cast<int64_t>(items)) +
                  t.compute_cycles(span.parts, 4.0 * span.parts, DType::Float32, false, 1);
      c.exchange = exchange_on(sliced_recv, span) + exchange_on(4.0 * span.parts, span);
      c.sync = 2.0 * t.sync_cycles();
      c.temp = sliced_recv + 4.0 * span.parts;
    } else {
      const DType dt = n.inputs.empty() ? g.meta(n.outputs[0]).dtype : g.meta(n.inputs[0]).dtype;
      c.compute = t.compute_cycles(flops * frac, touched, dt, false, static_cast<int64_t>(items));
      double temp = sliced_recv + whole_recv;
      if (temp > limit && whole_recv > 0) {
        // Serialise over the broadcast operand: each serial step holds a 1/serial share of it.
        const double room = limit - sliced_recv;
        c.serial = room > 0 ? static_cast<int32_t>(std::min(1e6, std::ceil(whole_recv / room))) : 1;
        temp = sliced_recv + whole_recv / c.serial;
      }
      c.temp = temp;
      c.exchange = exchange_on(sliced_recv + whole_recv, span);
      c.sync = t.sync_cycles() * c.serial;
      c.compute += t.repeat_cycles() * (c.serial - 1);
    }
    add_inter_device(n, span.device, planning, c);
    c.fits = c.temp <= limit;
    return c;
  }

  void set_output_layouts(int64_t ni) {
    const auto& n = g.nodes[static_cast<size_t>(ni)];
    const auto& np = plan.nodes[static_cast<size_t>(ni)];
    for (auto v : n.outputs) {
      const auto& m = g.meta(v);
      const int64_t elems = std::max<int64_t>(1, m.numel());
      ValueLayout l;
      if (np.follows >= 0) {
        l = plan.values[static_cast<size_t>(n.inputs[static_cast<size_t>(np.follows)])];
        l.bytes = static_cast<int64_t>(m.nbytes());
      } else if (np.spec.kind == SplitKind::Flat || np.spec.kind == SplitKind::Rows) {
        l = axis_layout(m, -1, np.span);
      } else if (np.spec.kind == SplitKind::Axis) {
        l = axis_layout(m, np.spec.out_dim, np.span);
      } else if (np.spec.kind == SplitKind::Grid) {
        l.bytes = static_cast<int64_t>(m.nbytes());
        if (np.reduce_units > 0) {  // the reduction leaves it flat over its units
          l.axis = -1;
          l.span = span_at(np.span.device, np.span.first_unit,
                           std::min<int64_t>(np.reduce_units, elems), elems, 1);
        } else {
          l.axis = kBlockedAxis;
          l.span = span_at(np.span.device, np.span.first_unit,
                           std::min<int64_t>(np.span.parts, elems), elems, 1);
        }
      } else {
        l.bytes = static_cast<int64_t>(m.nbytes());
        l.span = span_at(np.span.device, np.span.first_unit, 1, elems, 1);
      }
      plan.values[static_cast<size_t>(v)] = l;
      if (mc.mesh_columns > 0 && !view_kind(n.kind) && held_long(ni, v)) cover_bytes(l);
    }
  }

  // Whether a result stays live long after its op (a forward activation kept for the backward
  // pass): at the step where memory peaks, results like it are what is live.
  bool held_long(int64_t ni, int64_t v) const {
    const int64_t lu = read_until[static_cast<size_t>(v)];
    return lu - ni > std::max<int64_t>(64, static_cast<int64_t>(g.nodes.size()) / 16);
  }

  void place_linear(int64_t v, int32_t device) {
    const auto& m = g.meta(v);
    ValueLayout l;
    l.bytes = static_cast<int64_t>(m.nbytes());
    const int64_t n = std::max<int64_t>(1, m.numel());
    const int64_t grain = std::max<int64_t>(1, 64 / static_cast<int64_t>(dtype_size(m.dtype)));
    const int64_t units = (n + grain - 1) / grain;
    // At least 1 KiB per unit: smaller pieces cost more in descriptors than they spread.
    const int64_t parts = std::clamp<int64_t>(l.bytes / 1024, 1, std::min(units, T()));
    l.span = cursor_span(device, parts, n, grain);
    advance_past(l.span);
    plan.values[static_cast<size_t>(v)] = l;
    placed[static_cast<size_t>(v)] = true;
  }

  void plan_grid(int64_t ni) {
    const auto& n = g.nodes[static_cast<size_t>(ni)];
    auto& np = plan.nodes[static_cast<size_t>(ni)];
    MatrixProblem p = matrix_problem(g, n);
    // A state or input no earlier op placed can be laid out where this op wants it.
    auto free_input = [&](int j) {
      return j >= 0 && is_free(n.inputs[static_cast<size_t>(j)]) &&
             g.values[static_cast<size_t>(n.inputs[static_cast<size_t>(j)])].kind ==
                 ir::ValueKind::State;
    };
    p.a_resident = free_input(p.a_input);
    p.b_resident = free_input(p.b_input);
    std::ostringstream key;
    key.precision(17);
    key << ir::op_name(n.kind) << '|' << n.attrs.key() << '|' << limit_of(n) << '|' << p.a_resident
        << p.b_resident;
    for (auto v : n.inputs) key << '|' << dtype_name(g.meta(v).dtype) << shape_str(g.meta(v).shape);
    auto it = grids.find(key.str());
    if (it == grids.end())
      it = grids.emplace(key.str(), plan_matrix(t, p, o.partials_type, limit_of(n))).first;
    np.grid = it->second;
    np.spec = SliceSpec{};
    np.spec.kind = SplitKind::Grid;
    np.spec.in_dim = p.k_dim;  // what the executor slices for K's partial sums
    np.spec.extent = p.k;
    np.spec.matrix = p.amp;
    const int32_t device = n.placement;
    const auto units = static_cast<int32_t>(np.grid.units());
    np.span = cursor_span(device, units, units, 1);
    np.reduce_units =
        np.grid.pk > 1 ? matrix_cost(t, p, np.grid, o.partials_type, limit_of(n)).reduce_units : 0;
    // Resident operands stay on the units of their blocks, once each.
    np.resident = 0;
    auto keep = [&](bool resident, unsigned axes, int j, uint8_t bit) {
      if (!resident || replication(np.grid, axes) != 1) return;
      const int64_t v = n.inputs[static_cast<size_t>(j)];
      ValueLayout l;
      l.axis = kBlockedAxis;
      l.bytes = static_cast<int64_t>(g.meta(v).nbytes());
      const int64_t elems = std::max<int64_t>(1, g.meta(v).numel());
      l.span = span_at(device, np.span.first_unit, std::min<int64_t>(units, elems), elems, 1);
      plan.values[static_cast<size_t>(v)] = l;
      placed[static_cast<size_t>(v)] = true;
      np.resident |= bit;
    };
    keep(p.a_resident, p.a_axes, p.a_input, 1);
    keep(p.b_resident, p.b_axes, p.b_input, 2);
    advance_past(np.span);
  }

  // The (parts, first unit) a split `s` of node `n` is tried at: a Whole op on the unit holding
  // the start of its largest input (that part need not move); a split at every power of two of
  // parts up to its most from the cursor, and lined up with each input's layout so that operand
  // stays where it is.
  std::vector<std::pair<int64_t, int32_t>> placement_tries(const ir::Node& n, const SliceSpec& s,
                                                           int32_t device) const {
    std::vector<std::pair<int64_t, int32_t>> tries;
    const int32_t rot = next_unit[static_cast<size_t>(device)];
    if (s.kind == SplitKind::Whole) {
      int32_t unit = rot;
      size_t biggest = 0;
      for (auto v : n.inputs)
        if (!is_free(v) && plan.values[static_cast<size_t>(v)].span.device == device &&
            g.meta(v).nbytes() >= biggest) {
          biggest = g.meta(v).nbytes();
          unit = plan.values[static_cast<size_t>(v)].span.first_unit;
        }
      tries.emplace_back(1, unit);
      return tries;
    }
    const int64_t maxp = std::min<int64_t>(max_parts(s), T());
    for (int64_t p = 1; p < maxp; p *= 2) tries.emplace_back(p, rot);
    tries.emplace_back(maxp, rot);
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      const int64_t v = n.inputs[j];
      if (is_free(v)) continue;
      const auto& lay = plan.values[static_cast<size_t>(v)];
      if (lay.span.device != device || lay.span.parts > maxp) continue;
      const UnitSpan sp = span_at(device, lay.span.first_unit, lay.span.parts, s.extent, s.grain);
      const Need nd = need(n, s, sp, j);
      if (!nd.whole && nd.layout.axis == lay.axis && nd.layout.span == lay.span)
        tries.emplace_back(lay.span.parts, lay.span.first_unit);
    }
    return tries;
  }

  void plan_node(int64_t ni) {
    const auto& n = g.nodes[static_cast<size_t>(ni)];
    auto& np = plan.nodes[static_cast<size_t>(ni)];
    IPUML_CHECK(n.placement >= 0 && n.placement < mc.devices, mc.name, " compile: node ", ni, " (",
                ir::op_name(n.kind), ") is placed on ", mc.device_noun, " ", n.placement,
                " but target '", mc.name, "' has ", mc.devices, " ", mc.device_noun, "(s); ",
                t.device_count_hint());
    std::vector<ir::TensorMeta> ins, outs;
    for (auto v : n.inputs) ins.push_back(g.meta(v));
    for (auto v : n.outputs) outs.push_back(g.meta(v));
    np.flops = ir::op_flops(n.kind, n.attrs, ins, outs);
    if (plans_as_grid(g, n)) {
      plan_grid(ni);
      set_output_layouts(ni);
      return;
    }
    const auto cands = split_candidates(g, n);
    const int32_t device = n.placement;
    bool have = false;
    Cost best_cost;
    int64_t best_from = -1;  // where the chosen placement was asked to start (the cursor's?)
    for (const auto& s : cands) {
      const int32_t rot = next_unit[static_cast<size_t>(device)];
      for (auto [p, f] : placement_tries(n, s, device)) {
        const int64_t extent = s.kind == SplitKind::Whole ? 1 : s.extent,
                      grain = s.kind == SplitKind::Whole ? 1 : s.grain;
        const UnitSpan sp =
            f == rot ? cursor_span(device, p, extent, grain) : span_at(device, f, p, extent, grain);
        const Cost c = evaluate(ni, s, sp, true);
        const bool better =
            !have || (c.fits && !best_cost.fits) ||
            (c.fits == best_cost.fits &&
             (c.fits ? c.total() < best_cost.total() - 1e-9 : c.temp < best_cost.temp));
        if (better) {
          have = true;
          best_cost = c;
          np.spec = s;
          np.span = sp;
          np.follows = -1;
          best_from = f;
        }
      }
    }
    // Elementwise ops may run where an input already lives, on its layout (a fused update: all
    // its results there, the state it reads from streaming memory or lays out first too).
    const auto& out = g.meta(n.outputs[0]);
    const bool elementwise =
        (n.outputs.size() == 1 || ir::is_elementwise_update(n.kind)) && !cands.empty() &&
        (cands[0].kind == SplitKind::Flat || cands[0].kind == SplitKind::Rows) &&
        !cands[0].merge_all;
    for (size_t j = 0; elementwise && j < n.inputs.size(); ++j) {
      const int64_t v = n.inputs[j];
      const auto& lay = plan.values[static_cast<size_t>(v)];
      if (is_free(v) || lay.span.device != device || g.meta(v).shape != out.shape) continue;
      const Cost c = evaluate_following(ni, j, true);
      const bool better =
          (c.fits && !best_cost.fits) ||
          (c.fits == best_cost.fits &&
           (c.fits ? c.total() < best_cost.total() - 1e-9 : c.temp < best_cost.temp));
      if (better) {
        best_cost = c;
        np.spec = cands[0];
        np.span = lay.span;
        np.follows = static_cast<int32_t>(j);
      }
    }
    if (np.follows >= 0) {
      // Free inputs of the output's shape take the followed layout too.
      const auto& lj = plan.values[static_cast<size_t>(n.inputs[static_cast<size_t>(np.follows)])];
      for (size_t j = 0; j < n.inputs.size(); ++j) {
        const int64_t v = n.inputs[j];
        if (!is_free(v) || g.meta(v).shape != out.shape) continue;
        ValueLayout l = lj;
        l.bytes = static_cast<int64_t>(g.meta(v).nbytes());
        plan.values[static_cast<size_t>(v)] = l;
        placed[static_cast<size_t>(v)] = true;
      }
      set_output_layouts(ni);
      return;
    }
    // Placed at the cursor (where a mesh rectangle or band starts for it, placement.hpp): the
    // next placement starts after it.
    if (best_from == next_unit[static_cast<size_t>(device)]) advance_past(np.span);
    // Free states and inputs take the layout this op wants of them.
    for (size_t j = 0; j < n.inputs.size(); ++j) {
      const int64_t v = n.inputs[j];
      if (!is_free(v)) continue;
      const Need nd = need(n, np.spec, np.span, j);
      if (nd.whole) continue;
      plan.values[static_cast<size_t>(v)] = nd.layout;
      placed[static_cast<size_t>(v)] = true;
    }
    set_output_layouts(ni);
  }

  // Replicated tensor sharding (ir::Value::replica_shards): per value, how many replicas share
  // it, each holding 1/shards of it. A sharded state's new value is sharded as the state, and
  // so is an elementwise result of a sharded value of its size (the optimizer's arithmetic).
  std::vector<int64_t> shards_;
  void find_replica_shards() {
    shards_.assign(g.values.size(), 1);
    for (auto v : g.states)
      shards_[static_cast<size_t>(v)] =
          std::max(1, g.values[static_cast<size_t>(v)].replica_shards);
    for (const auto& n : g.nodes) {
      using C = ir::OpCategory;
      if (!ir::op_in(n.kind, C::Unary, C::Broadcast, C::Update)) continue;
      for (auto in : n.inputs)
        for (auto out : n.outputs)
          if (shards_[static_cast<size_t>(in)] > 1 && g.meta(in).numel() == g.meta(out).numel())
            shards_[static_cast<size_t>(out)] =
                std::max(shards_[static_cast<size_t>(out)], shards_[static_cast<size_t>(in)]);
    }
    for (const auto& u : g.updates)
      shards_[static_cast<size_t>(u.value)] =
          std::max(shards_[static_cast<size_t>(u.value)], shards_[static_cast<size_t>(u.state)]);
  }

  // Bytes of each piece of value v on its units, each piece rounded up to the alignment; a
  // replica-sharded value's pieces hold their replica's share (`sharded` false: the whole).
  template <typename F>
  void for_each_piece(int64_t v, F&& f, bool sharded = true) const {
    const auto& l = plan.values[static_cast<size_t>(v)];
    const int64_t align = std::max<int64_t>(1, mc.alignment_bytes);
    const int64_t shards =
        sharded && static_cast<size_t>(v) < shards_.size() ? shards_[static_cast<size_t>(v)] : 1;
    int64_t acc = 0;
    for (int64_t p = 0; p < l.span.parts; ++p) {
      // Integer shares that add up to the tensor's size exactly, before alignment.
      const int64_t upto = static_cast<int64_t>(static_cast<double>(l.bytes) *
                                                static_cast<double>(l.span.begin(p + 1)) /
                                                static_cast<double>(l.span.extent));
      const int64_t b = (upto - acc + shards - 1) / shards;
      acc = upto;
      if (b > 0) f(l.span.device, l.span.unit(p, T()), (b + align - 1) / align * align);
    }
  }

  // The vertex types a node runs: (kind, dtype, stage) packed in one number.
  static uint32_t vertex_type(const ir::Node& n, DType dt, int stage) {
    return (static_cast<uint32_t>(n.kind) << 8) | (static_cast<uint32_t>(dt) << 2) |
           static_cast<uint32_t>(stage);
  }

  // Index of a unit in plan.memory.units.
  size_t unit_index(int32_t device, int32_t unit) const {
    return static_cast<size_t>(device) * static_cast<size_t>(T()) + static_cast<size_t>(unit);
  }

  // The plan's memory and cycles, in the order the figures need each other: fixed bytes
  // (state, streams), the steps with their vertices, code, liveness with temporaries, cycles.
  void account() {
    auto& mem = plan.memory;
    mem.bytes_per_unit = mc.bytes_per_unit;
    mem.units.assign(static_cast<size_t>(mc.total_units()), UnitMemory{});
    find_offchip_nodes();
    find_replica_shards();
    account_state_and_streams();
    find_views();
    std::vector<std::vector<uint32_t>> types(mem.units.size());
    account_steps(types);
    account_code(types);
    const std::vector<double> streamed = account_liveness();
    account_cycles(streamed);
    account_verdict();
  }

  // The steps that run beside the off-chip memory where the target computes there: fills,
  // elementwise ops and reductions each of whose results is the new value of an off-chip state
  // (the optimizer's update of a streamed weight, a gradient added into a streamed accumulator,
  // an accumulator cleared) or is read only by such steps (the gradients' scaling and norm
  // before the update). Decided last step first, so that every reader of a step's results is
  // decided before it.
  void find_offchip_nodes() {
    offchip_node.assign(g.nodes.size(), 0);
    if (!t.computes_offchip()) return;
    std::vector<char> updates_offchip(g.values.size(), 0), read_on_chip(g.values.size(), 0),
        read(g.values.size(), 0);
    for (auto& u : g.updates)
      if (g.values[static_cast<size_t>(u.state)].offchip)
        updates_offchip[static_cast<size_t>(u.value)] = 1;
    for (auto v : g.outputs) read_on_chip[static_cast<size_t>(v)] = 1;  // the host reads it
    using C = ir::OpCategory;
    for (size_t ni = g.nodes.size(); ni-- > 0;) {
      const auto& n = g.nodes[ni];
      bool off = !n.outputs.empty() &&
                 ir::op_in(n.kind, C::Creation, C::Unary, C::Broadcast, C::Reduce, C::Update);
      for (auto v : n.outputs) {
        const auto vu = static_cast<size_t>(v);
        off = off && (updates_offchip[vu] || (read[vu] && !read_on_chip[vu]));
      }
      offchip_node[ni] = off ? 1 : 0;
      for (auto v : n.inputs) {
        read[static_cast<size_t>(v)] = 1;
        if (!off) read_on_chip[static_cast<size_t>(v)] = 1;
      }
    }
  }

  // On-chip state (less what replica sharding saves) and the host input streams' buffers.
  void account_state_and_streams() {
    auto& mem = plan.memory;
    mem.replica_sharding_saved_bytes = 0;
    for (auto v : g.states)
      if (!g.values[static_cast<size_t>(v)].offchip) {
        for_each_piece(v, [&](int32_t device, int32_t unit, int64_t b) {
          mem.units[unit_index(device, unit)].bytes[kState] += b;
        });
        if (shards_[static_cast<size_t>(v)] > 1) {
          int64_t whole = 0;
          for_each_piece(
              v, [&](int32_t, int32_t, int64_t b) { whole += b; }, false);
          for_each_piece(v, [&](int32_t, int32_t, int64_t b) { whole -= b; });
          mem.replica_sharding_saved_bytes += whole;
        }
      }
    for (auto v : g.inputs)
      for_each_piece(v, [&](int32_t device, int32_t unit, int64_t b) {
        mem.units[unit_index(device, unit)].bytes[kStream] += b;
      });
  }

  // Final costs with the real layouts; vertices, their state and exchange code (the vertex
  // types of each unit go to `types`), compute sets and one superstep per node.
  void account_steps(std::vector<std::vector<uint32_t>>& types) {
    const int64_t N = static_cast<int64_t>(g.nodes.size());
    auto& mem = plan.memory;
    plan.supersteps.clear();
    plan.compute_sets = plan.vertices = plan.edges = 0;
    const int64_t state_per_field = terms.state_bytes_per_field;
    for (int64_t ni = 0; ni < N; ++ni) {
      auto& np = plan.nodes[static_cast<size_t>(ni)];
      const auto& n = g.nodes[static_cast<size_t>(ni)];
      Cost c = evaluate(ni, np.spec, np.span, false, np.follows);
      // A view runs no vertex and needs no superstep of its own: what it costs is the exchange
      // that brings its elements where its readers' units want them, done in their exchange
      // phase (Poplar rearranges a view when an op needs another layout, a copy with no compute).
      // A small constant is written with the program at load time: nothing at run time at all.
      const bool offchip_op = offchip_node[static_cast<size_t>(ni)] != 0;
      const bool views_only = is_view_node(n) || is_constant_node(n) || offchip_op;
      if (views_only) c.compute = c.sync = 0, c.serial = 1, c.temp = 0;
      // Off the units altogether: its time is the off-chip memory's (account_cycles).
      if (offchip_op) c.exchange = c.inter = c.exchange_total = c.inter_bytes = 0, c.transfers = 0;
      // An op on replica-sharded values (the optimizer's update) computes its replica's share.
      int64_t shards = 1;
      for (auto v : n.outputs) shards = std::max(shards, shards_[static_cast<size_t>(v)]);
      np.compute_cycles =
          shards > 1 ? std::ceil(c.compute / static_cast<double>(shards)) : c.compute;
      np.exchange_cycles = c.exchange;
      np.sync_cycles = c.sync;
      np.inter_device_cycles = c.inter;
      np.exchange_bytes = c.exchange_total;
      np.inter_device_bytes = c.inter_bytes;
      np.max_temp_bytes = c.temp;
      np.serial = c.serial;
      const DType dt = n.inputs.empty() ? g.meta(n.outputs[0]).dtype : g.meta(n.inputs[0]).dtype;
      const int64_t fields = static_cast<int64_t>(n.inputs.size() + n.outputs.size());
      // One vertex per unit per compute set (a supervisor vertex runs the six workers).
      auto add_vertices = [&](int64_t first, int64_t count, int stage, int64_t nfields,
                              int64_t transfers) {
        for (int64_t p = 0; p < count; ++p) {
          const size_t ti = unit_index(np.span.device, static_cast<int32_t>((first + p) % T()));
          auto& tm = mem.units[ti];
          tm.bytes[kKernelState] += (1 + nfields) * state_per_field;
          tm.bytes[kReceiveCode] += transfers * terms.receive_code_bytes_per_transfer;
          types[ti].push_back(vertex_type(n, dt, stage));
        }
        np.vertices += count;
      };
      np.vertices = 0;
      if (views_only) {
        // No vertices, compute sets or code.
      } else if (np.spec.kind == SplitKind::Grid) {
        add_vertices(np.span.first_unit, np.span.parts, np.spec.matrix ? 1 : 3, fields,
                     c.transfers);
        if (np.reduce_units > 0) {
          add_vertices(np.span.first_unit, np.reduce_units, 2, 1 + np.grid.pk, 1);
          plan.compute_sets += 1;
        }
      } else {
        add_vertices(np.span.first_unit, np.span.parts, 0, fields, c.transfers);
        if (np.spec.kind == SplitKind::TreeSum) {
          add_vertices(np.span.first_unit, 1, 2, 1 + np.span.parts, 1);
          plan.compute_sets += 1;
        }
      }
      if (!views_only) plan.compute_sets += np.serial;
      plan.vertices += np.vertices;
      plan.edges += np.vertices * fields;
      if (!offchip_op)
        plan.supersteps.push_back(Superstep{ni, np.span.device, np.compute_cycles,
                                            np.exchange_cycles + np.inter_device_cycles,
                                            np.sync_cycles});
    }
  }

  // Code: one codelet per vertex type a unit runs; and every unit's stack.
  void account_code(std::vector<std::vector<uint32_t>>& types) {
    auto& mem = plan.memory;
    for (size_t ti = 0; ti < mem.units.size(); ++ti) {
      auto& ty = types[ti];
      std::sort(ty.begin(), ty.end());
      ty.erase(std::unique(ty.begin(), ty.end()), ty.end());
      for (auto k : ty)
        mem.units[ti].bytes[kCode] +=
            (k & 3u) == 1u ? terms.code_bytes_matrix : terms.code_bytes_vector;
      mem.units[ti].bytes[kStack] = terms.stack_bytes_per_unit;
    }
  }

  // Values live in buffers. In place, as Poplar runs them: an elementwise or scatter-add
  // result shares the buffer of an input of its size and layout that dies at that op (a
  // state's own memory included, when the state is updated and nothing reads it later), and a
  // state's new value, once nothing reads the old one, is written into the state's memory.
  // States in streaming memory come onto the units when first read and their new values go
  // straight back. A buffer is freed when the last value in it dies; state memory never is.
  struct Liveness {
    struct Buffer {
      int64_t owner = -1;  // the value whose layout it has
      int32_t refs = 0;
      bool state = false;  // on-chip state memory: counted as state, never freed
    };
    Planner& p;
    const ir::Graph& g;
    // Not-always-live bytes per unit now and at their peak, and on all units now.
    std::vector<int64_t> live, peak;
    int64_t live_total = 0;
    std::vector<int64_t> updates_state;  // per new state value: its state, else -1
    std::vector<bool> updated;           // per state: whether the step gives it a new value
    // A new value bound for streaming memory leaves the units after its last reader here.
    std::vector<int64_t> last_read;
    std::vector<Buffer> buffers;
    std::vector<int64_t> buffer_of;
    // Per step: values whose bytes outlive their own last reader (a view of them is read
    // later), freed after the view's last reader.
    std::vector<std::vector<int64_t>> late;
    std::vector<double> streamed;       // bytes streamed in and out per device
    std::vector<double> streamed_step;  // ... and per step
    const bool per_read;                // each reading step streams its own copy of a state

    explicit Liveness(Planner& planner)
        : p(planner),
          g(planner.g),
          live(planner.plan.memory.units.size(), 0),
          peak(planner.plan.memory.units.size(), 0),
          updates_state(g.values.size(), -1),
          updated(g.values.size(), false),
          last_read(g.values.size(), -1),
          buffer_of(g.values.size(), -1),
          late(g.nodes.size()),
          streamed(static_cast<size_t>(planner.mc.devices), 0.0),
          streamed_step(g.nodes.size(), 0.0),
          per_read(planner.t.streaming().per_read) {
      const auto N = static_cast<int64_t>(g.nodes.size());
      for (auto& u : g.updates) updates_state[static_cast<size_t>(u.value)] = u.state;
      for (auto& u : g.updates) updated[static_cast<size_t>(u.state)] = true;
      for (int64_t ni = 0; ni < N; ++ni)
        for (auto v : g.nodes[static_cast<size_t>(ni)].inputs)
          last_read[static_cast<size_t>(v)] = ni;
      for (auto v : g.states)
        if (!offchip(v)) hold(v, new_buffer(v, true));
      const auto& ends = p.held_until;
      for (size_t v = 0; v < g.values.size(); ++v)
        if (ends[v] != p.last[v] && ends[v] >= 0 && ends[v] < N &&
            g.values[v].kind == ir::ValueKind::Op)
          late[static_cast<size_t>(ends[v])].push_back(static_cast<int64_t>(v));
    }

    bool offchip(int64_t v) const { return g.values[static_cast<size_t>(v)].offchip; }
    bool streams_out(int64_t v) const {
      const int64_t st = updates_state[static_cast<size_t>(v)];
      return st >= 0 && offchip(st);
    }
    static bool in_place_op(ir::OpKind k) {
      using C = ir::OpCategory;
      return ir::op_in(k, C::Unary, C::Broadcast, C::ActGrad, C::Scatter, C::Update);
    }
    bool same_place(int64_t a, int64_t b) const {
      const auto& la = p.plan.values[static_cast<size_t>(a)];
      const auto& lb = p.plan.values[static_cast<size_t>(b)];
      return g.meta(a).nbytes() == g.meta(b).nbytes() && la.axis == lb.axis && la.span == lb.span;
    }
    void add_live(int64_t v, int64_t sign) {
      p.for_each_piece(v, [&](int32_t device, int32_t unit, int64_t b) {
        live[p.unit_index(device, unit)] += sign * b;
        live_total += sign * b;
      });
    }
    int64_t new_buffer(int64_t v, bool state) {
      buffers.push_back(Buffer{v, 0, state});
      if (!state) add_live(v, 1);
      return static_cast<int64_t>(buffers.size()) - 1;
    }
    void hold(int64_t v, int64_t b) {
      buffer_of[static_cast<size_t>(v)] = b;
      ++buffers[static_cast<size_t>(b)].refs;
    }
    void drop(int64_t v) {
      const int64_t b = buffer_of[static_cast<size_t>(v)];
      if (b < 0) return;
      buffer_of[static_cast<size_t>(v)] = -1;
      auto& buf = buffers[static_cast<size_t>(b)];
      if (--buf.refs == 0 && !buf.state) add_live(buf.owner, -1);
    }

    // Streamed inputs of step ni come onto its units; a step run beside the off-chip memory
    // instead streams its on-chip inputs out to it and leaves its off-chip ones there.
    void stream_in(int64_t ni, const ir::Node& n) {
      if (p.offchip_node[static_cast<size_t>(ni)]) {
        std::vector<int64_t> seen;
        for (auto v : n.inputs) {
          const auto& val = g.values[static_cast<size_t>(v)];
          const bool there = offchip(v) || (val.kind == ir::ValueKind::Op && val.node >= 0 &&
                                            p.offchip_node[static_cast<size_t>(val.node)]);
          if (there || std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
          seen.push_back(v);
          const double b = static_cast<double>(g.meta(v).nbytes()) /
                           static_cast<double>(p.shards_[static_cast<size_t>(v)]);
          streamed[static_cast<size_t>(p.plan.values[static_cast<size_t>(v)].span.device)] += b;
          streamed_step[static_cast<size_t>(ni)] += b;
        }
        return;
      }
      for (auto v : n.inputs)
        if (offchip(v) && buffer_of[static_cast<size_t>(v)] < 0 &&
            p.last[static_cast<size_t>(v)] >= ni) {
          hold(v, new_buffer(v, false));
          const double b = static_cast<double>(g.meta(v).nbytes()) /
                           static_cast<double>(p.shards_[static_cast<size_t>(v)]);
          streamed[static_cast<size_t>(p.plan.values[static_cast<size_t>(v)].span.device)] += b;
          streamed_step[static_cast<size_t>(ni)] += b;
        }
    }

    // Gives each result of step ni a buffer (its state's, an input's that dies here, or a new
    // one); returns the units the results occupy.
    std::vector<size_t> place_results(int64_t ni, const ir::Node& n) {
      const auto& ends = p.held_until;
      std::vector<size_t> touched;
      if (p.offchip_node[static_cast<size_t>(ni)]) return touched;  // written where they live
      std::vector<int64_t> taken;  // inputs whose buffer a result took over
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const int64_t v = n.outputs[k];
        const auto vu = static_cast<size_t>(v);
        if (p.view[vu]) continue;  // its inputs' buffers hold its bytes
        const int64_t st = updates_state[vu];
        int64_t b = -1;
        if (streams_out(v)) {
          const double bytes =
              static_cast<double>(g.meta(v).nbytes()) / static_cast<double>(p.shards_[vu]);
          streamed[static_cast<size_t>(p.plan.values[vu].span.device)] += bytes;
          streamed_step[static_cast<size_t>(ni)] += bytes;
        } else if (st >= 0 && ends[static_cast<size_t>(st)] <= ni &&
                   g.meta(st).nbytes() == g.meta(v).nbytes()) {
          b = buffer_of[static_cast<size_t>(st)];
        }
        // The first result may take an input's buffer; each result of a fused update only the
        // buffer of the input it updates (its new value, as the in-place vertex writes it).
        const bool update = ir::is_elementwise_update(n.kind);
        if (b < 0 && (k == 0 || update) && in_place_op(n.kind))
          for (size_t j = update ? k : 0; j < (update ? k + 1 : n.inputs.size()); ++j) {
            const int64_t in = n.inputs[j];
            const auto iu = static_cast<size_t>(in);
            const bool dies = ends[iu] == ni || (g.values[iu].kind == ir::ValueKind::State &&
                                                 updated[iu] && ends[iu] <= ni);
            if (buffer_of[iu] >= 0 && dies &&
                std::find(taken.begin(), taken.end(), in) == taken.end() &&
                (g.values[iu].kind != ir::ValueKind::State || updated[iu]) && same_place(in, v)) {
              b = buffer_of[iu];
              taken.push_back(in);
              break;
            }
          }
        hold(v, b >= 0 ? b : new_buffer(v, false));
        p.for_each_piece(v, [&](int32_t device, int32_t unit, int64_t) {
          touched.push_back(p.unit_index(device, unit));
        });
      }
      return touched;
    }

    // Step ni's peak on each unit it touches: live bytes plus, on the units it runs on, the
    // largest part's temporaries (a bound, never below; a view moves nothing). Returns the
    // step's temporaries on all units.
    int64_t step_peaks(int64_t ni, const ir::Node& n, const std::vector<size_t>& touched) {
      auto& mem = p.plan.memory;
      const auto& np = p.plan.nodes[static_cast<size_t>(ni)];
      const auto temp =
          p.is_view_node(n) ? int64_t{0} : static_cast<int64_t>(std::ceil(np.max_temp_bytes));
      int64_t temp_total = 0;
      auto bump = [&](size_t ti, int64_t tmp) {
        if (live[ti] + tmp > peak[ti]) {
          peak[ti] = live[ti] + tmp;
          mem.units[ti].bytes[kActivations] = live[ti];
          mem.units[ti].bytes[kTemporaries] = tmp;
          mem.units[ti].peak_step = static_cast<int32_t>(ni);
        }
      };
      const int64_t temp_units = std::max<int64_t>(np.span.parts, np.reduce_units);
      for (int64_t q = 0; q < std::min<int64_t>(temp_units, p.T()); ++q) {
        const size_t ti = p.unit_index(np.span.device, np.span.unit(q, p.T()));
        temp_total += temp;
        bump(ti, temp);
      }
      for (auto ti : touched) bump(ti, 0);
      return temp_total;
    }

    // Values die after their last reader; outputs nobody reads die at once.
    void release(int64_t ni, const ir::Node& n) {
      const auto& ends = p.held_until;
      for (auto v : n.outputs)
        if (ends[static_cast<size_t>(v)] < 0 ||
            (streams_out(v) && last_read[static_cast<size_t>(v)] < 0))
          drop(v);
      std::vector<int64_t> seen;
      for (auto v : n.inputs) {
        const auto vu = static_cast<size_t>(v);
        // Streamed per read: an off-chip state leaves after each step that reads it, unless a
        // view of it is read later.
        const bool dies =
            ((g.values[vu].kind == ir::ValueKind::Op || offchip(v)) && ends[vu] == ni) ||
            (streams_out(v) && last_read[vu] == ni) ||
            (per_read && offchip(v) && g.values[vu].kind == ir::ValueKind::State &&
             ends[vu] == p.last[vu]);
        if (dies && std::find(seen.begin(), seen.end(), v) == seen.end()) {
          seen.push_back(v);
          drop(v);
        }
      }
      for (auto v : late[static_cast<size_t>(ni)])
        if (std::find(seen.begin(), seen.end(), v) == seen.end()) drop(v);
    }
  };

  // Always-live bytes, then the not-always-live bytes of every step by liveness, with each
  // step's temporaries on the units it runs on. Returns the bytes streamed per device.
  std::vector<double> account_liveness() {
    const int64_t N = static_cast<int64_t>(g.nodes.size());
    auto& mem = plan.memory;
    int64_t always = 0;
    for (auto& tm : mem.units) always += tm.always_live();
    mem.always_live_per_step.assign(static_cast<size_t>(N), always);
    mem.not_always_live_per_step.assign(static_cast<size_t>(N), 0);
    Liveness l(*this);
    for (int64_t ni = 0; ni < N; ++ni) {
      const auto& n = g.nodes[static_cast<size_t>(ni)];
      l.stream_in(ni, n);
      const std::vector<size_t> touched = l.place_results(ni, n);
      const int64_t temp_total = l.step_peaks(ni, n, touched);
      mem.not_always_live_per_step[static_cast<size_t>(ni)] = l.live_total + temp_total;
      l.release(ni, n);
    }
    streamed_per_node = std::move(l.streamed_step);
    return std::move(l.streamed);
  }

  // Each step's cycles on the units (compute, exchange, sync), from its supersteps.
  std::vector<double> busy_per_node() const {
    std::vector<double> busy(g.nodes.size(), 0.0);
    for (auto& s : plan.supersteps)
      if (s.node >= 0) busy[static_cast<size_t>(s.node)] += s.compute + s.exchange + s.sync;
    return busy;
  }

  // The cycles streaming costs each device: all its traffic, or with prefetching what the
  // compute of the step before does not hide (the first streamed step's in full: the boundary
  // between iterations, where nothing computes ahead of it).
  std::vector<double> streaming_cycles(const std::vector<double>& streamed) const {
    std::vector<double> out(static_cast<size_t>(mc.devices), 0.0);
    if (!t.streaming().prefetch) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = t.streaming_cycles(streamed[i]);
      return out;
    }
    const std::vector<double> busy = busy_per_node();
    std::vector<double> window(static_cast<size_t>(mc.devices), 0.0);
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const auto d = static_cast<size_t>(plan.nodes[ni].span.device);
      if (streamed_per_node[ni] > 0) {
        const double s = t.streaming_cycles(streamed_per_node[ni]);
        const double hidden = std::min(s, window[d]);
        out[d] += s - hidden;
        window[d] -= hidden;
      }
      if (busy[ni] > 0) window[d] = busy[ni];
    }
    return out;
  }

  // The off-chip memory's own work (offchip_node steps) on each device: each step starts when
  // the units have made its operands and the off-chip step before it is done; only what runs
  // past the units' last step costs time (the rest overlaps their work).
  std::vector<double> offchip_cycles() const {
    std::vector<double> out(static_cast<size_t>(mc.devices), 0.0);
    if (!t.computes_offchip()) return out;
    const std::vector<double> busy = busy_per_node();
    std::vector<double> done_at(g.nodes.size(), 0.0);
    std::vector<double> units(out.size(), 0.0), memory(out.size(), 0.0);
    for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
      const auto d = static_cast<size_t>(plan.nodes[ni].span.device);
      units[d] += busy[ni];
      done_at[ni] = units[d];
      if (!offchip_node[ni]) continue;
      const auto& n = g.nodes[ni];
      double ready = 0, bytes = 0;
      for (auto v : n.inputs) {
        const auto& val = g.values[static_cast<size_t>(v)];
        if (val.kind == ir::ValueKind::Op && val.node >= 0)
          ready = std::max(ready, done_at[static_cast<size_t>(val.node)]);
        bytes += static_cast<double>(g.meta(v).nbytes());
      }
      for (auto v : n.outputs) bytes += static_cast<double>(g.meta(v).nbytes());
      memory[d] = std::max(memory[d], ready) + t.offchip_op_cycles(bytes);
    }
    for (size_t d = 0; d < out.size(); ++d) out[d] = std::max(0.0, memory[d] - units[d]);
    return out;
  }

  // Host streams, state write-back and the replica all-reduce.
  void account_cycles(const std::vector<double>& streamed) {
    std::vector<double> host_in(static_cast<size_t>(mc.devices), 0),
        host_out(static_cast<size_t>(mc.devices), 0);
    plan.host_in_bytes = plan.host_out_bytes = 0;
    for (auto v : g.inputs) {
      const double b = static_cast<double>(g.meta(v).nbytes());
      host_in[static_cast<size_t>(plan.values[static_cast<size_t>(v)].span.device)] += b;
      plan.host_in_bytes += b;
    }
    for (auto v : g.outputs) {
      const double b = static_cast<double>(g.meta(v).nbytes());
      host_out[static_cast<size_t>(plan.values[static_cast<size_t>(v)].span.device)] += b;
      plan.host_out_bytes += b;
    }
    double writeback = 0;
    for (auto& u : g.updates) {
      const auto& nv = g.values[static_cast<size_t>(u.value)];
      if (nv.kind == ir::ValueKind::Op && nv.node >= 0 &&
          offchip_node[static_cast<size_t>(nv.node)])
        continue;  // written where the state lives, off chip
      const auto& ls = plan.values[static_cast<size_t>(u.state)];
      const auto& lv = plan.values[static_cast<size_t>(u.value)];
      if (!(ls.axis == lv.axis && ls.span == lv.span)) {
        double mx = 0;
        for (int64_t p = 0; p < ls.span.parts; ++p) mx = std::max(mx, ls.bytes_on_part(p));
        writeback += mx;
      }
    }
    plan.cycles = RunCycles{};
    plan.cycles.per_device.assign(static_cast<size_t>(mc.devices), DeviceCycles{});
    const std::vector<double> streaming = streaming_cycles(streamed);
    const std::vector<double> offchip = offchip_cycles();
    for (int32_t i = 0; i < mc.devices; ++i) {
      auto& c = plan.cycles.per_device[static_cast<size_t>(i)];
      const double in = host_in[static_cast<size_t>(i)], out = host_out[static_cast<size_t>(i)];
      c.host = t.host_cycles(in, o.replication_factor) + t.host_cycles(out, o.replication_factor) +
               streaming[static_cast<size_t>(i)] + offchip[static_cast<size_t>(i)];
      // Each direction's stream copy begins with the device syncing with the host.
      c.host += ((in > 0) + (out > 0)) * t.host_sync_cycles();
    }
    if (writeback > 0) {
      const RegionShape device = region_shape(mc, T());  // every unit writes back at once
      plan.supersteps.push_back(
          Superstep{-1, 0, 0, t.region_exchange_cycles(writeback, device.width, device.height),
                    t.sync_cycles()});
    }
    for (auto& s : plan.supersteps) {
      auto& c = plan.cycles.per_device[static_cast<size_t>(s.device)];
      c.compute += s.compute;
      c.exchange += s.exchange;
      c.sync += s.sync;
    }
    std::vector<double> per_device;
    for (auto& c : plan.cycles.per_device) per_device.push_back(c.total());
    plan.cycles.total = t.program_cycles(per_device);
    plan.cycles.simulated_seconds = plan.cycles.total / mc.clock_hz;
  }

  // Totals and the out-of-memory verdict.
  void account_verdict() {
    auto& mem = plan.memory;
    mem.units_over = 0;
    mem.worst_unit = 0;
    for (size_t i = 0; i < mem.units.size(); ++i) {
      if (mem.units[i].total() > mc.bytes_per_unit) ++mem.units_over;
      if (mem.units[i].total() > mem.units[static_cast<size_t>(mem.worst_unit)].total())
        mem.worst_unit = static_cast<int64_t>(i);
    }
    mem.out_of_memory = mem.units_over > 0;
    worst_unit_tensors();
  }

  // Poplar's reshape, slice, concat, dimShuffle and broadcast make views of their inputs: no
  // copy, no memory of their own, and the viewed tensors stay allocated while the view is read.
  // A result is counted so when it is none of the graph's outputs or new state values and every
  // input is on the result's own device and not in streaming memory (a view across devices is a
  // copy; streamed state arrives whole). held_until: each value's last reader, or the last reader
  // of any view of it, whichever is later.
  static bool view_kind(ir::OpKind k) { return ir::op_category(k) == ir::OpCategory::View; }
  // Whether node n creates a small constant: a Full of at most kMaxConstantElements elements
  // that the step computes with (not a graph output or a state's new value), such as the
  // scalars an op with a number operand traces to. Poplar holds those as graph constants, part
  // of the program loaded onto the units, so they run no vertex and take no superstep; larger
  // fills stay programs, as popops::fill (PopART zeroing an accumulator). Their few bytes are
  // still counted while they are live.
  static constexpr int64_t kMaxConstantElements = 16;
  bool is_constant_node(const ir::Node& n) const {
    if (n.kind != ir::OpKind::Full || !n.inputs.empty() || n.outputs.size() != 1) return false;
    const auto v = static_cast<size_t>(n.outputs[0]);
    return last[v] < static_cast<int64_t>(g.nodes.size()) &&
           g.values[v].meta.numel() <= kMaxConstantElements;
  }
  // Whether every result of node n is a view (find_views).
  bool is_view_node(const ir::Node& n) const {
    return !n.outputs.empty() && std::all_of(n.outputs.begin(), n.outputs.end(), [&](int64_t v) {
      return view[static_cast<size_t>(v)] != 0;
    });
  }
  void find_views() {
    const auto N = static_cast<int64_t>(g.nodes.size());
    view.assign(g.values.size(), 0);
    held_until = last;
    for (int64_t ni = N - 1; ni >= 0; --ni) {
      const auto& n = g.nodes[static_cast<size_t>(ni)];
      if (!view_kind(n.kind) || n.outputs.size() != 1) continue;
      const auto v = static_cast<size_t>(n.outputs[0]);
      if (last[v] >= N) continue;  // a graph output or a state's new value
      const int32_t device = plan.values[v].span.device;
      bool ok = true;
      for (auto in : n.inputs) {
        const auto& val = g.values[static_cast<size_t>(in)];
        ok = ok && !val.offchip && plan.values[static_cast<size_t>(in)].span.device == device;
      }
      if (!ok) continue;
      view[v] = 1;
      const int64_t end = held_until[v] < 0 ? ni : held_until[v];
      for (auto in : n.inputs)
        held_until[static_cast<size_t>(in)] = std::max(held_until[static_cast<size_t>(in)], end);
    }
  }

  void worst_unit_tensors() {
    auto& mem = plan.memory;
    const auto wt = mem.worst_unit;
    const int32_t device = static_cast<int32_t>(wt / T()), unit = static_cast<int32_t>(wt % T());
    const int32_t step = mem.units[static_cast<size_t>(wt)].peak_step;
    std::vector<int64_t> def(g.values.size(), -1);
    for (size_t ni = 0; ni < g.nodes.size(); ++ni)
      for (auto v : g.nodes[ni].outputs) def[static_cast<size_t>(v)] = static_cast<int64_t>(ni);
    auto name_of = [&](int64_t v) {
      const auto& val = g.values[static_cast<size_t>(v)];
      if (!val.name.empty()) return val.name;
      if (val.kind == ir::ValueKind::Op)
        return detail::str(ir::op_name(g.nodes[static_cast<size_t>(val.node)].kind), "#", val.node,
                           " output ", shape_str(val.meta.shape));
      return detail::str(val.kind == ir::ValueKind::State ? "state " : "input ", v, " ",
                         shape_str(val.meta.shape));
    };
    std::vector<TensorOnUnit> list;
    for (size_t v = 0; v < g.values.size(); ++v) {
      const auto& val = g.values[v];
      const auto& l = plan.values[v];
      if (l.span.device != device) continue;
      const char* cat = val.kind == ir::ValueKind::State   ? "state"
                        : val.kind == ir::ValueKind::Input ? "stream_buffers"
                                                           : "activations";
      if (view[v]) continue;  // no bytes of its own
      if (val.kind == ir::ValueKind::Op) {
        const int64_t lu = held_until[v] < 0 ? def[v] : held_until[v];
        if (step < 0 || def[v] > step || lu < step) continue;
      }
      double b = 0;
      for (int64_t p = 0; p < l.span.parts; ++p)
        if (l.span.unit(p, T()) == unit) b += l.bytes_on_part(p);
      if (b > 0) list.push_back({name_of(static_cast<int64_t>(v)), static_cast<int64_t>(b), cat});
    }
    if (step >= 0 && mem.units[static_cast<size_t>(wt)].bytes[kTemporaries] > 0)
      list.push_back({detail::str("temporaries of ",
                                  ir::op_name(g.nodes[static_cast<size_t>(step)].kind), "#", step),
                      mem.units[static_cast<size_t>(wt)].bytes[kTemporaries], "temporaries"});
    std::stable_sort(list.begin(), list.end(), [](const TensorOnUnit& a, const TensorOnUnit& b) {
      return a.bytes > b.bytes;
    });
    if (list.size() > 10) list.resize(10);
    mem.worst_unit_tensors = std::move(list);
  }
};

// ---- serialisation ------------------------------------------------------------------------

using nlohmann::json;

inline json span_json(const UnitSpan& s) {
  return json::array({s.device, s.first_unit, s.parts, s.extent, s.grain, s.width, s.columns});
}
inline UnitSpan span_from(const json& j) {
  return UnitSpan{j.at(0).get<int32_t>(), j.at(1).get<int32_t>(), j.at(2).get<int32_t>(),
                  j.at(3).get<int64_t>(), j.at(4).get<int64_t>(), j.at(5).get<int32_t>(),
                  j.at(6).get<int32_t>()};
}

inline json plan_to_json(const Plan& p) {
  json j;
  j["key"] = p.key;
  j["partials"] = dtype_name(p.partials_type);
  j["target"] = p.target_json;
  const auto& mc = p.machine;
  j["machine"] =
      json::array({mc.name, mc.devices, mc.units_per_device, mc.bytes_per_unit, mc.clock_hz,
                   mc.alignment_bytes, mc.mesh_columns, mc.device_noun, mc.unit_noun});
  json nodes = json::array();
  for (auto& n : p.nodes)
    nodes.push_back({static_cast<int>(n.spec.kind),
                     n.spec.out_dim,
                     n.spec.in_dim,
                     n.spec.extent,
                     n.spec.grain,
                     n.spec.min_rows,
                     n.spec.merge_all,
                     n.spec.matrix,
                     span_json(n.span),
                     n.serial,
                     n.vertices,
                     n.flops,
                     n.compute_cycles,
                     n.exchange_cycles,
                     n.sync_cycles,
                     n.inter_device_cycles,
                     n.exchange_bytes,
                     n.inter_device_bytes,
                     n.max_temp_bytes,
                     json::array({n.grid.pb, n.grid.pm, n.grid.pn, n.grid.pk, n.grid.sk}),
                     n.reduce_units,
                     n.resident,
                     n.follows});
  j["nodes"] = nodes;
  json values = json::array();
  for (auto& v : p.values) values.push_back({v.axis, span_json(v.span), v.bytes});
  j["values"] = values;
  json ss = json::array();
  for (auto& s : p.supersteps) ss.push_back({s.node, s.device, s.compute, s.exchange, s.sync});
  j["supersteps"] = ss;
  json units = json::array();
  for (auto& t : p.memory.units) {
    json a = json::array();
    for (auto b : t.bytes) a.push_back(b);
    a.push_back(t.peak_step);
    units.push_back(a);
  }
  json wt = json::array();
  for (auto& x : p.memory.worst_unit_tensors) wt.push_back({x.name, x.bytes, x.category});
  j["memory"] = {{"bytes_per_unit", p.memory.bytes_per_unit},
                 {"units", units},
                 {"always", p.memory.always_live_per_step},
                 {"not_always", p.memory.not_always_live_per_step},
                 {"oom", p.memory.out_of_memory},
                 {"over", p.memory.units_over},
                 {"worst", p.memory.worst_unit},
                 {"worst_tensors", wt},
                 {"advice", p.memory.advice},
                 {"rts_saved", p.memory.replica_sharding_saved_bytes}};
  json devices = json::array();
  for (auto& c : p.cycles.per_device) devices.push_back({c.compute, c.exchange, c.sync, c.host});
  j["cycles"] = {
      {"per_device", devices}, {"total", p.cycles.total}, {"seconds", p.cycles.simulated_seconds}};
  j["host"] = {p.host_in_bytes, p.host_out_bytes};
  j["size"] = {p.compute_sets, p.vertices, p.edges};
  return j;
}

inline Plan plan_from_json(const json& j) {
  Plan p;
  p.key = j.at("key").get<uint64_t>();
  p.partials_type = dtype_from_name(j.at("partials").get<std::string>());
  p.target_json = j.at("target").get<std::string>();
  const auto& mc = j.at("machine");
  p.machine = emu::Machine{
      mc.at(0).get<std::string>(), mc.at(1).get<int64_t>(),     mc.at(2).get<int64_t>(),
      mc.at(3).get<int64_t>(),     mc.at(4).get<double>(),      mc.at(5).get<int64_t>(),
      mc.at(6).get<int64_t>(),     mc.at(7).get<std::string>(), mc.at(8).get<std::string>()};
  for (auto& n : j.at("nodes")) {
    NodePlan np;
    np.spec.kind = static_cast<SplitKind>(n.at(0).get<int>());
    np.spec.out_dim = n.at(1).get<int>();
    np.spec.in_dim = n.at(2).get<std::vector<int>>();
    np.spec.extent = n.at(3).get<int64_t>();
    np.spec.grain = n.at(4).get<int64_t>();
    np.spec.min_rows = n.at(5).get<int64_t>();
    np.spec.merge_all = n.at(6).get<bool>();
    np.spec.matrix = n.at(7).get<bool>();
    np.span = span_from(n.at(8));
    np.serial = n.at(9).get<int32_t>();
    np.vertices = n.at(10).get<int64_t>();
    np.flops = n.at(11).get<double>();
    np.compute_cycles = n.at(12).get<double>();
    np.exchange_cycles = n.at(13).get<double>();
    np.sync_cycles = n.at(14).get<double>();
    np.inter_device_cycles = n.at(15).get<double>();
    np.exchange_bytes = n.at(16).get<double>();
    np.inter_device_bytes = n.at(17).get<double>();
    np.max_temp_bytes = n.at(18).get<double>();
    const auto& gr = n.at(19);
    np.grid = MatrixGrid{gr.at(0).get<int32_t>(), gr.at(1).get<int32_t>(), gr.at(2).get<int32_t>(),
                         gr.at(3).get<int32_t>(), gr.at(4).get<int32_t>()};
    np.reduce_units = n.at(20).get<int64_t>();
    np.resident = n.at(21).get<uint8_t>();
    np.follows = n.at(22).get<int32_t>();
    p.nodes.push_back(std::move(np));
  }
  for (auto& v : j.at("values"))
    p.values.push_back(
        ValueLayout{v.at(0).get<int32_t>(), span_from(v.at(1)), v.at(2).get<int64_t>()});
  for (auto& s : j.at("supersteps"))
    p.supersteps.push_back(Superstep{s.at(0).get<int64_t>(), s.at(1).get<int32_t>(),
                                     s.at(2).get<double>(), s.at(3).get<double>(),
                                     s.at(4).get<double>()});
  const auto& m = j.at("memory");
  p.memory.bytes_per_unit = m.at("bytes_per_unit").get<int64_t>();
  for (auto& t : m.at("units")) {
    UnitMemory tm;
    for (int c = 0; c < kNumCategories; ++c)
      tm.bytes[c] = t.at(static_cast<size_t>(c)).get<int64_t>();
    tm.peak_step = t.at(kNumCategories).get<int32_t>();
    p.memory.units.push_back(tm);
  }
  p.memory.always_live_per_step = m.at("always").get<std::vector<int64_t>>();
  p.memory.not_always_live_per_step = m.at("not_always").get<std::vector<int64_t>>();
  p.memory.out_of_memory = m.at("oom").get<bool>();
  p.memory.units_over = m.at("over").get<int64_t>();
  p.memory.worst_unit = m.at("worst").get<int64_t>();
  p.memory.advice = m.at("advice").get<std::string>();
  p.memory.replica_sharding_saved_bytes = m.value("rts_saved", int64_t{0});
  for (auto& x : m.at("worst_tensors"))
    p.memory.worst_unit_tensors.push_back(
        {x.at(0).get<std::string>(), x.at(1).get<int64_t>(), x.at(2).get<std::string>()});
  for (auto& c : j.at("cycles").at("per_device"))
    p.cycles.per_device.push_back(DeviceCycles{c.at(0).get<double>(), c.at(1).get<double>(),
                                               c.at(2).get<double>(), c.at(3).get<double>()});
  p.cycles.total = j.at("cycles").at("total").get<double>();
  p.cycles.simulated_seconds = j.at("cycles").at("seconds").get<double>();
  p.host_in_bytes = j.at("host").at(0).get<double>();
  p.host_out_bytes = j.at("host").at(1).get<double>();
  p.compute_sets = j.at("size").at(0).get<int64_t>();
  p.vertices = j.at("size").at(1).get<int64_t>();
  p.edges = j.at("size").at(2).get<int64_t>();
  return p;
}

inline constexpr char kMagic[8] = {'I', 'P', 'U', 'M', 'L', 'P', 'L', 'N'};
// 4: the replica all-reduce left the programs (charged once per update by the runtime).
// 5: views cost no compute; 6: nor do small constants; 7: the target as a model (its JSON and
// the machine's shape); 8: the core's own words for its units and devices ("units",
// "per_device"); 9: host syncs and shared host links in the host cycles; 10: a mesh's large
// regions as bands of whole rows; 11: a mesh's coverage counts the bytes of long-held results.
inline constexpr uint32_t kVersion = 11;
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t key;
  uint64_t payload_size;
  uint8_t mac[32];  // HMAC-SHA-256 of the header up to here and the payload, under the cache key
};

// The cache's secret: 32 random bytes in `<dir>/ipuml-cache.key`, mode 0600, made by the first
// writer. It turns the checksum into a keyed one, so an entry cannot be forged or edited without
// reading the key: an integrity check against accidents and other users' files, not a security
// boundary (whoever can read the key can forge entries; loaded plans are validated anyway).
inline constexpr const char* kKeyFile = "ipuml-cache.key";

inline bool read_cache_key(const std::string& dir, std::string& key) {
  const std::string path = (std::filesystem::path(dir) / kKeyFile).string();
  try {
    const io::RegularFile f = io::open_regular_file(path, "plan cache key", false);
    struct stat st {};
    if (::fstat(f.fd(), &st) != 0 || f.size() != 32 || (st.st_mode & 077) != 0 ||
        st.st_uid != ::geteuid())
      return false;
    key.assign(32, '\0');
    f.read_at(0, key.data(), key.size(), "plan cache key");
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Reads the key, making it first if there is none (written to a temporary and linked into
// place, so a concurrent reader never sees half a key and two writers agree on one).
inline bool cache_key(const std::string& dir, bool create, std::string& key) {
  if (read_cache_key(dir, key) || !create) return !key.empty() && key.size() == 32;
  uint8_t fresh[32];
  for (size_t got = 0; got < sizeof fresh;) {
    const ssize_t n = ::getrandom(fresh + got, sizeof fresh - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  const std::string path = (std::filesystem::path(dir) / kKeyFile).string();
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool written = ::write(fd, fresh, sizeof fresh) == static_cast<ssize_t>(sizeof fresh);
  ::close(fd);
  if (written) (void)::link(tmp.c_str(), path.c_str());  // loses to an existing key: fine
  ::unlink(tmp.c_str());
  return read_cache_key(dir, key);
}

inline std::array<uint8_t, 32> entry_mac(const std::string& key, const FileHeader& h,
                                         const uint8_t* payload, size_t n) {
  std::string msg(reinterpret_cast<const char*>(&h), offsetof(FileHeader, mac));
  msg.append(reinterpret_cast<const char*>(payload), n);
  return hmac_sha256(key.data(), key.size(), msg.data(), msg.size());
}

inline void progress(const CompileOptions& o, int pct, int& shown) {
  if (!o.progress || pct == shown) return;
  static const bool tty = isatty(fileno(stderr)) != 0;
  if (!tty) return;
  shown = pct;
  std::fprintf(stderr, "\rGraph compilation: %3d%%%s", pct, pct >= 100 ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace cdetail

IPUML_INLINE std::string out_of_memory_message(const Plan& p) {
  const auto& m = p.memory;
  std::ostringstream os;
  const auto& w = m.units.at(static_cast<size_t>(m.worst_unit));
  const std::string& unit = p.machine.unit_noun;
  os << "Out of memory on " << unit << " " << m.worst_unit << ": " << w.total()
     << " bytes used but " << unit << "s only have " << m.bytes_per_unit << " bytes of memory";
  os << "\n  " << m.units_over << " of " << m.units.size() << " " << unit << "s are over (target "
     << p.machine.name << ", " << p.machine.device_noun << " "
     << m.worst_unit / p.machine.units_per_device << ")";
  std::vector<size_t> order(m.units.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const size_t top = std::min<size_t>(5, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](size_t a, size_t b) { return m.units[a].total() > m.units[b].total(); });
  os << "\n  top " << unit << "s:";
  for (size_t i = 0; i < top; ++i) {
    const auto& t = m.units[order[i]];
    os << "\n    " << unit << " " << order[i] << ": " << t.total() << " bytes (";
    for (int c = 0; c < kNumCategories; ++c)
      os << (c ? ", " : "") << category_name(p, c) << " " << t.bytes[c];
    os << ")";
  }
  os << "\n  largest tensors on " << unit << " " << m.worst_unit << ":";
  for (auto& x : m.worst_unit_tensors)
    os << "\n    " << x.name << " (" << x.category << "): " << x.bytes << " bytes";
  if (!m.advice.empty()) os << "\n  " << m.advice;
  os << "\n  (allow_out_of_memory finishes the compile and writes the full report)";
  return os.str();
}

IPUML_INLINE MemoryReport combine_memory(const Plan& step, const ir::Graph& ug, const Plan& update,
                                         const std::vector<bool>& shared) {
  const auto& a = step.memory;
  const auto& b = update.memory;
  IPUML_CHECK(a.units.size() == b.units.size() && step.machine.units_per_device > 0,
              "combine_memory: the step and the update were compiled for different systems (",
              a.units.size(), " and ", b.units.size(), " ", step.machine.unit_noun, "s)");
  IPUML_CHECK(shared.size() == ug.states.size(), "combine_memory: ", shared.size(),
              " shared flags for ", ug.states.size(), " states of the update graph");
  MemoryReport m;
  m.bytes_per_unit = a.bytes_per_unit;
  m.units.assign(a.units.size(), UnitMemory{});
  m.replica_sharding_saved_bytes = a.replica_sharding_saved_bytes + b.replica_sharding_saved_bytes;
  const int64_t T = step.machine.units_per_device;
  const int64_t align = std::max<int64_t>(1, step.machine.alignment_bytes);
  for (size_t i = 0; i < m.units.size(); ++i) {
    const auto &x = a.units[i], &y = b.units[i];
    auto& z = m.units[i];
    z.bytes[kState] = x.bytes[kState];
    z.bytes[kStream] = x.bytes[kStream] + y.bytes[kStream];
    z.bytes[kCode] = x.bytes[kCode] + y.bytes[kCode];
    z.bytes[kKernelState] = x.bytes[kKernelState] + y.bytes[kKernelState];
    z.bytes[kReceiveCode] = x.bytes[kReceiveCode] + y.bytes[kReceiveCode];
    z.bytes[kStack] = std::max(x.bytes[kStack], y.bytes[kStack]);
    const int64_t xs = x.bytes[kActivations] + x.bytes[kTemporaries];
    const int64_t ys = y.bytes[kActivations] + y.bytes[kTemporaries];
    const auto& w = ys > xs ? y : x;
    z.bytes[kActivations] = w.bytes[kActivations];
    z.bytes[kTemporaries] = w.bytes[kTemporaries];
    // Program steps of the image: the step's nodes, then the update's.
    z.peak_step = ys > xs && y.peak_step >= 0
                      ? y.peak_step + static_cast<int32_t>(a.not_always_live_per_step.size())
                      : x.peak_step;
  }
  // The update's own states, in its layouts (the same pieces as its plan's accounting).
  for (size_t i = 0; i < ug.states.size(); ++i) {
    const auto v = static_cast<size_t>(ug.states[i]);
    if (shared[i] || ug.values[v].offchip) continue;
    const auto& l = update.values.at(v);
    int64_t acc = 0;
    for (int64_t p = 0; p < l.span.parts; ++p) {
      const int64_t upto = static_cast<int64_t>(static_cast<double>(l.bytes) *
                                                static_cast<double>(l.span.begin(p + 1)) /
                                                static_cast<double>(l.span.extent));
      const int64_t shards = std::max(1, ug.values[v].replica_shards);
      const int64_t bytes = (upto - acc + shards - 1) / shards;
      acc = upto;
      if (bytes <= 0) continue;
      const size_t ti = static_cast<size_t>(l.span.device) * static_cast<size_t>(T) +
                        static_cast<size_t>(l.span.unit(p, T));
      m.units.at(ti).bytes[kState] += (bytes + align - 1) / align * align;
    }
  }
  m.always_live_per_step = a.always_live_per_step;
  m.always_live_per_step.insert(m.always_live_per_step.end(), b.always_live_per_step.begin(),
                                b.always_live_per_step.end());
  m.not_always_live_per_step = a.not_always_live_per_step;
  m.not_always_live_per_step.insert(m.not_always_live_per_step.end(),
                                    b.not_always_live_per_step.begin(),
                                    b.not_always_live_per_step.end());
  for (size_t i = 0; i < m.units.size(); ++i) {
    if (m.units[i].total() > m.bytes_per_unit) ++m.units_over;
    if (m.units[i].total() > m.units[static_cast<size_t>(m.worst_unit)].total())
      m.worst_unit = static_cast<int64_t>(i);
  }
  m.out_of_memory = m.units_over > 0;
  const auto wt = m.worst_unit;
  if (wt == a.worst_unit) m.worst_unit_tensors = a.worst_unit_tensors;
  if (wt == b.worst_unit)
    m.worst_unit_tensors.insert(m.worst_unit_tensors.end(), b.worst_unit_tensors.begin(),
                                b.worst_unit_tensors.end());
  if (m.out_of_memory) {
    const auto& w = m.units[static_cast<size_t>(wt)];
    const auto& s = a.units[static_cast<size_t>(wt)];
    if (!a.out_of_memory)
      m.advice = detail::str(
          "The training step alone fits (", s.total(), " bytes on ", step.machine.unit_noun, " ",
          wt, "); the weight update's optimizer state and code add ", w.total() - s.total(),
          " bytes. Keep the ",
          step.model ? step.model->offchip_state_hint() : "optimizer state off chip",
          ", use a smaller micro-batch, or ",
          step.model ? step.model->more_devices_hint() : "more devices", ".");
    else
      m.advice = a.advice;
  }
  return m;
}

IPUML_INLINE uint64_t plan_key(const ir::Graph& g, const emu::TargetModel& t,
                               const CompileOptions& o) {
  std::ostringstream os;
  os.precision(17);
  os << g.signature() << '|' << t.to_json() << '|' << o.available_memory_proportion << '|'
     << o.allow_out_of_memory << '|' << o.replication_factor << '|' << cdetail::kVersion << '|'
     << dtype_name(o.partials_type);
  for (double p : o.available_memory_proportion_per_device) os << ',' << p;
  const std::string s = os.str();
  return cdetail::fnv1a(s.data(), s.size());
}

IPUML_INLINE std::string plan_cache_path(const std::string& dir, uint64_t key) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  return (std::filesystem::path(dir) / (std::string("ipuml-") + hex + ".plan")).string();
}

IPUML_INLINE std::string resolve_cache_dir(const CompileOptions& o) {
  if (!o.cache_dir.empty()) return o.cache_dir;
  const char* env = std::getenv("IPUML_CACHE_DIR");
  return env ? std::string(env) : std::string();
}

IPUML_INLINE bool save_plan(const Plan& p, const std::string& path) {
  std::string tmp;
  try {
    const auto payload = nlohmann::json::to_cbor(cdetail::plan_to_json(p));
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    std::filesystem::create_directories(dir);
    std::string key;
    if (!cdetail::cache_key(dir.empty() ? "." : dir.string(), true, key)) return false;
    cdetail::FileHeader h{};
    std::memcpy(h.magic, cdetail::kMagic, 8);
    h.version = cdetail::kVersion;
    h.key = p.key;
    h.payload_size = payload.size();
    const auto mac = cdetail::entry_mac(key, h, payload.data(), payload.size());
    std::memcpy(h.mac, mac.data(), mac.size());
    io::remove_stale_temporaries(path, ".tmp");
    tmp = path + ".tmp" + std::to_string(::getpid());
    // A new file of our own (no following a link planted at the temporary's name); on any
    // failure (a full disk) the partial file goes, and the cache simply misses.
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    auto put = [fd](const void* data, size_t n) {
      const auto* c = static_cast<const char*>(data);
      while (n > 0) {
        const ssize_t w = ::write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w;
        n -= static_cast<size_t>(w);
      }
      return true;
    };
    const bool ok = put(&h, sizeof h) && put(payload.data(), payload.size());
    if (::close(fd) != 0 || !ok) {
      ::unlink(tmp.c_str());
      return false;
    }
    std::filesystem::rename(tmp, path);  // readers never see a half-written entry
    return true;
  } catch (const std::exception&) {
    if (!tmp.empty()) ::unlink(tmp.c_str());
    return false;
  }
}

IPUML_INLINE bool load_plan(const std::string& path, uint64_t key, Plan& out) {
  try {
    // Only a regular file, never through a link: a FIFO planted at an entry's name would
    // otherwise block the open forever.
    const auto bytes = io::read_regular_file(
        path, "plan cache", sizeof(cdetail::FileHeader) + (uint64_t{1} << 32), false);
    cdetail::FileHeader h{};
    if (bytes.size() < sizeof h) return false;
    std::memcpy(&h, bytes.data(), sizeof h);
    if (std::memcmp(h.magic, cdetail::kMagic, 8) != 0 || h.version != cdetail::kVersion ||
        h.key != key || h.payload_size != bytes.size() - sizeof h)
      return false;
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    std::string mac_key;
    if (!cdetail::cache_key(dir.empty() ? "." : dir.string(), false, mac_key)) return false;
    const uint8_t* payload = bytes.data() + sizeof h;
    const auto mac = cdetail::entry_mac(mac_key, h, payload, static_cast<size_t>(h.payload_size));
    if (std::memcmp(mac.data(), h.mac, mac.size()) != 0) return false;
    Plan p = cdetail::plan_from_json(
        nlohmann::json::from_cbor(payload, payload + static_cast<size_t>(h.payload_size)));
    if (p.key != key) return false;
    out = std::move(p);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

namespace cdetail {

inline Plan plan_once(const ir::Graph& g, const TargetModelPtr& t, const CompileOptions& o) {
  IPUML_CHECK(t != nullptr, "compile: no target model");
  const emu::Machine& mc = t->machine();
  IPUML_CHECK(mc.devices >= 1 && mc.units_per_device >= 1 && mc.bytes_per_unit > 0 &&
                  mc.clock_hz > 0 && mc.alignment_bytes >= 1 && mc.mesh_columns >= 0,
              "compile: target '", mc.name, "' has ", mc.devices, " device(s) of ",
              mc.units_per_device, " unit(s) of ", mc.bytes_per_unit, " bytes at ", mc.clock_hz,
              " Hz (alignment ", mc.alignment_bytes,
              "); expected at least one device and one unit, positive memory and clock");
  IPUML_CHECK(mc.mesh_columns == 0 || mc.units_per_device % mc.mesh_columns == 0,
              "compile: target '", mc.name, "' lays its ", mc.units_per_device,
              " units in a mesh of ", mc.mesh_columns,
              " columns; expected the columns to divide the units into whole rows");
  IPUML_CHECK(o.available_memory_proportion > 0 && o.available_memory_proportion <= 1, mc.name,
              " compile: available_memory_proportion must be in (0, 1], got ",
              o.available_memory_proportion);
  IPUML_CHECK(o.replication_factor >= 1, mc.name, " compile: replication_factor must be >= 1, got ",
              o.replication_factor);
  for (double p : o.available_memory_proportion_per_device)
    IPUML_CHECK(p >= 0 && p <= 1, mc.name, " compile: every per-", mc.device_noun,
                " available_memory_proportion must be in (0, 1] (0: the global value), got ", p);
  IPUML_CHECK(is_floating(o.partials_type), mc.name,
              " compile: partials_type must be a float type, got ", dtype_name(o.partials_type));
  Planner pl(g, t, o);
  pl.plan.key = plan_key(g, *t, o);
  pl.plan.partials_type = o.partials_type;
  int shown = -1;
  const size_t N = g.nodes.size();
  progress(o, 0, shown);
  for (size_t ni = 0; ni < N; ++ni) {
    pl.plan_node(static_cast<int64_t>(ni));
    progress(o, static_cast<int>(90 * (ni + 1) / std::max<size_t>(N, 1)), shown);
  }
  // States and inputs no op slices go linearly over the units of their first reader's device.
  std::vector<int32_t> first_device(g.values.size(), 0);
  for (size_t ni = N; ni-- > 0;)
    for (auto v : g.nodes[ni].inputs) first_device[static_cast<size_t>(v)] = g.nodes[ni].placement;
  for (auto v : g.states)
    if (!pl.placed[static_cast<size_t>(v)])
      pl.place_linear(v, first_device[static_cast<size_t>(v)]);
  for (auto v : g.inputs)
    if (!pl.placed[static_cast<size_t>(v)])
      pl.place_linear(v, first_device[static_cast<size_t>(v)]);
  pl.account();
  progress(o, 100, shown);
  return std::move(pl.plan);
}

// What would make an out-of-memory plan fit. A lower proportion is only suggested after a
// compile with it fits; otherwise the advice follows what fills the fullest unit.
inline std::string advise(const ir::Graph& g, const TargetModelPtr& t, const CompileOptions& o,
                          const Plan& p) {
  CompileOptions q = o;
  q.progress = false;
  std::string tried;
  for (double f : {0.5, 0.25, 0.1}) {
    q.available_memory_proportion = o.available_memory_proportion * f;
    q.available_memory_proportion_per_device = o.available_memory_proportion_per_device;
    for (auto& x : q.available_memory_proportion_per_device) x *= f;
    if (!plan_once(g, t, q).memory.out_of_memory)
      return detail::str("it fits with available_memory_proportion ", q.available_memory_proportion,
                         " (checked: operations then take less temporary memory and more cycles)");
    tried += detail::str(tried.empty() ? "" : ", ", q.available_memory_proportion);
  }
  const auto& w = p.memory.units.at(static_cast<size_t>(p.memory.worst_unit));
  const int64_t code = w.bytes[kCode] + w.bytes[kKernelState] + w.bytes[kReceiveCode];
  const std::string more = t->more_devices_hint();
  const std::pair<int64_t, std::string> parts[] = {
      {w.bytes[kActivations],
       "activations fill it: a smaller micro-batch, recomputation checkpoints, float16 "
       "activations or " +
           more + " would help"},
      {w.bytes[kState], "parameters and optimizer state fill it: " + more +
                            ", float16 weights or " + t->offchip_state_hint() + " would help"},
      {w.bytes[kTemporaries],
       detail::str(
           "one operation's temporaries fill it (",
           w.peak_step >= 0 ? ir::op_name(g.nodes[static_cast<size_t>(w.peak_step)].kind) : "?",
           " cannot be split further): a smaller micro-batch or float16 would help")},
      {w.bytes[kStream],
       "streamed input buffers fill it: a smaller micro-batch or fewer inputs per step would help"},
      {code, "code and vertex state fill it: fewer operations per " + t->machine().device_noun +
                 " (" + more + ") would help"}};
  const auto* top = &parts[0];
  for (const auto& x : parts)
    if (x.first > top->first) top = &x;
  return top->second +
         detail::str("; a lower available_memory_proportion does not (tried ", tried, ")");
}

}  // namespace cdetail

IPUML_INLINE Plan plan_graph(const ir::Graph& g, const TargetModelPtr& t, const CompileOptions& o) {
  Plan p = cdetail::plan_once(g, t, o);
  if (!p.memory.out_of_memory) return p;
  p.memory.advice = cdetail::advise(g, t, o, p);
  if (!o.allow_out_of_memory) fail(out_of_memory_message(p));
  return p;
}

namespace cdetail {

inline bool same_spec(const SliceSpec& a, const SliceSpec& b) {
  return a.kind == b.kind && a.out_dim == b.out_dim && a.in_dim == b.in_dim &&
         a.extent == b.extent && a.grain == b.grain && a.min_rows == b.min_rows &&
         a.merge_all == b.merge_all && a.matrix == b.matrix;
}

inline bool shape_in_target(const UnitSpan& s, const emu::Machine& t) {
  if (s.width == 0) return s.columns == 0 && t.mesh_columns == 0;
  // A rectangle lies inside the mesh it was placed on; a band of whole rows starts at a row's
  // start and may wrap from the last row to the first.
  const RegionShape r = s.shape();
  if (t.mesh_columns > 0 && s.columns == t.mesh_columns && s.width == s.columns)
    return s.first_unit % s.columns == 0 && r.height <= mesh_rows(t);
  return t.mesh_columns > 0 && s.columns == t.mesh_columns && s.width >= 1 &&
         s.first_unit % s.columns + r.width <= s.columns &&
         s.first_unit / s.columns + r.height <= mesh_rows(t);
}

inline bool span_in_target(const UnitSpan& s, const emu::Machine& t) {
  return s.device >= 0 && s.device < t.devices && s.first_unit >= 0 &&
         s.first_unit < t.units_per_device && s.parts >= 1 && s.grain >= 1 && s.extent >= 1 &&
         shape_in_target(s, t);
}

inline bool finite_non_negative(double x) { return std::isfinite(x) && x >= 0; }

}  // namespace cdetail

IPUML_INLINE bool plan_fits_graph(const ir::Graph& g, const emu::TargetModel& model,
                                  const Plan& p) {
  if (p.nodes.size() != g.nodes.size() || p.values.size() != g.values.size()) return false;
  if (p.target_json != model.to_json() || !(p.machine == model.machine()) ||
      !is_floating(p.partials_type))
    return false;
  const emu::Machine& t = model.machine();
  const auto n_nodes = static_cast<int64_t>(g.nodes.size());
  // Every value's layout lies on this target and covers the value's own extent.
  for (size_t v = 0; v < p.values.size(); ++v) {
    const ValueLayout& l = p.values[v];
    const auto& m = g.values[v].meta;
    const int64_t elems = std::max<int64_t>(1, m.numel());
    if (!cdetail::span_in_target(l.span, t) || l.bytes < 0 ||
        l.bytes > static_cast<int64_t>(m.nbytes()))
      return false;
    if (l.axis >= 0 ? (static_cast<size_t>(l.axis) >= m.shape.size() ||
                       l.span.extent != m.shape[static_cast<size_t>(l.axis)])
                    : (l.axis < cdetail::kBlockedAxis || l.span.extent > elems))
      return false;
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const auto& np = p.nodes[i];
    const auto& n = g.nodes[i];
    if (static_cast<int>(np.spec.kind) > static_cast<int>(SplitKind::Grid)) return false;
    if (np.span.parts < 1 || np.span.device < 0 || np.span.device >= t.devices ||
        np.span.first_unit < 0 || np.span.first_unit >= t.units_per_device ||
        !cdetail::shape_in_target(np.span, t))
      return false;
    if (np.follows < -1 || np.follows >= static_cast<int32_t>(n.inputs.size())) return false;
    if (np.serial < 1 || np.serial > (1 << 20)) return false;
    if ((np.spec.kind == SplitKind::Grid) != plans_as_grid(g, n)) return false;
    if (np.spec.kind != SplitKind::Grid) {
      // A split the planner offers for this op (kind, dims, extent, grain), over a span with
      // that extent and grain, or exactly the layout of the input it follows.
      bool offered = false;
      for (const SliceSpec& c : split_candidates(g, n))
        offered = offered || cdetail::same_spec(c, np.spec);
      if (!offered || !cdetail::span_in_target(np.span, t)) return false;
      if (np.follows >= 0) {
        const auto v = static_cast<size_t>(n.inputs[static_cast<size_t>(np.follows)]);
        if (!(np.span == p.values[v].span)) return false;
      } else {
        const bool whole = np.spec.kind == SplitKind::Whole;
        if (np.span.extent != (whole ? 1 : np.spec.extent) ||
            np.span.grain != (whole ? 1 : np.spec.grain) ||
            np.span.parts > (whole ? 1 : max_parts(np.spec)))
          return false;
      }
      continue;
    }
    const auto& gr = np.grid;
    const MatrixProblem mp = matrix_problem(g, n);
    if (gr.pb < 1 || gr.pm < 1 || gr.pn < 1 || gr.pk < 1 || gr.sk < 1 ||
        gr.units() > t.units_per_device || gr.k_slices() > 2 * mp.k || np.spec.extent != mp.k ||
        np.spec.in_dim != mp.k_dim || np.reduce_units < 0 || np.reduce_units > t.units_per_device ||
        np.resident > 3)
      return false;
  }
  // What reports index with: steps, units and devices in range, figures finite.
  for (const auto& s : p.supersteps)
    if (s.node < -2 || s.node >= n_nodes || s.device < 0 || s.device >= t.devices ||
        !cdetail::finite_non_negative(s.compute) || !cdetail::finite_non_negative(s.exchange) ||
        !cdetail::finite_non_negative(s.sync))
      return false;
  const auto& m = p.memory;
  if (m.units.size() != static_cast<size_t>(t.devices) * static_cast<size_t>(t.units_per_device) ||
      m.worst_unit < 0 || m.worst_unit >= static_cast<int64_t>(m.units.size()) ||
      m.always_live_per_step.size() != m.not_always_live_per_step.size() ||
      m.always_live_per_step.size() > g.nodes.size() || m.units_over < 0 ||
      m.units_over > static_cast<int64_t>(m.units.size()))
    return false;
  for (const auto& tm : m.units) {
    if (tm.peak_step < -1 || tm.peak_step >= n_nodes) return false;
    for (auto b : tm.bytes)
      if (b < 0) return false;
  }
  if (p.cycles.per_device.size() != static_cast<size_t>(t.devices) ||
      !cdetail::finite_non_negative(p.cycles.total))
    return false;
  return true;
}

IPUML_INLINE Plan compile_plan(const ir::Graph& g, const TargetModelPtr& t,
                               const CompileOptions& o) {
  const std::string dir = resolve_cache_dir(o);
  if (dir.empty()) return plan_graph(g, t, o);
  IPUML_CHECK(t != nullptr, "compile: no target model");
  const uint64_t key = plan_key(g, *t, o);
  const std::string path = plan_cache_path(dir, key);
  Plan p;
  // A cached plan whose partitions do not fit this graph (a forged or stale entry whose
  // checksum still holds) is recompiled, never run.
  if (load_plan(path, key, p) && plan_fits_graph(g, *t, p)) {
    p.model = t;
    p.from_cache = true;
    return p;
  }
  p = plan_graph(g, t, o);
  save_plan(p, path);
  return p;
}

}  // namespace ipuml::emu
