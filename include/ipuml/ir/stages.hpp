// Pipeline stages of a traced step (PopTorch's pipelined execution): the forward pass is cut
// where placement changes IPU, the backward pass likewise, the last forward stage shares its
// stage with the first backward one, and the update of each parameter joins the last stage
// of its IPU. The nodes are then reordered by stage (stable), so a stage reads only what its
// own or an earlier stage produced and runs a contiguous part of the program; a model over N
// IPUs placed in order gets PopTorch's 2N - 1 training stages.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <ipuml/ir/graph.hpp>

namespace ipuml::ir {

struct StageInfo {
  int count = 1;
  std::vector<int> ipu_of_stage;  // the IPU a stage runs on (its first node's)
};

// Nodes [0, backward_begin) are the forward pass and loss, [backward_begin, update_begin) the
// backward pass (recomputed values included), the rest the gradient accumulation or update.
// Inference: backward_begin = update_begin = the node count.
inline StageInfo assign_pipeline_stages(Graph& g, size_t backward_begin, size_t update_begin) {
  StageInfo info;
  info.ipu_of_stage.clear();
  const size_t N = g.nodes.size();
  backward_begin = std::min(backward_begin, N);
  update_begin = std::clamp(update_begin, backward_begin, N);
  int stage = -1, ipu = -1;
  for (size_t n = 0; n < update_begin; ++n) {
    auto& node = g.nodes[n];
    if (node.placement != ipu) {
      ipu = node.placement;
      ++stage;
      info.ipu_of_stage.push_back(ipu);
    }
    node.stage = stage;
  }
  if (stage < 0) {  // an update graph without a step: one stage
    stage = 0;
    info.ipu_of_stage.push_back(N > 0 ? g.nodes[0].placement : 0);
  }
  // The update of a parameter runs in the last stage of its IPU, and never before the stages
  // producing what it reads.
  std::vector<int> producer_stage(g.values.size(), 0);
  for (size_t n = 0; n < update_begin; ++n)
    for (auto v : g.nodes[n].outputs) producer_stage[static_cast<size_t>(v)] = g.nodes[n].stage;
  for (size_t n = update_begin; n < N; ++n) {
    auto& node = g.nodes[n];
    int s = -1;
    for (int k = stage; k >= 0 && s < 0; --k)
      if (info.ipu_of_stage[static_cast<size_t>(k)] == node.placement) s = k;
    if (s < 0) s = stage;
    for (auto v : node.inputs) s = std::max(s, producer_stage[static_cast<size_t>(v)]);
    node.stage = s;
    for (auto v : node.outputs) producer_stage[static_cast<size_t>(v)] = s;
  }
  info.count = stage + 1;
  // Program order becomes stage order (stable, so still topological: a node's producers are
  // in its stage or an earlier one). A stage then runs a contiguous range of the program, and
  // the liveness a memory plan derives from program order holds in a pipelined run too.
  std::vector<size_t> order(N);
  for (size_t n = 0; n < N; ++n) order[n] = n;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return g.nodes[a].stage < g.nodes[b].stage; });
  std::vector<Node> nodes;
  nodes.reserve(N);
  std::vector<int64_t> new_index(N);
  for (size_t i = 0; i < N; ++i) {
    new_index[order[i]] = static_cast<int64_t>(i);
    nodes.push_back(std::move(g.nodes[order[i]]));
  }
  g.nodes = std::move(nodes);
  for (auto& v : g.values)
    if (v.node >= 0) v.node = new_index[static_cast<size_t>(v.node)];
  return info;
}

// The number of stages nodes carry (1 where none were assigned).
inline int stage_count(const Graph& g) {
  int s = 0;
  for (auto& n : g.nodes) s = std::max(s, n.stage + 1);
  return std::max(s, 1);
}

}  // namespace ipuml::ir
