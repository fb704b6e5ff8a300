// Bodies of the CPU graph executor and its memory planner.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <map>
#include <numeric>

#include <ipuml/backends/cpu/graph_executor.hpp>
#include <ipuml/backends/cpu/op_profile.hpp>

namespace ipuml::cpu {

namespace detail {

inline bool fusion_enabled() {
  const char* env = std::getenv("IPUML_CPU_FUSION");
  return env == nullptr || std::string(env) != "0";
}

// runs_at for no fusion: every node runs by itself (0, 1, 2, ...).
inline std::vector<int64_t> each_node_itself(size_t nodes) {
  std::vector<int64_t> at(nodes);
  std::iota(at.begin(), at.end(), int64_t(0));
  return at;
}

// What decides whether a batch norm can run as its convolution's epilogue.
struct FusionCandidates {
  const ir::Graph& g;
  std::vector<int> readers;
  // Values read after the step: outputs and update sources (an update may be computed in its
  // state's own buffer, which the fused op must not write early).
  std::vector<bool> output, update;

  explicit FusionCandidates(const ir::Graph& graph)
      : g(graph),
        readers(graph.values.size(), 0),
        output(graph.values.size(), false),
        update(graph.values.size(), false) {
    for (const auto& node : g.nodes)
      for (auto v : node.inputs) ++readers[v];
    for (auto v : g.outputs) output[v] = true;
    for (const auto& u : g.updates) update[u.value] = true;
  }
  // Whether v is a float32 value of the given shape that one node reads, and nothing after the
  // step (a node fused with its reader may keep it in a register, or take its block).
  bool internal(int64_t v, const Shape& shape) const {
    return readers[v] == 1 && !output[v] && !update[v] &&
           g.values[v].meta.dtype == DType::Float32 && g.values[v].meta.shape == shape;
  }
  int64_t def(int64_t v) const {
    return g.values[v].kind == ir::ValueKind::Op ? g.values[v].node : int64_t(-1);
  }
  // The Conv node whose output x node m (a BatchNormInference) alone reads, as its input x, and
  // whose bytes m's output can take over; -1 if there is none.
  int64_t conv_of(size_t m) const {
    using K = ir::OpKind;
    const auto& bn = g.nodes[m];
    if (bn.kind != K::BatchNormInference || bn.inputs.empty() || bn.outputs.size() != 1) return -1;
    const int64_t x = bn.inputs[0], y = bn.outputs[0], n = def(x);
    if (n < 0 || g.nodes[size_t(n)].kind != K::Conv || g.nodes[size_t(n)].outputs.size() != 1 ||
        readers[x] != 1 || output[x] || update[x] || update[y] ||
        g.values[x].meta.dtype != DType::Float32 ||
        g.values[x].meta.nbytes() != g.values[y].meta.nbytes())
      return -1;
    return n;
  }
  // Whether m's other inputs (a residual) all exist before node n runs.
  bool ready_at(size_t m, int64_t n) const {
    const auto& bn = g.nodes[m];
    for (size_t i = 1; i < bn.inputs.size(); ++i)
      if (def(bn.inputs[i]) >= n) return false;
    return true;
  }
};

// Every fusion's search: match(candidates, node) for every node of g, unless fusion is off.
template <class Match>
void find_fusions(const ir::Graph& g, const Match& match) {
  if (!fusion_enabled()) return;
  const FusionCandidates c(g);
  for (size_t n = 0; n < g.nodes.size(); ++n) match(c, n);
}

}  // namespace detail

// The pair (conv n, batch norm m) fuses when the convolution's output x is read by m alone, as
// its input x, and m's other inputs exist when n runs. m's output y then takes x's block: the
// fused op computes y in place of x, whose bytes nothing else holds from n to m.
IPUML_INLINE std::vector<int64_t> fuse_conv_batch_norm(const ir::Graph& g) {
  std::vector<int64_t> fused(g.nodes.size(), -1);
  detail::find_fusions(g, [&](const detail::FusionCandidates& c, size_t m) {
    const int64_t n = c.conv_of(m);
    if (n < 0 || !c.ready_at(m, n)) return;
    fused[size_t(n)] = int64_t(m);
    fused[m] = -2;
  });
  return fused;
}

IPUML_INLINE LogSoftmaxBackwardFusion fuse_log_softmax_backward(const ir::Graph& g) {
  using K = ir::OpKind;
  LogSoftmaxBackwardFusion f;
  f.exp_node.assign(g.nodes.size(), -1);
  f.runs_at = detail::each_node_itself(g.nodes.size());
  detail::find_fusions(g, [&](const detail::FusionCandidates& c, size_t d) {
    const auto& sub = g.nodes[d];
    if (sub.kind != K::Sub || sub.inputs.size() != 2 || sub.outputs.size() != 1) return;
    const int64_t gv = sub.inputs[0], mv = sub.inputs[1], m = c.def(mv);
    const Shape& shape = g.values[gv].meta.shape;
    if (shape.empty() || m < 0 || g.values[gv].meta.dtype != DType::Float32 ||
        g.values[sub.outputs[0]].meta.shape != shape || !c.internal(mv, shape) ||
        g.nodes[size_t(m)].kind != K::Mul || g.nodes[size_t(m)].inputs.size() != 2)
      return;
    Shape row = shape;
    row.back() = 1;
    const auto& mul = g.nodes[size_t(m)];
    for (size_t side = 0; side < 2; ++side) {
      const int64_t ev = mul.inputs[side], sv = mul.inputs[1 - side];
      const int64_t e = c.def(ev), s = c.def(sv);
      if (e < 0 || s < 0 || !c.internal(ev, shape) || !c.internal(sv, row)) continue;
      const auto& ex = g.nodes[size_t(e)];
      const auto& sum = g.nodes[size_t(s)];
      // y is read at the Sub, later than the Exp would: not a state, which an in-place update
      // may overwrite in between.
      if (ex.kind != K::Exp || ex.inputs.size() != 1 ||
          g.values[ex.inputs[0]].kind == ir::ValueKind::State ||
          g.values[ex.inputs[0]].meta.shape != shape ||
          g.values[ex.inputs[0]].meta.dtype != DType::Float32 || sum.kind != K::Sum ||
          sum.inputs.size() != 1 || sum.inputs[0] != gv || !sum.attrs.keepdim || sum.attrs.flag ||
          sum.attrs.dims != std::vector<int64_t>{int64_t(shape.size()) - 1})
        continue;
      f.exp_node[d] = e;
      f.runs_at[size_t(e)] = f.runs_at[size_t(s)] = f.runs_at[size_t(m)] = int64_t(d);
      break;
    }
  });
  return f;
}

IPUML_INLINE IndexAddFusion fuse_index_add_into_add(const ir::Graph& g) {
  using K = ir::OpKind;
  IndexAddFusion f;
  f.index_add_node.assign(g.nodes.size(), -1);
  f.onto.assign(g.nodes.size(), -1);
  f.runs_at = detail::each_node_itself(g.nodes.size());
  detail::find_fusions(g, [&](const detail::FusionCandidates& c, size_t d) {
    const auto& add = g.nodes[d];
    if (add.kind != K::Add || add.inputs.size() != 2 || add.outputs.size() != 1) return;
    const int64_t y = add.outputs[0];
    const Shape& shape = g.values[y].meta.shape;
    // The output takes an operand's block: it must not be computed in a state's buffer.
    if (g.values[y].meta.dtype != DType::Float32 || c.update[y]) return;
    for (int side = 1; side >= 0; --side) {
      const int64_t b = add.inputs[size_t(side)], a = add.inputs[size_t(1 - side)];
      const int64_t e = c.def(b), n = c.def(a);
      if (e < 0 || n < 0 || !c.internal(b, shape) || !c.internal(a, shape)) continue;
      const auto& ia = g.nodes[size_t(e)];
      // a's block is its own (a Reshape's output may be a view of bytes read elsewhere).
      if (ia.kind != K::IndexAdd || ia.inputs.size() != 2 || ia.outputs.size() != 1 ||
          ia.attrs.shape != shape || g.nodes[size_t(n)].kind == K::Reshape)
        continue;
      // The IndexAdd's inputs are read at the Add, later than it would: not states, which an
      // in-place update may overwrite in between.
      if (std::any_of(ia.inputs.begin(), ia.inputs.end(), [&](int64_t v) {
            return g.values[v].kind == ir::ValueKind::State || c.update[v];
          }))
        continue;
      f.index_add_node[d] = e;
      f.onto[d] = a;
      f.runs_at[size_t(e)] = int64_t(d);
      break;
    }
  });
  return f;
}

IPUML_INLINE ConvMaxPoolFusion fuse_conv_max_pool(const ir::Graph& g) {
  using K = ir::OpKind;
  ConvMaxPoolFusion f;
  f.conv_node.assign(g.nodes.size(), -1);
  f.runs_at = detail::each_node_itself(g.nodes.size());
  detail::find_fusions(g, [&](const detail::FusionCandidates& c, size_t m) {
    const auto& pool = g.nodes[m];
    if (pool.kind != K::MaxPool || pool.inputs.size() != 1 || pool.outputs.size() != 2) return;
    const int64_t x = pool.inputs[0], n = c.def(x);
    if (n < 0 || !c.internal(x, g.values[x].meta.shape)) return;
    const auto& conv = g.nodes[size_t(n)];
    if (conv.kind != K::Conv || conv.outputs.size() != 1 ||
        (conv.inputs.size() != 2 && conv.inputs.size() != 3) ||
        std::any_of(conv.inputs.begin(), conv.inputs.end(),
                    [&](int64_t v) { return g.values[v].meta.dtype != DType::Float32; }) ||
        g.values[pool.outputs[0]].meta.dtype != DType::Float32 ||
        g.values[pool.outputs[1]].meta.dtype != DType::Int64)
      return;
    // The convolution's inputs are read at the MaxPool: the executor's in-place updates see that
    // (a state it reads is not overwritten before).
    f.conv_node[m] = n;
    f.runs_at[size_t(n)] = int64_t(m);
  });
  return f;
}

IPUML_INLINE ir::Graph sink_convs_to_batch_norms(ir::Graph g) {
  if (!detail::fusion_enabled()) return g;
  const size_t count = g.nodes.size();
  std::vector<int64_t> before(count, -1);  // per batch norm: the conv moved right before it
  std::vector<bool> moved(count, false);
  {
    const detail::FusionCandidates c(g);
    for (size_t m = 0; m < count; ++m) {
      const int64_t n = c.conv_of(m);
      if (n < 0 || c.ready_at(m, n)) continue;
      // Nothing between n and m reads n's output (m is its only reader) and n's inputs exist
      // before n, so n can run anywhere in between; the residual exists before m.
      before[m] = n;
      moved[size_t(n)] = true;
    }
  }
  if (std::none_of(moved.begin(), moved.end(), [](bool b) { return b; })) return g;
  std::vector<ir::Node> nodes;
  nodes.reserve(count);
  std::vector<int64_t> at(count, -1);  // old index -> new
  auto emit = [&](size_t i) {
    at[i] = int64_t(nodes.size());
    nodes.push_back(std::move(g.nodes[i]));
  };
  for (size_t i = 0; i < count; ++i) {
    if (moved[i]) continue;
    if (before[i] >= 0) emit(size_t(before[i]));
    emit(i);
  }
  g.nodes = std::move(nodes);
  for (auto& v : g.values)
    if (v.kind == ir::ValueKind::Op && v.node >= 0) v.node = at[size_t(v.node)];
  return g;
}

IPUML_INLINE MemoryPlan plan_memory(const ir::Graph& g, size_t alignment,
                                    const std::vector<int64_t>& in_place, bool views,
                                    const std::vector<int64_t>& runs_at) {
  MemoryPlan p;
  p.offset.assign(g.values.size(), -1);
  auto last = g.last_use();
  // reads_at[n]: the inputs read when node n runs (its own and those of the nodes run inside it).
  auto at = [&](size_t n) { return runs_at.empty() ? int64_t(n) : runs_at[n]; };
  std::vector<std::vector<int64_t>> reads_at(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (auto v : g.nodes[n].inputs) {
      reads_at[size_t(at(n))].push_back(v);
      last[v] = std::max(last[v], at(n));
    }
  // root[v]: the value whose block v shares (v itself unless v is a view); a root's `last` is
  // the last use of any value sharing its block.
  std::vector<int64_t> root(g.values.size());
  std::iota(root.begin(), root.end(), int64_t(0));
  if (views && detail::fusion_enabled()) {
    std::vector<bool> update_value(g.values.size(), false);
    for (const auto& u : g.updates) update_value[u.value] = true;
    p.view.assign(g.nodes.size(), false);
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const auto& node = g.nodes[n];
      if (node.kind != ir::OpKind::Reshape || node.inputs.size() != 1 || node.outputs.size() != 1)
        continue;
      const int64_t x = node.inputs[0], y = node.outputs[0];
      const auto kind = g.values[x].kind;
      // A state's old bytes may be overwritten by its update before the view's readers run.
      if ((kind != ir::ValueKind::Op && kind != ir::ValueKind::Input) || update_value[y] ||
          g.values[x].meta.nbytes() != g.values[y].meta.nbytes())
        continue;
      p.view[n] = true;
      root[y] = root[x];
      last[root[y]] = std::max(last[root[y]], last[y]);
    }
  }
  std::map<size_t, size_t> free_blocks;  // offset -> size, coalesced
  size_t end = 0;
  auto round = [&](size_t n) {
    return (std::max<size_t>(n, 1) + alignment - 1) / alignment * alignment;
  };
  auto allocate = [&](size_t n) -> size_t {
    for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it) {
      if (it->second >= n) {
        const size_t off = it->first;
        const size_t rest = it->second - n;
        free_blocks.erase(it);
        if (rest) free_blocks[off + n] = rest;
        return off;
      }
    }
    // Grow the arena, absorbing a free block that touches the end.
    if (!free_blocks.empty()) {
      auto lastb = std::prev(free_blocks.end());
      if (lastb->first + lastb->second == end) {
        const size_t off = lastb->first;
        free_blocks.erase(lastb);
        end = off + n;
        return off;
      }
    }
    const size_t off = end;
    end += n;
    return off;
  };
  auto release = [&](size_t off, size_t n) {
    auto it = free_blocks.emplace(off, n).first;
    if (auto nx = std::next(it); nx != free_blocks.end() && it->first + it->second == nx->first) {
      it->second += nx->second;
      free_blocks.erase(nx);
    }
    if (it != free_blocks.begin()) {
      auto pv = std::prev(it);
      if (pv->first + pv->second == it->first) {
        pv->second += it->second;
        free_blocks.erase(it);
      }
    }
  };
  std::vector<bool> freed(g.values.size(), false);
  auto release_value = [&](int64_t v) {
    if (freed[v] || p.offset[v] < 0) return;
    freed[v] = true;
    release(static_cast<size_t>(p.offset[v]), round(g.values[v].meta.nbytes()));
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (!in_place.empty() && in_place[n] >= 0) {
      // Computed in place of an input: the output takes over its block (freed with the output).
      const int64_t x = in_place[n], y = g.nodes[n].outputs[0];
      p.offset[y] = p.offset[x];
      freed[x] = true;
    }
    if (at(n) != int64_t(n)) continue;  // runs inside a later node: keeps no output
    for (auto v : g.nodes[n].outputs) {
      if (root[v] != v) {
        p.offset[v] = p.offset[root[v]];  // a view: the root's block (-1 for a graph input)
        continue;
      }
      if (p.offset[v] >= 0) continue;
      const size_t sz = round(g.values[v].meta.nbytes());
      p.offset[v] = static_cast<int64_t>(allocate(sz));
      p.naive_bytes += sz;
    }
    // Outputs nobody reads die at once; a block dies after the last reader of any value in it.
    for (auto v : g.nodes[n].outputs)
      if (root[v] == v && last[v] < 0) release_value(v);
    for (auto v : reads_at[n]) {
      const int64_t r = root[v];
      if (g.values[r].kind == ir::ValueKind::Op && last[r] == static_cast<int64_t>(n))
        release_value(r);
    }
  }
  p.arena_bytes = end;
  return p;
}

namespace detail {

// Per node, what plan_memory's `in_place` takes from the fusions.
inline std::vector<int64_t> in_place_outputs(const ir::Graph& g,
                                             const std::vector<int64_t>& conv_batch_norms,
                                             const IndexAddFusion& index_adds) {
  std::vector<int64_t> in_place(g.nodes.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (conv_batch_norms[n] == -2) in_place[n] = g.nodes[n].inputs[0];
    if (index_adds.onto[n] >= 0) in_place[n] = index_adds.onto[n];
  }
  return in_place;
}

// Per node, the node it runs inside under the fusions that move nodes (or itself).
inline std::vector<int64_t> merged_runs_at(const LogSoftmaxBackwardFusion& log_softmax_grads,
                                           const IndexAddFusion& index_adds,
                                           const ConvMaxPoolFusion& conv_pools) {
  std::vector<int64_t> at = log_softmax_grads.runs_at;
  for (size_t n = 0; n < at.size(); ++n) {
    if (at[n] == int64_t(n)) at[n] = index_adds.runs_at[n];
    if (at[n] == int64_t(n)) at[n] = conv_pools.runs_at[n];
  }
  return at;
}

}  // namespace detail

IPUML_INLINE GraphExecutor::GraphExecutor(ir::Graph graph)
    : graph_(sink_convs_to_batch_norms(std::move(graph))),
      fused_(fuse_conv_batch_norm(graph_)),
      log_softmax_grads_(fuse_log_softmax_backward(graph_)),
      index_adds_(fuse_index_add_into_add(graph_)),
      conv_pools_(fuse_conv_max_pool(graph_)),
      runs_at_(detail::merged_runs_at(log_softmax_grads_, index_adds_, conv_pools_)),
      plan_(plan_memory(graph_, 64, detail::in_place_outputs(graph_, fused_, index_adds_),
                        /*views=*/true, runs_at_)) {
  arena_ = std::make_unique<Storage>(std::max<size_t>(plan_.arena_bytes, 64));
  ptr_.assign(graph_.values.size(), nullptr);
  for (size_t v = 0; v < graph_.values.size(); ++v)
    if (plan_.offset[v] >= 0) ptr_[v] = static_cast<char*>(arena_->data()) + plan_.offset[v];
  in_bufs_.resize(graph_.nodes.size());
  out_bufs_.resize(graph_.nodes.size());
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    for (auto v : graph_.nodes[n].inputs) in_bufs_[n].push_back({nullptr, graph_.values[v].meta});
    for (auto v : graph_.nodes[n].outputs) out_bufs_[n].push_back({nullptr, graph_.values[v].meta});
  }
  // A state's old value must stay readable by every node before its new value's producer (the
  // producer itself may read it: run_kernel copies an input an output overlaps unless the
  // kernel is safe for it), and not be read at the end: by a graph output or another update.
  const size_t nv = graph_.values.size();
  std::vector<int64_t> last_read(nv, -1), updates_from(nv, 0), updates_to(nv, 0);
  std::vector<bool> read_at_end(nv, false);
  // Where each value is last read: a node run inside a later one reads its inputs there.
  for (size_t n = 0; n < graph_.nodes.size(); ++n)
    for (auto v : graph_.nodes[n].inputs) last_read[v] = std::max(last_read[v], runs_at_[n]);
  for (auto v : graph_.outputs) read_at_end[v] = true;
  for (const auto& u : graph_.updates) {
    read_at_end[u.value] = true;
    ++updates_from[u.value];
    ++updates_to[u.state];
  }
  for (size_t i = 0; i < graph_.states.size(); ++i)
    for (const auto& u : graph_.updates)
      if (u.state == graph_.states[i]) {
        updated_states_.push_back(i);
        break;
      }
  in_place_.assign(graph_.updates.size(), false);
  for (size_t i = 0; i < graph_.updates.size(); ++i) {
    const auto& u = graph_.updates[i];
    const auto& src = graph_.values[u.value];
    in_place_[i] = src.kind == ir::ValueKind::Op && src.node >= 0 && updates_from[u.value] == 1 &&
                   updates_to[u.state] == 1 && !read_at_end[u.state] &&
                   last_read[u.state] <= src.node &&
                   src.meta.nbytes() == graph_.values[u.state].meta.nbytes();
  }
}

IPUML_INLINE std::vector<Tensor> GraphExecutor::run(const std::vector<Tensor>& inputs,
                                                    const std::vector<Tensor>& states,
                                                    uint64_t step) {
  IPUML_CHECK(inputs.size() == graph_.inputs.size(), "run: the graph takes ", graph_.inputs.size(),
              " inputs, got ", inputs.size());
  IPUML_CHECK(states.size() == graph_.states.size(), "run: the graph binds ", graph_.states.size(),
              " state tensors, got ", states.size());
  std::vector<Tensor> keep;  // contiguous copies of non-contiguous inputs live until the end
  auto bind = [&](int64_t v, const Tensor& t, const char* what, size_t i) {
    const auto& m = graph_.values[v].meta;
    IPUML_CHECK(t.defined() && t.shape() == m.shape && t.dtype() == m.dtype, "run: ", what, " ", i,
                " ('", graph_.values[v].name, "') must have shape ", shape_str(m.shape),
                " and dtype ", dtype_name(m.dtype), ", got ",
                t.defined() ? shape_str(t.shape()) : "undefined", " ",
                t.defined() ? dtype_name(t.dtype()) : "");
    IPUML_CHECK(!t.is_symbolic(), "run: ", what, " ", i, " is symbolic");
    if (t.is_contiguous()) {
      ptr_[v] = t.raw_data();
    } else {
      IPUML_CHECK(std::string(what) == "input", "run: state tensor ", i, " ('",
                  graph_.values[v].name, "') is not contiguous");
      keep.push_back(t.contiguous());
      ptr_[v] = keep.back().raw_data();
    }
  };
  for (size_t i = 0; i < inputs.size(); ++i) bind(graph_.inputs[i], inputs[i], "input", i);
  for (size_t i = 0; i < states.size(); ++i) bind(graph_.states[i], states[i], "state", i);
  for (size_t i = 0; i < graph_.updates.size(); ++i)
    if (in_place_[i]) ptr_[graph_.updates[i].value] = ptr_[graph_.updates[i].state];

  KernelContext ctx;
  ctx.rng_step = step;
  const bool timed = op_profiling();
  auto bind_node = [&](size_t n) {
    const auto& node = graph_.nodes[n];
    for (size_t i = 0; i < node.inputs.size(); ++i) in_bufs_[n][i].data = ptr_[node.inputs[i]];
    for (size_t i = 0; i < node.outputs.size(); ++i) out_bufs_[n][i].data = ptr_[node.outputs[i]];
  };
  for (size_t n = 0; n < graph_.nodes.size(); ++n) {
    if (fused_[n] == -2 || runs_at_[n] != int64_t(n)) continue;
    const auto& node = graph_.nodes[n];
    if (!plan_.view.empty() && plan_.view[n]) {  // a Reshape: its input's bytes as they are
      ptr_[node.outputs[0]] = ptr_[node.inputs[0]];
      continue;
    }
    bind_node(n);
    if (timed) ipuml::detail::take_loop_totals();  // the node's loops from here on
    const auto t0 =
        timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (const int64_t m = fused_[n]; m >= 0) {
      bind_node(size_t(m));
      run_conv_batch_norm(node.attrs, in_bufs_[n], graph_.nodes[m].attrs, in_bufs_[m],
                          out_bufs_[m][0]);
    } else if (const int64_t e = log_softmax_grads_.exp_node[n]; e >= 0) {
      const int64_t y = graph_.nodes[size_t(e)].inputs[0];
      run_log_softmax_backward({ptr_[y], graph_.values[y].meta}, in_bufs_[n][0], out_bufs_[n][0]);
    } else if (const int64_t c = conv_pools_.conv_node[n]; c >= 0) {
      bind_node(size_t(c));  // the convolution's inputs (its output has no block)
      run_conv_max_pool(graph_.nodes[size_t(c)].attrs, in_bufs_[size_t(c)], node.attrs,
                        out_bufs_[n]);
    } else if (const int64_t i = index_adds_.index_add_node[n]; i >= 0) {
      bind_node(size_t(i));  // the Add's output already holds its other operand
      run_index_add_onto(graph_.nodes[size_t(i)].attrs, in_bufs_[size_t(i)][0],
                         in_bufs_[size_t(i)][1], out_bufs_[n][0]);
    } else {
      run_kernel(node.kind, node.attrs, in_bufs_[n], out_bufs_[n], ctx);
    }
    if (timed) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (log_softmax_grads_.exp_node[n] >= 0)
        record_op_time("LogSoftmaxBackward (Sum Exp Mul Sub)", seconds);
      else if (index_adds_.index_add_node[n] >= 0)
        record_op_time("Add (IndexAdd onto its operand)", seconds);
      else if (conv_pools_.conv_node[n] >= 0)
        record_op_time("Conv + MaxPool (pooled from cache)", seconds);
      else
        record_op_time(node.kind, node.attrs, seconds);
    }
  }

  std::vector<Tensor> outputs;
  for (auto v : graph_.outputs) {
    const auto& m = graph_.values[v].meta;
    auto impl = std::make_shared<TensorImpl>();
    impl->shape = m.shape;
    impl->strides = contiguous_strides(m.shape);
    impl->dtype = m.dtype;
    impl->storage = std::make_shared<Storage>(m.nbytes());
    std::memcpy(impl->storage->data(), ptr_[v], m.nbytes());
    outputs.emplace_back(std::move(impl));
  }
  // Updates are applied last; a source that is itself a state is snapshotted first so the
  // order of updates cannot matter.
  std::vector<std::vector<char>> snap(graph_.updates.size());
  for (size_t i = 0; i < graph_.updates.size(); ++i) {
    const auto& u = graph_.updates[i];
    if (graph_.values[u.value].kind != ir::ValueKind::Op) {
      const char* src = static_cast<const char*>(ptr_[u.value]);
      snap[i].assign(src, src + graph_.values[u.value].meta.nbytes());
    }
  }
  for (size_t i = 0; i < graph_.updates.size(); ++i) {
    const auto& u = graph_.updates[i];
    if (in_place_[i]) continue;  // already there
    const void* src = snap[i].empty() ? ptr_[u.value] : snap[i].data();
    std::memcpy(ptr_[u.state], src, graph_.values[u.state].meta.nbytes());
  }
  for (size_t i : updated_states_) states[i].impl()->version++;
  return outputs;
}

}  // namespace ipuml::cpu
