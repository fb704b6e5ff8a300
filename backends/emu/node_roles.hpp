// What a node of a step is to a dataflow target's layout (the CS-2's layer regions, the RDU's
// sections): a matrix op that anchors a kernel, or an op that does no work of its own on the
// units. Shared by the targets that lay a graph out spatially.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>

#include <ipuml/ir/graph.hpp>

namespace ipuml::emu {

// Matrix products, convolutions and fused attention: the ops a dataflow kernel is built around.
inline bool matrix_like(ir::OpKind k) {
  return ir::op_in(k, ir::OpCategory::Matrix, ir::OpCategory::Attention);
}

// Ops that do no work of their own on the units: views (routes over the data) and the small
// constants a step computes with.
inline bool idle_node(const ir::Graph& g, const ir::Node& n) {
  if (ir::op_category(n.kind) == ir::OpCategory::View) return true;
  return n.kind == ir::OpKind::Full && n.inputs.empty() && n.outputs.size() == 1 &&
         g.values[static_cast<size_t>(n.outputs[0])].meta.numel() <= 16;
}

// The batch a step runs: the first dimension of its first input (1 without inputs).
inline int64_t batch_of(const ir::Graph& g) {
  if (g.inputs.empty()) return 1;
  const auto& shape = g.values[static_cast<size_t>(g.inputs[0])].meta.shape;
  return shape.empty() ? 1 : std::max<int64_t>(1, shape[0]);
}

// "1.5 GB", "12.0 MB", "3.2 kB" (decimal units) for messages and layout tables.
inline std::string bytes_text(double b) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(b >= 1e9 ? 2 : 1);
  if (b >= 1e9)
    os << b / 1e9 << " GB";
  else if (b >= 1e6)
    os << b / 1e6 << " MB";
  else
    os << b / 1e3 << " kB";
  return os.str();
}

}  // namespace ipuml::emu
