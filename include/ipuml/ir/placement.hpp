// Placement of a traced step's weight update: each parameter's update, optimizer state and
// gradient run on the IPU that holds the parameter, as PopTorch places them per stage.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include <ipuml/ir/graph.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml::ir {

// For each value: the IPU of the first node in [0, end) that reads it if it is a State, else -1.
inline std::vector<int> state_homes(const Graph& g, size_t end) {
  std::vector<int> home(g.values.size(), -1);
  for (size_t n = 0; n < end && n < g.nodes.size(); ++n)
    for (auto v : g.nodes[n].inputs)
      if (g.values[static_cast<size_t>(v)].kind == ValueKind::State &&
          home[static_cast<size_t>(v)] < 0)
        home[static_cast<size_t>(v)] = g.nodes[n].placement;
  return home;
}

// Re-places nodes [begin, end of graph) by data flow. A node that reads a State with a known
// home runs on that IPU (the parameter's); otherwise it follows the producer of its first op
// input (the gradient's IPU, where backward computed it). Nodes with neither (constants such as
// a learning-rate scalar) go to the IPU of their first reader, so nothing crosses the IPU-Links
// only to fetch a constant. `home` is updated with the homes of states first read here.
inline void place_update(Graph& g, size_t begin, std::vector<int>& home) {
  const size_t N = g.nodes.size();
  std::vector<bool> decided(N, false);
  for (size_t n = begin; n < N; ++n) {
    auto& node = g.nodes[n];
    int ipu = -1;
    for (auto v : node.inputs)
      if (g.values[static_cast<size_t>(v)].kind == ValueKind::State &&
          home[static_cast<size_t>(v)] >= 0) {
        ipu = home[static_cast<size_t>(v)];
        break;
      }
    if (ipu < 0)
      for (auto v : node.inputs) {
        const auto& val = g.values[static_cast<size_t>(v)];
        if (val.kind == ValueKind::Op &&
            (static_cast<size_t>(val.node) < begin || decided[static_cast<size_t>(val.node)])) {
          ipu = g.nodes[static_cast<size_t>(val.node)].placement;
          break;
        }
      }
    if (ipu < 0) continue;
    node.placement = ipu;
    decided[n] = true;
    for (auto v : node.inputs)
      if (g.values[static_cast<size_t>(v)].kind == ValueKind::State &&
          home[static_cast<size_t>(v)] < 0)
        home[static_cast<size_t>(v)] = ipu;
  }
  // Constants and what depends only on them: where they are first read.
  for (size_t n = N; n-- > begin;) {
    if (decided[n]) continue;
    for (size_t r = n + 1; r < N; ++r) {
      const auto& in = g.nodes[r].inputs;
      bool reads = false;
      for (auto o : g.nodes[n].outputs)
        reads = reads || std::find(in.begin(), in.end(), o) != in.end();
      if (reads) {
        g.nodes[n].placement = g.nodes[r].placement;
        break;
      }
    }
    decided[n] = true;
  }
}

// Keeps the state values bound to `tensors` in streaming memory (PopTorch's
// TensorLocationSettings().useOnChipStorage(false), train_gpt2.py's optimizer_state_offchip).
// `bound` are the tensors the graph's states are bound to (a Trace's `states`).
inline void place_off_chip(Graph& g, const std::vector<Tensor>& bound,
                           const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < g.states.size() && i < bound.size(); ++i)
    for (const auto& t : tensors)
      if (bound[i].same(t)) {
        g.values[static_cast<size_t>(g.states[i])].offchip = true;
        break;
      }
}

// Shards the state values bound to `tensors` over `replicas` replicas (PopTorch's
// TensorLocationSettings().useReplicatedTensorSharding(true) for optimizer state): each replica
// holds and updates 1/replicas of each, so the emulator accounts that share per IPU.
inline void shard_across_replicas(Graph& g, const std::vector<Tensor>& bound,
                                  const std::vector<Tensor>& tensors, int64_t replicas) {
  for (size_t i = 0; i < g.states.size() && i < bound.size(); ++i)
    for (const auto& t : tensors)
      if (bound[i].same(t)) {
        g.values[static_cast<size_t>(g.states[i])].replica_shards = static_cast<int32_t>(replicas);
        break;
      }
}

}  // namespace ipuml::ir
