// ir::Graph: one captured step (forward, loss, backward, update) as ops over SSA values.
// Values are streamed inputs, state (parameters, buffers, optimizer state) or op results.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ipuml/ir/attrs.hpp>
#include <ipuml/ir/op_catalogue.hpp>
#include <ipuml/ir/op_kind.hpp>

namespace ipuml::ir {

enum class ValueKind : uint8_t { Input, State, Op };

struct Value {
  TensorMeta meta;
  ValueKind kind = ValueKind::Op;
  int64_t node = -1;  // producer (Op values)
  int output = 0;
  std::string name;  // inputs and named state
  // A state kept in streaming memory (off-chip DRAM): on the tiles only while ops read it.
  bool offchip = false;
  // Replicated tensor sharding: each of this many replicas holds 1/replica_shards of the state
  // (and updates only that share), as PopTorch's useReplicatedTensorSharding places optimizer
  // state. 1: every replica holds all of it.
  int32_t replica_shards = 1;
};

struct Node {
  OpKind kind;
  Attrs attrs;
  std::vector<int64_t> inputs;
  std::vector<int64_t> outputs;
  // Which device of a model-parallel (sharded/pipelined) program runs it: for the IPU backend,
  // the IPU within a replica (PopTorch's BeginBlock ipu_id).
  int placement = 0;
  // The share of tile memory its temporaries may use (PopTorch's per-op
  // set_available_memory); 0: the program's setting.
  double available_memory_proportion = 0;
  // Its pipeline stage (ir/stages.hpp): stages run concurrently on different micro-batches in
  // a pipelined program; -1 where no stages were assigned (one stage).
  int stage = -1;
};

struct StateUpdate {
  int64_t state;  // a State value
  int64_t value;  // its new value at the end of the step
};

class Graph {
 public:
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int64_t> inputs;   // Input values, in the order they are fed
  std::vector<int64_t> states;   // State values, in the order they are bound
  std::vector<int64_t> outputs;  // values returned by a run
  std::vector<StateUpdate> updates;
  // Values marked by recomputation_checkpoint() while tracing: the activations a training step
  // keeps for its backward pass when recomputation is applied (ir/recompute.hpp).
  std::vector<int64_t> checkpoints;

  int64_t add_value(Value v) {
    values.push_back(std::move(v));
    return static_cast<int64_t>(values.size()) - 1;
  }
  const TensorMeta& meta(int64_t v) const { return values.at(v).meta; }

  // For each value, the index of the last node that reads it (-1 if none); outputs and
  // update sources live to the end.
  std::vector<int64_t> last_use() const {
    std::vector<int64_t> last(values.size(), -1);
    for (size_t n = 0; n < nodes.size(); ++n)
      for (auto v : nodes[n].inputs) last[v] = static_cast<int64_t>(n);
    const auto end = static_cast<int64_t>(nodes.size());
    for (auto v : outputs) last[v] = end;
    for (auto& u : updates) last[u.value] = end;
    return last;
  }

  // A stable key over structure, shapes, dtypes and attributes (for the compiled-plan cache).
  std::string signature() const {
    std::string s;
    auto meta_str = [](const TensorMeta& m) {
      return std::string(dtype_name(m.dtype)) + shape_str(m.shape);
    };
    for (auto v : inputs) s += "in:" + meta_str(values[v].meta) + ";";
    for (auto v : states)
      s += "st:" + meta_str(values[v].meta) + (values[v].offchip ? "@off" : "") +
           (values[v].replica_shards > 1 ? "@rts" + std::to_string(values[v].replica_shards) : "") +
           ";";
    for (auto& n : nodes) {
      s += op_name(n.kind);
      s += '(';
      for (auto v : n.inputs) s += std::to_string(v) + ',';
      s += ")->";
      for (auto v : n.outputs) s += std::to_string(v) + ':' + meta_str(values[v].meta) + ',';
      s += '{' + n.attrs.key() + "}@" + std::to_string(n.placement);
      if (n.available_memory_proportion > 0) {
        // Appended apart: `"%" + std::string` draws GCC 12's -Wrestrict false positive at -O3.
        s += '%';
        s += std::to_string(n.available_memory_proportion);
      }
      s += ";";
    }
    s += "out:";
    for (auto v : outputs) s += std::to_string(v) + ',';
    s += "upd:";
    for (auto& u : updates) s += std::to_string(u.state) + '=' + std::to_string(u.value) + ',';
    return s;
  }

  size_t hash() const { return std::hash<std::string>{}(signature()); }
};

}  // namespace ipuml::ir
