// How one op's work can be divided over units: the split axes each op family allows, chosen so
// that every unit's slice gives bit for bit what the whole-tensor CPU kernel gives there.
#pragma once

#include <cstdint>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>

namespace ipuml::emu {

enum class SplitKind : uint8_t {
  Whole,    // one vertex on one unit
  Flat,     // contiguous element ranges of same-sized operands
  Axis,     // ranges of one output dim; inputs sliced along their matching dim or broadcast
  TreeSum,  // a full float sum: per-unit partials along the pairwise tree, then one combine
  Rows,     // element ranges of the output in whole rows of `grain` (a softmax row, a vector);
            // inputs of the output's shape sliced alike, broadcast inputs read where needed
  Grid,     // a matrix op over a batch x M x N x K grid of units (matrix_plan.hpp)
};
const char* split_kind_name(SplitKind k);

struct SliceSpec {
  SplitKind kind = SplitKind::Whole;
  int out_dim = 0;  // Axis: the dim of every output that is split
  std::vector<int>
      in_dim;          // per input: dim sliced with the same range, -1 = whole input to every part
  int64_t extent = 1;  // length of the split axis (elements for Flat/TreeSum)
  int64_t grain = 1;   // parts start at multiples of grain
  int64_t min_rows = 1;    // 2 where a 1-row slice would switch the kernel onto another code path
  bool merge_all = false;  // index-addressed ops (random, arange) run as one call over all parts
  bool matrix = false;     // matmul/conv work: the matrix unit in the cycle model
};

// First row of part p of `parts` over [0, extent) in units of `grain`.
inline int64_t part_begin(int64_t extent, int64_t grain, int64_t parts, int64_t p) {
  const int64_t units = (extent + grain - 1) / grain;
  const int64_t b = (units * p / parts) * grain;
  return b < extent ? b : extent;
}
// The most rows any of `parts` parts gets: the part that decides cost and fit.
inline int64_t max_part_rows(int64_t extent, int64_t grain, int64_t parts) {
  const int64_t units = (extent + grain - 1) / grain;
  const int64_t per = (units + parts - 1) / parts * grain;
  return per < extent ? per : extent;
}
// The most parts the spec allows (each at least min_rows rows).
int64_t max_parts(const SliceSpec& s);

// Ways to split `node` (never empty: Whole when nothing else is valid).
std::vector<SliceSpec> split_candidates(const ir::Graph& g, const ir::Node& node);

// Attributes of the part covering rows [b, e) of the split axis (conv shapes, slice bounds).
ir::Attrs slice_attrs(const ir::Graph& g, const ir::Node& node, const SliceSpec& s, int64_t b,
                      int64_t e);

}  // namespace ipuml::emu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/emu/partition_impl.hpp>
#endif
