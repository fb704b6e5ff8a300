// Planning a matrix op (matmul, convolution and its two gradients) over units as PopLibs does:
// a grid of batch x M x N x K parts, K's partial sums reduced in a following compute set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/backends/emu/placement.hpp>
#include <ipuml/backends/emu/target_model.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/core/dtype.hpp>
#include <ipuml/ir/graph.hpp>

namespace ipuml::emu {

// An op seen as out[B, M, N] = sum over K of a[B, M, K] * b[B, K, N] (poplibs lowers every
// matmul to a convolution; this is the same idea the other way round):
//   MatMul              B batch, M rows, N columns, K the inner dim
//   Conv                B images, M output rows, N output channels, K input channels
//   ConvBackwardInput   B images, M input rows, N input channels, K output channels
//   ConvBackwardWeight  B 1, M output channels, N input channels, K images
//   Sum                 B 1, M the kept elements, N 1, K the leading reduced dim
//   IndexSelect         B 1, M lookups, N the table's columns, K its rows (a one-hot product:
//                       each output takes the one part whose rows hold its index)
//   IndexAdd            B 1, M the table's rows, N its columns, K 1 (each unit adds the
//                       looked-up rows that fall in its block)
// K is the axis the executor really slices into partial sums; B, M and N parts give the same
// bits whether run per unit or in one call, so the executor runs them as one.
struct MatrixProblem {
  enum Axis : unsigned { kB = 1, kM = 2, kN = 4, kK = 8 };
  int64_t b = 1, m = 1, n = 1, k = 1;
  double flops = 0;
  double a_bytes = 0, b_bytes = 0;  // the two operands, whole
  unsigned a_axes = 0, b_axes = 0;  // which axes each operand spans (it is broadcast over the rest)
  // A part of r rows of M reads min(a_rows, ceil((r * row_num + halo) / row_den)) rows of a
  // (convolution windows overlap); 0 rows: a splits along M like any other axis.
  int64_t a_rows = 0, row_num = 1, row_den = 1, halo = 0;
  int64_t out_elems = 0;
  DType dtype = DType::Float32, out_dtype = DType::Float32;
  bool amp = true;  // the matrix unit (AMP); a reduction's adds run on the vector units
  int a_input = 0, b_input = 1;  // the node inputs that are a and b (-1: no such operand)
  // An operand laid out by this op (a state no earlier op placed) stays on the units of its
  // blocks: where the grid does not replicate it, it is never received.
  bool a_resident = false, b_resident = false;
  std::vector<int> k_dim;  // per node input: its dim sliced along K, -1 if it has none (a bias)
};

bool is_matrix_op(ir::OpKind k);
// Ops planned as grids: matrix ops, and float sums that reduce their leading dim (a bias
// gradient over the batch), whose partial sums over batch ranges reduce in a second stage.
bool plans_as_grid(const ir::Graph& g, const ir::Node& n);
// Whether a K split changes the arithmetic (sums); a lookup's K parts select, and run as one.
bool k_parts_are_sums(ir::OpKind k);
MatrixProblem matrix_problem(const ir::Graph& g, const ir::Node& n);

struct MatrixGrid {
  int32_t pb = 1, pm = 1, pn = 1, pk = 1;  // parallel parts of each axis, one unit per part
  int32_t sk = 1;  // serial steps within each K part (each receives 1/sk of its operands)
  int64_t units() const { return int64_t{pb} * pm * pn * pk; }
  int64_t k_slices() const { return int64_t{pk} * sk; }
  bool operator==(const MatrixGrid&) const = default;
};

// How many units hold the same block of an operand spanning `axes` (1: each block once).
int64_t replication(const MatrixGrid& g, unsigned axes);

struct MatrixCost {
  double compute = 0, exchange = 0, sync = 0;  // cycles of the largest part, both compute sets
  double temp = 0;            // the largest unit's temporaries (received operands, partials)
  double exchange_bytes = 0;  // moved over the exchange, all units together
  int64_t reduce_units = 0;   // units of the partial-sum reduction (0 without a K split)
  int64_t vertices = 0;
  bool fits = true;
  double total() const { return compute + exchange + sync; }
};

// Cycles and temporaries of one grid; `partials` is the type of K's partial sums (PopTorch's
// setPartialsType: float, or half with half partials).
MatrixCost matrix_cost(const emu::TargetModel& t, const MatrixProblem& p, const MatrixGrid& g,
                       DType partials, double limit);

// The cheapest grid whose temporaries fit `limit` bytes per unit, or, when none does, the one
// with the least temporaries (the caller reports out of memory).
MatrixGrid plan_matrix(const emu::TargetModel& t, const MatrixProblem& p, DType partials,
                       double limit);

std::string to_string(const MatrixGrid& g);  // "b1 m8 n16 k4 s1"

}  // namespace ipuml::emu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/emu/matrix_plan_impl.hpp>
#endif
