// Recomputation from checkpoints (PopTorch's recomputationCheckpoint): a traced training step's
// backward pass reads forward activations; this rewrite makes it read only checkpoints, inputs
// and state, and recompute every other forward value it needs just before its first backward
// use. Forward values then die at the end of the forward pass, so the liveness model (and the
// executors) hold one segment's activations at a time instead of all of them. Random ops are
// recomputed with their own seed and stream, so dropout masks repeat bit for bit and results
// equal the step without recomputation exactly.
#pragma once

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <vector>

#include <ipuml/ir/graph.hpp>

namespace ipuml::ir {

struct RecomputeReport {
  int64_t nodes_recomputed = 0;
  int64_t values_kept = 0;  // checkpoints the backward pass reads
};

// Nodes [0, backward_begin) are the forward pass (and loss), [backward_begin, backward_end) the
// backward pass, whose reads are rewritten; later nodes (the update, outputs) are kept as they
// are. Without checkpoints the graph is left as it is.
inline RecomputeReport recompute_from_checkpoints(Graph& g, size_t backward_begin,
                                                  size_t backward_end) {
  RecomputeReport rep;
  backward_end = std::min(backward_end, g.nodes.size());
  if (g.checkpoints.empty() || backward_begin >= backward_end) return rep;
  const size_t nb = backward_begin;
  auto forward = [&](int64_t v) {
    const auto& val = g.values[static_cast<size_t>(v)];
    return val.kind == ValueKind::Op && val.node >= 0 && static_cast<size_t>(val.node) < nb;
  };
  std::vector<char> kept(g.values.size(), 0);
  for (auto v : g.checkpoints) kept[static_cast<size_t>(v)] = 1;
  for (auto v : g.outputs) kept[static_cast<size_t>(v)] = 1;  // live to the end anyway
  for (auto& u : g.updates) kept[static_cast<size_t>(u.value)] = 1;

  std::vector<Node> nodes(g.nodes.begin(), g.nodes.begin() + static_cast<std::ptrdiff_t>(nb));
  std::unordered_map<int64_t, int64_t> recomputed;  // forward value -> its recomputed copy
  std::vector<char> counted(g.values.size(), 0);
  std::function<int64_t(int64_t)> need = [&](int64_t v) -> int64_t {
    if (!forward(v)) return v;
    if (kept[static_cast<size_t>(v)]) {
      if (!counted[static_cast<size_t>(v)]) ++rep.values_kept;
      counted[static_cast<size_t>(v)] = 1;
      return v;
    }
    if (auto it = recomputed.find(v); it != recomputed.end()) return it->second;
    Node copy = g.nodes[static_cast<size_t>(g.values[static_cast<size_t>(v)].node)];
    for (auto& in : copy.inputs) in = need(in);
    for (size_t o = 0; o < copy.outputs.size(); ++o) {
      Value nv = g.values[static_cast<size_t>(copy.outputs[o])];
      nv.node = static_cast<int64_t>(nodes.size());
      nv.name.clear();
      const int64_t id = g.add_value(std::move(nv));
      recomputed[copy.outputs[o]] = id;
      copy.outputs[o] = id;
    }
    nodes.push_back(std::move(copy));
    ++rep.nodes_recomputed;
    return recomputed.at(v);
  };
  for (size_t n = nb; n < g.nodes.size(); ++n) {
    Node node = g.nodes[n];
    if (n < backward_end)
      for (auto& in : node.inputs) in = need(in);
    for (auto o : node.outputs)
      g.values[static_cast<size_t>(o)].node = static_cast<int64_t>(nodes.size());
    nodes.push_back(std::move(node));
  }
  g.nodes = std::move(nodes);
  return rep;
}

}  // namespace ipuml::ir
