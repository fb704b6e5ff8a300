// Bodies of the pipelined layout (compiled once in src/lib/cerebras_backend.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include <ipuml/backends/cerebras/layer_pipeline.hpp>
#include <ipuml/backends/emu/node_roles.hpp>
#include <ipuml/core/error.hpp>

namespace ipuml::cerebras {

namespace lpdetail {

using emu::bytes_text;
using emu::matrix_like;

// The message of a layout that does not fit: how much, the largest regions, what would help.
inline std::string not_fit_message(const PipelineLayout& l, const Target& t) {
  const auto& ks = l.kernels;
  const int64_t samples = l.samples;
  std::vector<size_t> order(ks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return ks[a].min_pes > ks[b].min_pes; });
  std::ostringstream os;
  os << "pipelined execution does not fit the " << t.name << " wafer: its " << ks.size()
     << " layer regions need " << l.pes_needed << " PEs (" << bytes_text(l.state_bytes)
     << " of weights, optimizer state and gradients, " << bytes_text(l.activation_bytes)
     << " of activations in flight for a batch of " << samples << "), the wafer has " << l.pes_total
     << " PEs of " << t.bytes_per_pe / 1024 << " KiB (" << bytes_text(t.wafer_bytes())
     << "); the largest:";
  for (size_t i = 0; i < std::min<size_t>(3, order.size()); ++i) {
    const auto& k = ks[order[i]];
    os << (i ? "," : "") << " layer " << order[i] << " (" << k.label << ", node " << k.first_node
       << ") " << k.min_pes << " PEs";
  }
  os << ". Weight streaming (execution_strategy weight_streaming) keeps the weights in MemoryX"
     << (l.activation_bytes > l.state_bytes ? "; a smaller batch would hold fewer activations"
                                            : "");
  return os.str();
}

// Sizes the regions of a layout that fits, and its time (see plan_layer_pipeline).
inline void size_regions(PipelineLayout& l, const Target& t) {
  auto& ks = l.kernels;
  const int64_t samples = l.samples;
  // Region sizes: the smallest per-sample time tau for which every region, given the PEs its
  // work and its fabric traffic need at tau (and at least its memory's), fits on the wafer.
  const double link = t.link_bytes_per_cycle;
  auto pes_for = [&](const PipelineKernel& k, double tau) {
    const double by_work = std::ceil(k.work_cycles / tau);
    const double edge = k.fabric_bytes / (2.0 * link * tau);  // PEs on a side the data enters
    return std::max({static_cast<double>(k.min_pes), by_work, std::ceil(edge * edge)});
  };
  auto total = [&](double tau) {
    double s = 0;
    for (auto& k : ks) s += pes_for(k, tau);
    return s;
  };
  double lo = 1e-9, hi = 1.0;
  while (total(hi) > static_cast<double>(l.pes_total)) hi *= 2;
  for (int it = 0; it < 200 && hi - lo > 1e-9 * hi; ++it) {
    const double mid = std::sqrt(lo * hi);
    (total(mid) > static_cast<double>(l.pes_total) ? lo : hi) = mid;
  }
  for (size_t i = 0; i < ks.size(); ++i) {
    auto& k = ks[i];
    k.pes = static_cast<int64_t>(pes_for(k, hi));
    k.width = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(k.pes))));
    k.height = (k.pes + k.width - 1) / k.width;
    const double p = static_cast<double>(k.pes);
    k.cycles_per_sample =
        std::max(k.work_cycles / p, k.fabric_bytes / (static_cast<double>(k.width) * 2.0 * link));
    l.pes_used += k.pes;
    if (l.slowest < 0 || k.cycles_per_sample > ks[static_cast<size_t>(l.slowest)].cycles_per_sample)
      l.slowest = static_cast<int64_t>(i);
    l.fill_cycles += k.cycles_per_sample + static_cast<double>(k.width + k.height) * t.hop_cycles +
                     2.0 * t.ramp_cycles + static_cast<double>(t.kernel_launch_cycles);
    l.update_cycles = std::max(l.update_cycles, k.update_cycles / p);
  }
  l.sample_cycles = ks[static_cast<size_t>(l.slowest)].cycles_per_sample;
  l.step_cycles =
      static_cast<double>(samples) * l.sample_cycles + l.fill_cycles + std::ceil(l.update_cycles);
}

// What each region keeps: an activation read by a later region waits there for as many
// samples as regions lie between (each holds one sample), at most the batch; a value read by an
// earlier region (a weight's gradient, summed over the batch, going back to the region that
// updates the weight) is kept whole; what arrives from another region crosses the fabric.
inline void region_bytes(PipelineLayout& l, const ir::Graph& g,
                         const std::vector<int64_t>& kernel_of_node,
                         const std::vector<int64_t>& kernel_of_value) {
  auto& ks = l.kernels;
  const size_t V = g.values.size();
  const double per_sample = 1.0 / static_cast<double>(l.samples);
  std::vector<int64_t> last_reader(V, -1);
  for (size_t ni = 0; ni < g.nodes.size(); ++ni)
    for (auto v : g.nodes[ni].inputs) {
      const int64_t k = kernel_of_node[ni];
      if (k < 0) continue;
      const auto vu = static_cast<size_t>(v);
      last_reader[vu] = std::max(last_reader[vu], k);
      const int64_t from = kernel_of_value[vu];
      if (g.values[vu].kind == ir::ValueKind::Op && from >= 0 && from < k)
        ks[static_cast<size_t>(k)].fabric_bytes +=
            static_cast<double>(g.values[vu].meta.nbytes()) * per_sample;
      if (g.values[vu].kind == ir::ValueKind::Op && from > k)
        ks[static_cast<size_t>(k)].state_bytes += static_cast<double>(g.values[vu].meta.nbytes());
    }
  for (size_t v = 0; v < V; ++v) {
    if (g.values[v].kind != ir::ValueKind::Op || kernel_of_value[v] < 0) continue;
    const double b = static_cast<double>(g.values[v].meta.nbytes()) * per_sample;
    const int64_t span = std::max<int64_t>(1, last_reader[v] - kernel_of_value[v]);
    ks[static_cast<size_t>(kernel_of_value[v])].activation_bytes +=
        b * static_cast<double>(std::min(l.samples, span));
  }
}

// Each region's fewest PEs: its bytes (and its share of `extra_state_bytes`, spread as the
// weights are) over what a PE holds beside its code and stack; the layout's totals, and each
// region's label with the count of ops it holds.
inline void region_memory(PipelineLayout& l, const ir::Graph& g, const Target& t,
                          double extra_state_bytes) {
  auto& ks = l.kernels;
  double weights = 0;
  for (auto& k : ks) weights += k.state_bytes;
  const double usable = static_cast<double>(t.bytes_per_pe - t.stack_bytes_per_pe);
  for (auto& k : ks) {
    if (extra_state_bytes > 0 && weights > 0)
      k.state_bytes += extra_state_bytes * k.state_bytes / weights;
    const double code = static_cast<double>(
        matrix_like(g.nodes[static_cast<size_t>(k.first_node)].kind) ? t.code_bytes_matrix
                                                                     : t.code_bytes_vector);
    IPUML_CHECK(usable > code, "target ", t.name, ": a PE's ", t.bytes_per_pe,
                " B hold no data beside its code and stack");
    k.min_pes = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil((k.state_bytes + k.activation_bytes) / (usable - code))));
    l.pes_needed += k.min_pes;
    l.state_bytes += k.state_bytes;
    l.activation_bytes += k.activation_bytes;
    if (k.nodes > 1) k.label += " +" + std::to_string(k.nodes - 1);
  }
}

}  // namespace lpdetail

IPUML_INLINE PipelineLayout plan_layer_pipeline(const ir::Graph& g, const Target& t,
                                                int64_t samples, double extra_state_bytes) {
  using namespace lpdetail;
  IPUML_CHECK(samples >= 1, "cerebras: a pipelined step needs at least one sample, got ", samples);
  PipelineLayout l;
  l.samples = samples;
  l.pes_total = t.pes();
  const double per_sample = 1.0 / static_cast<double>(samples);
  const double sram = t.sram_read_bytes_per_cycle + t.sram_write_bytes_per_cycle;
  const size_t V = g.values.size();
  std::vector<int64_t> kernel_of_value(V, -1), owner(V, -1);
  std::vector<int64_t> kernel_of_node(g.nodes.size(), -1);
  auto& ks = l.kernels;

  // Kernels: each matrix op starts one; the ops after it join it. A fused optimizer update runs
  // in the region that holds the weight it updates (its first input's owner).
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const ir::Node& n = g.nodes[ni];
    if (emu::idle_node(g, n)) {
      for (auto v : n.outputs)  // a view lives where its input does
        kernel_of_value[static_cast<size_t>(v)] =
            n.inputs.empty() ? -1 : kernel_of_value[static_cast<size_t>(n.inputs[0])];
      continue;
    }
    const bool update = ir::op_category(n.kind) == ir::OpCategory::Update;
    int64_t k = -1;
    if (update && !n.inputs.empty() && owner[static_cast<size_t>(n.inputs[0])] >= 0) {
      k = owner[static_cast<size_t>(n.inputs[0])];
    } else if (ks.empty() || (matrix_like(n.kind) && !update)) {
      PipelineKernel pk;
      pk.label = ir::op_name(n.kind);
      pk.first_node = static_cast<int64_t>(ni);
      ks.push_back(pk);
      k = static_cast<int64_t>(ks.size()) - 1;
    } else {
      k = static_cast<int64_t>(ks.size()) - 1;
    }
    kernel_of_node[ni] = k;
    PipelineKernel& pk = ks[static_cast<size_t>(k)];
    ++pk.nodes;
    std::vector<ir::TensorMeta> ins, outs;
    double bytes = 0;
    for (auto v : n.inputs) {
      const auto vu = static_cast<size_t>(v);
      ins.push_back(g.values[vu].meta);
      bytes += static_cast<double>(g.values[vu].meta.nbytes());
      if (g.values[vu].kind == ir::ValueKind::State && owner[vu] < 0) {
        owner[vu] = k;
        pk.state_bytes += static_cast<double>(g.values[vu].meta.nbytes());
      }
    }
    for (auto v : n.outputs) {
      outs.push_back(g.values[static_cast<size_t>(v)].meta);
      bytes += static_cast<double>(g.values[static_cast<size_t>(v)].meta.nbytes());
      kernel_of_value[static_cast<size_t>(v)] = k;
    }
    const double flops = ir::op_flops(n.kind, n.attrs, ins, outs);
    const bool half = !outs.empty() && is_half(outs[0].dtype);
    const double rate = matrix_like(n.kind)
                            ? (half ? t.flops_per_cycle_fp16 : t.flops_per_cycle_fp32)
                            : (half ? t.vector_ops_per_cycle_fp16 : t.vector_ops_per_cycle_fp32);
    const double work = std::max(flops / rate, bytes / sram);
    pk.flops += flops;
    l.flops += flops;
    if (update)
      pk.update_cycles += work;
    else
      pk.work_cycles += work * per_sample;
  }
  if (ks.empty()) {  // only views and constants: nothing runs on the wafer
    l.fits = true;
    return l;
  }

  region_bytes(l, g, kernel_of_node, kernel_of_value);
  region_memory(l, g, t, extra_state_bytes);
  if (l.pes_needed > l.pes_total) {
    l.message = lpdetail::not_fit_message(l, t);
    return l;
  }
  l.fits = true;
  lpdetail::size_regions(l, t);
  return l;
}

IPUML_INLINE std::string describe(const PipelineLayout& l, const Target& t, size_t max_rows) {
  std::ostringstream os;
  if (!l.fits) return l.message;
  os << "Pipelined layout on " << t.name << ": " << l.kernels.size() << " layer regions on "
     << l.pes_used << " of " << l.pes_total << " PEs (" << std::fixed << std::setprecision(1)
     << 100.0 * static_cast<double>(l.pes_used) / static_cast<double>(l.pes_total) << " %), "
     << lpdetail::bytes_text(l.state_bytes) << " of weights and optimizer state, "
     << lpdetail::bytes_text(l.activation_bytes) << " of activations in flight\n";
  std::vector<size_t> order(l.kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return l.kernels[a].cycles_per_sample > l.kernels[b].cycles_per_sample;
  });
  os << "  region  op                          PEs   (w x h)      cycles/sample  memory/PE\n";
  for (size_t r = 0; r < std::min(max_rows, order.size()); ++r) {
    const auto& k = l.kernels[order[r]];
    const double mem = (k.state_bytes + k.activation_bytes) / static_cast<double>(k.pes);
    std::string label = k.label.substr(0, 26);
    os << "  " << std::setw(6) << order[r] << "  " << std::left << std::setw(26) << label
       << std::right << std::setw(8) << k.pes << " (" << k.width << " x " << k.height << ")"
       << std::setw(12) << std::setprecision(1) << k.cycles_per_sample << std::setw(11)
       << std::setprecision(0) << mem << " B"
       << (static_cast<int64_t>(order[r]) == l.slowest ? "  <- slowest" : "") << "\n";
  }
  if (order.size() > max_rows) os << "  ... " << order.size() - max_rows << " more regions\n";
  return os.str();
}

}  // namespace ipuml::cerebras
