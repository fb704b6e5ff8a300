// Bodies of the split rules (compiled once in src/lib/emu_partition.cpp).
#pragma once

#include <algorithm>

#include <ipuml/backends/emu/partition.hpp>

namespace ipuml::emu {

IPUML_INLINE const char* split_kind_name(SplitKind k) {
  switch (k) {
    case SplitKind::Whole:
      return "whole";
    case SplitKind::Flat:
      return "flat";
    case SplitKind::Axis:
      return "axis";
    case SplitKind::TreeSum:
      return "tree_sum";
    case SplitKind::Rows:
      return "rows";
    case SplitKind::Grid:
      return "grid";
  }
  return "?";
}

IPUML_INLINE int64_t max_parts(const SliceSpec& s) {
  if (s.kind == SplitKind::Whole) return 1;
  const int64_t units = (s.extent + s.grain - 1) / s.grain;
  const int64_t per = (s.min_rows + s.grain - 1) / s.grain;
  return std::max<int64_t>(1, units / std::max<int64_t>(per, 1));
}

namespace pdetail {

using K = ir::OpKind;

// The dim of `in` that lines up with output dim d under broadcasting, or -1 if it broadcasts.
inline int aligned_dim(const Shape& in, const Shape& out, int d) {
  const int a = d - static_cast<int>(out.size() - in.size());
  if (a < 0) return -1;
  return in[static_cast<size_t>(a)] == out[static_cast<size_t>(d)] ? a : -1;
}

inline int first_big_dim(const Shape& s, int skip = -1) {
  for (size_t i = 0; i < s.size(); ++i)
    if (static_cast<int>(i) != skip && s[i] > 1) return static_cast<int>(i);
  return -1;
}

// The split rules of one node, a member per op family; each adds its candidates to c.
struct SplitRules {
  const ir::Graph& g;
  const ir::Node& node;
  const ir::TensorMeta& out;
  const Shape& os;
  const size_t nin;
  const K k;
  const int rank;
  const ir::Attrs& a;
  std::vector<SliceSpec> c;

  SplitRules(const ir::Graph& graph, const ir::Node& n)
      : g(graph),
        node(n),
        out(graph.meta(n.outputs[0])),
        os(out.shape),
        nin(n.inputs.size()),
        k(n.kind),
        rank(static_cast<int>(os.size())),
        a(n.attrs) {}

  const Shape& in_shape(size_t j) const { return g.meta(node.inputs[j]).shape; }

  void axis(int od, std::vector<int> dims, int64_t min_rows = 1, bool matrix = false) {
    if (od < 0 || os[static_cast<size_t>(od)] < 2) return;
    SliceSpec s;
    s.kind = SplitKind::Axis;
    s.out_dim = od;
    s.in_dim = std::move(dims);
    s.extent = os[static_cast<size_t>(od)];
    s.min_rows = min_rows;
    s.matrix = matrix;
    c.push_back(std::move(s));
  }
  // Whole rows of `row` elements; inputs shaped like the output slice alike, others broadcast.
  void rows(int64_t row) {
    SliceSpec s;
    s.kind = SplitKind::Rows;
    for (size_t j = 0; j < nin; ++j) s.in_dim.push_back(in_shape(j) == os ? 0 : -1);
    s.extent = out.numel();
    s.grain = row > 1 ? row : 16;  // whole rows, or whole vectors
    if (s.extent > s.grain) c.push_back(std::move(s));
  }
  void flat(bool merge_all) {
    SliceSpec s;
    s.kind = SplitKind::Flat;
    s.in_dim.assign(nin, 0);
    s.extent = out.numel();
    s.grain = 16;  // whole vectors per unit
    s.merge_all = merge_all;
    if (s.extent > 1) c.push_back(std::move(s));
  }

  void broadcast() {
    bool same = true;
    for (size_t j = 0; j < nin; ++j) same = same && in_shape(j) == os;
    if (same) {
      flat(false);
    } else {
      rows(1);
    }
  }

  // Sum, Amax and Amin.
  void reduce() {
    const Shape& is = in_shape(0);
    std::vector<bool> red(is.size(), a.dims.empty());
    for (auto d : a.dims) red[static_cast<size_t>(d)] = true;
    int j = -1;
    bool reduced_before = false;
    for (size_t i = 0; i < is.size(); ++i) {
      if (red[i]) {
        reduced_before = reduced_before || is[i] > 1;
      } else if (is[i] > 1) {
        j = static_cast<int>(i);
        break;
      }
    }
    if (j >= 0) {
      int od = j;
      if (!a.keepdim)
        for (int i = 0; i < j; ++i) od -= red[static_cast<size_t>(i)] ? 1 : 0;
      axis(od, {j}, reduced_before ? 2 : 1);
      // Any later kept dim splits as well: a sum over the leading dims of [2, 12, 128, 128]
      // (a layer norm's gradient) keeps 2 of its first kept dim but 128 of a later one.
      bool before = reduced_before;
      int oi = od;
      for (size_t i = static_cast<size_t>(j) + 1; i < is.size(); ++i) {
        if (red[i]) {
          before = before || is[i] > 1;
          if (a.keepdim) ++oi;
          continue;
        }
        ++oi;
        if (is[i] > 1) axis(oi, {static_cast<int>(i)}, before ? 2 : 1);
      }
      // Only trailing dims reduced: each output element reads its own contiguous run of the
      // input, so output elements spread over every unit with their inputs in proportion.
      bool trailing = !reduced_before;
      bool seen_reduced = false;
      for (size_t i = 0; i < is.size(); ++i) {
        if (is[i] <= 1) continue;
        if (red[i])
          seen_reduced = true;
        else if (seen_reduced)
          trailing = false;
      }
      if (trailing && seen_reduced && out.numel() > 1) {
        SliceSpec s;
        s.kind = SplitKind::Rows;
        s.in_dim = {0};
        s.extent = out.numel();
        s.grain = 1;
        c.push_back(std::move(s));
      }
    } else if (k == K::Sum && out.numel() == 1 && out.dtype == DType::Float32 &&
               g.meta(node.inputs[0]).dtype == DType::Float32 &&
               g.meta(node.inputs[0]).numel() > 1) {
      SliceSpec s;
      s.kind = SplitKind::TreeSum;
      s.in_dim = {0};
      s.extent = g.meta(node.inputs[0]).numel();
      s.grain = 256;  // pairwise leaves
      c.push_back(std::move(s));
    }
  }

  // An op along one dim (a.dims[0]): MaxDim, MinDim, ArgMax, ArgMin, and Softmax along a dim
  // other than the last.
  void along_dim() {
    if (a.dims.empty()) return;
    const Shape& is = in_shape(0);
    const int d = static_cast<int>(a.dims[0]);
    const int j = first_big_dim(is, d);
    if (j >= 0) {
      const bool keeps = ir::op_category(k) == ir::OpCategory::Softmax || a.keepdim;
      axis(keeps || j < d ? j : j - 1, {j}, j > d ? 2 : 1);
    }
  }

  void layer_norm() {
    if (a.dims.empty()) return;
    if (k != K::LayerNormParamBackward) {
      // Whole rows over any leading dim of size >= 2, the planner choosing (BERT at micro-batch
      // 2: 2 parts over the batch, 128 over the sequence): y/dx, x, dy, mean and rstd slice
      // alike; weight and bias go whole to every part.
      for (int d = 0; d < static_cast<int>(a.dims[0]); ++d) {
        std::vector<int> dims(nin, -1);
        for (size_t j = 0; j < (k == K::LayerNorm ? 1u : 4u) && j < nin; ++j) dims[j] = d;
        axis(d, dims);  // none for a dim of size 1
      }
    } else {
      // dweight and dbias by columns: each part sums its columns of dy and x over every row.
      const int j = first_big_dim(os);
      const int in_d = static_cast<int>(a.dims[0]) + j;
      if (j >= 0) axis(j, {in_d, in_d, -1, -1});
    }
  }

  void batch_norm() {
    // Whole channels (a channel's statistics need every image's planes, as popnn's batch norm
    // reduces them): x, dy, the residual, y and the [1, C, 1..] statistics slice along dim 1;
    // the [C] weight, bias and given statistics along dim 0.
    std::vector<int> dims(nin, 1);
    size_t per_channel = 0, first = 0;  // the run of [C] inputs
    if (k == K::BatchNorm) {
      first = 1, per_channel = a.flag2 ? 2 : 0;
    } else if (k == K::BatchNormInference) {
      first = 1, per_channel = 2 + (a.flag2 ? 2 : 0);
    } else {
      first = 4, per_channel = a.flag2 ? 1 : 0;
    }
    for (size_t j = first; j < first + per_channel && j < nin; ++j) dims[j] = 0;
    axis(1, dims);
  }

  void attention() {
    // Whole attention problems over the first batch dim of size >= 2: q, k, v (and dout, out,
    // logsumexp) slice alike; a bias slices where it has that dim, else goes whole.
    const int d = first_big_dim(Shape(os.begin(), os.end() - 2));
    if (d >= 0) {
      std::vector<int> dims(nin, d);
      if (node.attrs.flag2 &&
          in_shape(nin - 1)[static_cast<size_t>(d)] != os[static_cast<size_t>(d)])
        dims.back() = -1;
      axis(d, dims);
    }
  }

  // Permute, Slice and Cat (a reshape splits as a flat op, an expand as a broadcast).
  void view() {
    if (k == K::Permute) {
      const int d = first_big_dim(os);
      if (d >= 0) axis(d, {static_cast<int>(a.dims[static_cast<size_t>(d)])});
    } else if (k == K::Slice) {
      const int d = first_big_dim(os);
      if (d >= 0) axis(d, {d == static_cast<int>(a.dims[0]) ? -1 : d});
    } else if (k == K::Cat) {
      const int d = first_big_dim(os, static_cast<int>(a.dims[0]));
      if (d >= 0) axis(d, std::vector<int>(nin, d));
    }
  }

  // The Index and Scatter families.
  void indexed() {
    if (k == K::IndexSelect) {
      const int d = first_big_dim(os);
      if (d >= 0)
        axis(d,
             d == static_cast<int>(a.dims[0]) ? std::vector<int>{-1, 0} : std::vector<int>{d, -1});
      // An embedding lookup: the table split along its rows' elements, each unit serving its
      // columns of every looked-up row, so the table never moves whole.
      const int last = rank - 1;
      if (last != d && last != static_cast<int>(a.dims[0])) axis(last, {last, -1});
    } else if (k == K::IndexAdd) {
      const int d = first_big_dim(os, static_cast<int>(a.dims[0]));
      if (d >= 0 && in_shape(1).size() == os.size()) axis(d, {-1, d});
    } else {
      // Gather(x, idx) -> idx's shape; ScatterAdd(idx, src): idx and src line up with the output.
      const int s = static_cast<int>(a.dims[0]);
      const Shape& other = k == K::Gather ? in_shape(0) : in_shape(1);
      const Shape& idx = k == K::Gather ? in_shape(1) : in_shape(0);
      for (int d = 0; d < rank; ++d) {
        if (d == s || os[static_cast<size_t>(d)] < 2) continue;
        if (other.size() == os.size() && idx.size() == os.size() &&
            other[static_cast<size_t>(d)] == os[static_cast<size_t>(d)] &&
            idx[static_cast<size_t>(d)] == os[static_cast<size_t>(d)])
          axis(d, {d, d});
        break;
      }
    }
  }

  void pool() {
    axis(0, std::vector<int>(nin, 0));
    axis(1, std::vector<int>(nin, 1));
    // Whole output planes over every unit: batch x channels planes are independent, and each
    // input holds the same planes (in proportion), as popnn's pooling maps them.
    if (rank == 4 && os[2] * os[3] > 0 && os[0] * os[1] > 1) {
      SliceSpec s;
      s.kind = SplitKind::Rows;
      s.in_dim.assign(nin, 0);
      s.extent = out.numel();
      s.grain = os[2] * os[3];
      c.push_back(std::move(s));
    }
  }

  void by_category() {
    using C = ir::OpCategory;
    if (ir::op_has(k, ir::kFlat)) return flat(false);
    switch (ir::op_category(k)) {
      case C::Creation:  // a fill splits anywhere; counters and random draws keep their order
        return flat(k != K::Full);
      case C::Broadcast:
        return broadcast();
      case C::Update:
        // The optimizer's fused update, elementwise as popops' vertices run it: whole vectors
        // of the state and gradient in proportion on every unit, the lr and step whole on each.
        return rows(1);
      case C::Reduce:
        return k == K::Sum || k == K::Amax || k == K::Amin ? reduce() : along_dim();
      case C::Softmax:
        if (!a.dims.empty() && a.dims[0] == rank - 1)
          return rows(os[static_cast<size_t>(rank - 1)]);
        return along_dim();
      case C::LayerNorm:
        return layer_norm();
      case C::BatchNorm:
        return batch_norm();
      case C::Attention:
        return attention();
      case C::View:
        return k == K::Expand ? broadcast() : view();
      case C::Index:
      case C::Scatter:
        return indexed();
      case C::Pool:
        return pool();
      default:  // matrix ops plan as grids (matrix_plan.hpp)
        return;
    }
  }
};

}  // namespace pdetail

IPUML_INLINE std::vector<SliceSpec> split_candidates(const ir::Graph& g, const ir::Node& node) {
  pdetail::SplitRules r(g, node);
  r.by_category();
  if (r.c.empty()) {
    SliceSpec s;
    s.in_dim.assign(r.nin, -1);
    s.matrix = ir::op_category(node.kind) == ir::OpCategory::Matrix;
    r.c.push_back(std::move(s));
  }
  return std::move(r.c);
}

IPUML_INLINE ir::Attrs slice_attrs(const ir::Graph& g, const ir::Node& node, const SliceSpec& s,
                                   int64_t b, int64_t e) {
  ir::Attrs a = node.attrs;
  if (s.kind != SplitKind::Axis) return a;
  using K = ir::OpKind;
  switch (node.kind) {
    case K::ConvBackwardInput:
    case K::ConvBackwardWeight:
      a.shape[static_cast<size_t>(s.out_dim)] = e - b;  // the restored shape is the output's
      break;
    case K::Slice:
      if (s.in_dim[0] < 0) {  // rows of the sliced dim itself: move the window
        const int64_t start = a.start + b * a.step;
        a.end = std::min(a.end, a.start + e * a.step);
        a.start = start;
      }
      break;
    default:
      break;
  }
  (void)g;
  return a;
}

}  // namespace ipuml::emu
