// Bodies of the matrix-op planner (compiled once in src/lib/emu_matrix_plan.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>

#include <ipuml/backends/emu/matrix_plan.hpp>

namespace ipuml::emu {

IPUML_INLINE bool is_matrix_op(ir::OpKind k) {
  return ir::op_category(k) == ir::OpCategory::Matrix;
}

namespace mdetail {

// The leading dim of a Sum's input when that dim (of size > 1) is reduced, else -1.
inline int leading_reduced_dim(const ir::Graph& g, const ir::Node& n) {
  if (n.kind != ir::OpKind::Sum || n.inputs.size() != 1) return -1;
  const auto& in = g.meta(n.inputs[0]);
  const auto& out = g.meta(n.outputs[0]);
  if (!is_floating(in.dtype) || out.numel() <= 1) return -1;
  std::vector<bool> red(in.shape.size(), n.attrs.dims.empty());
  for (auto d : n.attrs.dims) red[static_cast<size_t>(d)] = true;
  for (size_t i = 0; i < in.shape.size(); ++i)
    if (in.shape[i] > 1) return red[i] ? static_cast<int>(i) : -1;
  return -1;
}

}  // namespace mdetail

namespace mdetail {

// An embedding lookup (rows of a 2-d table) or its gradient (rows added into a 2-d table).
inline bool is_table_op(const ir::Graph& g, const ir::Node& n) {
  if (n.attrs.dims.empty() || n.attrs.dims[0] != 0) return false;
  if (n.kind == ir::OpKind::IndexSelect) return g.meta(n.inputs[0]).shape.size() == 2;
  if (n.kind == ir::OpKind::IndexAdd) return g.meta(n.outputs[0]).shape.size() == 2;
  return false;
}

}  // namespace mdetail

IPUML_INLINE bool plans_as_grid(const ir::Graph& g, const ir::Node& n) {
  return is_matrix_op(n.kind) || mdetail::leading_reduced_dim(g, n) >= 0 ||
         mdetail::is_table_op(g, n);
}

IPUML_INLINE bool k_parts_are_sums(ir::OpKind k) {
  return k != ir::OpKind::IndexSelect && k != ir::OpKind::IndexAdd;
}

IPUML_INLINE int64_t replication(const MatrixGrid& g, unsigned axes) {
  using A = MatrixProblem::Axis;
  int64_t r = 1;
  if (!(axes & A::kB)) r *= g.pb;
  if (!(axes & A::kM)) r *= g.pm;
  if (!(axes & A::kN)) r *= g.pn;
  if (!(axes & A::kK)) r *= g.pk;
  return r;
}

namespace mdetail {

// An embedding lookup (rows of a 2-d table) or its gradient (rows added into a 2-d table) as
// a grid problem.
inline MatrixProblem table_problem(const ir::Graph& g, const ir::Node& n) {
  const bool lookup = n.kind == ir::OpKind::IndexSelect;
  const auto& out = g.meta(n.outputs[0]);
  const auto& idx = g.meta(n.inputs[lookup ? 1 : 0]);
  const auto& rows = g.meta(n.inputs[lookup ? 0 : 1]);  // the table, or the added rows
  MatrixProblem p;
  p.m = lookup ? idx.numel() : out.shape[0];
  p.n = out.shape[1];
  p.k = lookup ? rows.shape[0] : 1;
  p.flops = static_cast<double>(lookup ? out.numel() : rows.numel());
  p.a_bytes = static_cast<double>(lookup ? idx.nbytes() : rows.nbytes());
  p.b_bytes = static_cast<double>(lookup ? rows.nbytes() : idx.nbytes());
  p.a_axes = lookup ? MatrixProblem::kM : MatrixProblem::kN;
  p.b_axes = lookup ? MatrixProblem::kK | MatrixProblem::kN : 0u;
  p.a_input = 1;
  p.b_input = 0;
  p.out_elems = out.numel();
  p.dtype = p.out_dtype = out.dtype;
  p.amp = false;
  p.k_dim.assign(n.inputs.size(), -1);
  return p;
}

// A Sum over its leading dim as a grid problem with no second operand.
inline MatrixProblem reduce_problem(const ir::Graph& g, const ir::Node& n) {
  const int d = leading_reduced_dim(g, n);
  IPUML_CHECK(d >= 0, "matrix_problem: this Sum does not reduce its leading dim");
  const auto& in = g.meta(n.inputs[0]);
  MatrixProblem p;
  p.m = g.meta(n.outputs[0]).numel();
  p.k = in.shape[static_cast<size_t>(d)];
  p.flops = static_cast<double>(in.numel());
  p.a_bytes = static_cast<double>(in.nbytes());
  p.a_axes = MatrixProblem::kM | MatrixProblem::kK;
  p.b_input = -1;
  p.out_elems = p.m;
  p.dtype = in.dtype;
  p.out_dtype = g.meta(n.outputs[0]).dtype;
  p.amp = false;
  p.k_dim = {d};
  return p;
}

}  // namespace mdetail

IPUML_INLINE MatrixProblem matrix_problem(const ir::Graph& g, const ir::Node& n) {
  if (mdetail::is_table_op(g, n)) return mdetail::table_problem(g, n);
  if (n.kind == ir::OpKind::Sum) return mdetail::reduce_problem(g, n);
  using K = ir::OpKind;
  using A = MatrixProblem::Axis;
  MatrixProblem p;
  const auto& in0 = g.meta(n.inputs[0]);
  const auto& in1 = g.meta(n.inputs[1]);
  const auto& out = g.meta(n.outputs[0]);
  std::vector<ir::TensorMeta> ins, outs{out};
  for (auto v : n.inputs) ins.push_back(g.meta(v));
  p.flops = ir::op_flops(n.kind, n.attrs, ins, outs);
  p.a_bytes = static_cast<double>(in0.nbytes());
  p.b_bytes = static_cast<double>(in1.nbytes());
  p.out_elems = out.numel();
  p.dtype = in0.dtype;
  p.out_dtype = out.dtype;
  p.k_dim.assign(n.inputs.size(), -1);
  const auto& a = n.attrs;
  auto batch_of = [](const Shape& s) {
    int64_t r = 1;
    for (size_t i = 0; i + 2 < s.size(); ++i) r *= s[i];
    return r;
  };
  switch (n.kind) {
    case K::MatMul: {
      const Shape& sa = in0.shape;
      const Shape& sb = in1.shape;
      const Shape& so = out.shape;
      const int ra = static_cast<int>(sa.size()), rb = static_cast<int>(sb.size());
      p.b = batch_of(so);
      p.m = so[so.size() - 2];
      p.n = so[so.size() - 1];
      p.k = a.flag ? sa[static_cast<size_t>(ra - 2)] : sa[static_cast<size_t>(ra - 1)];
      p.a_axes = A::kM | A::kK | (batch_of(sa) > 1 ? A::kB : 0u);
      p.b_axes = A::kN | A::kK | (batch_of(sb) > 1 ? A::kB : 0u);
      p.k_dim[0] = a.flag ? ra - 2 : ra - 1;
      p.k_dim[1] = a.flag2 ? rb - 1 : rb - 2;
      break;
    }
    case K::Conv: {  // x [N, Ci, H, W], w [Co, Ci/g, kh, kw] -> [N, Co, Ho, Wo]
      p.b = in0.shape[0];
      p.m = out.shape[2];
      p.n = out.shape[1];
      p.k = a.groups == 1 ? in0.shape[1] : 1;  // slicing channels across groups breaks them
      p.a_axes = A::kB | A::kM | A::kK;
      p.b_axes = A::kN | A::kK;
      p.a_rows = in0.shape[2];
      p.row_num = a.stride[0];
      p.halo = (in1.shape[2] - 1) * a.dilation[0];
      if (a.groups == 1) p.k_dim[0] = p.k_dim[1] = 1;
      break;
    }
    case K::ConvBackwardInput: {  // dy [N, Co, Ho, Wo], w [Co, Ci/g, kh, kw] -> dx [N, Ci, H, W]
      p.b = out.shape[0];
      p.m = out.shape[2];
      p.n = out.shape[1];
      p.k = a.groups == 1 ? in0.shape[1] : 1;
      p.a_axes = A::kB | A::kM | A::kK;
      p.b_axes = A::kN | A::kK;
      p.a_rows = in0.shape[2];
      p.row_den = a.stride[0];
      p.halo = (in1.shape[2] - 1) * a.dilation[0];
      if (a.groups == 1) {
        p.k_dim[0] = 1;
        p.k_dim[1] = 0;
      }
      break;
    }
    case K::ConvBackwardWeight: {  // x [N, Ci, H, W], dy [N, Co, Ho, Wo] -> dw [Co, Ci/g, kh, kw]
      p.b = 1;
      p.m = out.shape[0];
      p.n = out.shape[1];
      p.k = in0.shape[0];
      p.a_bytes = static_cast<double>(in1.nbytes());  // a is dy, b is x
      p.b_bytes = static_cast<double>(in0.nbytes());
      p.a_input = 1;
      p.b_input = 0;
      p.a_axes = A::kM | A::kK;
      p.b_axes = A::kN | A::kK;
      p.k_dim[0] = p.k_dim[1] = 0;
      break;
    }
    default:
      fail("matrix_problem: ", ir::op_name(n.kind), " is not a matrix op");
  }
  p.b = std::max<int64_t>(p.b, 1);
  p.m = std::max<int64_t>(p.m, 1);
  p.n = std::max<int64_t>(p.n, 1);
  p.k = std::max<int64_t>(p.k, 1);
  return p;
}

namespace mdetail {

inline double ceil_frac(int64_t extent, int64_t parts) {
  const int64_t per = (extent + parts - 1) / parts;
  return static_cast<double>(per) / static_cast<double>(extent);
}

// Part counts worth trying for an axis: every count up to 16, then steps of about 12 %, and
// the counts that give each unit 1..16 rows exactly.
inline std::vector<int32_t> candidates(int64_t extent, int64_t units) {
  const int64_t hi = std::min(extent, units);
  std::vector<int32_t> c;
  for (int64_t p = 1; p <= std::min<int64_t>(hi, 16); ++p) c.push_back(static_cast<int32_t>(p));
  for (double p = 18; p <= static_cast<double>(hi); p = std::ceil(p * 1.12))
    c.push_back(static_cast<int32_t>(p));
  for (int64_t q = 1; q <= 16; ++q) {
    const int64_t p = (extent + q - 1) / q;
    if (p <= hi) c.push_back(static_cast<int32_t>(p));
  }
  c.push_back(static_cast<int32_t>(hi));
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

}  // namespace mdetail

IPUML_INLINE MatrixCost matrix_cost(const emu::TargetModel& t, const MatrixProblem& p,
                                    const MatrixGrid& g, DType partials, double limit) {
  using A = MatrixProblem::Axis;
  using mdetail::ceil_frac;
  MatrixCost c;
  const double fb = ceil_frac(p.b, g.pb), fm = ceil_frac(p.m, g.pm), fn = ceil_frac(p.n, g.pn),
               fk = ceil_frac(p.k, g.pk);
  double fm_a = fm;
  if (p.a_rows > 0 && g.pm > 1) {
    const int64_t r = (p.m + g.pm - 1) / g.pm;
    const int64_t rows =
        std::min<int64_t>(p.a_rows, (r * p.row_num + p.halo + p.row_den - 1) / p.row_den);
    fm_a = static_cast<double>(rows) / static_cast<double>(p.a_rows);
  } else if (p.a_rows > 0) {
    fm_a = 1.0;
  }
  auto slice = [&](double bytes, unsigned axes, double fmx) {
    double f = 1.0;
    if (axes & A::kB) f *= fb;
    if (axes & A::kM) f *= fmx;
    if (axes & A::kN) f *= fn;
    if (axes & A::kK) f *= fk;
    return bytes * f;
  };
  const double a_slice = slice(p.a_bytes, p.a_axes, fm_a);
  const double b_slice = slice(p.b_bytes, p.b_axes, fm);
  const bool a_stays = p.a_resident && replication(g, p.a_axes) == 1;
  const bool b_stays = p.b_resident && replication(g, p.b_axes) == 1;
  const double recv = (a_stays ? 0.0 : a_slice) + (b_stays ? 0.0 : b_slice);
  const double held = a_slice + b_slice;  // what the vertex reads, received or resident
  const double out_es = static_cast<double>(dtype_size(p.out_dtype));
  const double ps = static_cast<double>(dtype_size(partials));
  const double block = static_cast<double>(p.out_elems) * fb * fm * fn;  // output elements
  const double sk = static_cast<double>(g.sk);
  // Partial sums need their own buffer when parts must be reduced, or when serial steps
  // accumulate in a type other than the output's; otherwise they accumulate in the output.
  const bool own_partials = g.pk > 1 || (g.sk > 1 && partials != p.out_dtype);
  const double partial = own_partials ? block * ps : 0.0;

  c.compute = t.compute_cycles(p.flops * fb * fm * fn * fk, held + block * out_es, p.dtype, p.amp,
                               static_cast<int64_t>(block)) +
              t.repeat_cycles() * (sk - 1.0);
  // On the units the grid will take (placement.hpp: a rectangle of a mesh).
  const RegionShape on = region_shape(t.machine(), g.units());
  c.exchange = t.region_exchange_cycles(recv, on.width, on.height);
  c.sync = t.sync_cycles() * sk;
  c.exchange_bytes = recv * static_cast<double>(g.units());
  c.vertices = g.units();
  c.temp = recv / sk + partial;
  if (g.pk > 1) {
    // The partials of each output element meet on one unit of the reduction and are added in
    // order there; the output comes out spread flat over those units.
    const int64_t R = std::clamp<int64_t>((p.out_elems + 15) / 16, 1, t.machine().units_per_device);
    const double per = std::ceil(static_cast<double>(p.out_elems) / static_cast<double>(R));
    const double rrecv = static_cast<double>(g.pk) * per * ps;
    c.compute += t.compute_cycles(static_cast<double>(g.pk) * per, rrecv + per * out_es, partials,
                                  false, static_cast<int64_t>(per));
    const RegionShape red = region_shape(t.machine(), R);
    c.exchange += t.region_exchange_cycles(rrecv, red.width, red.height);
    c.sync += t.sync_cycles();
    c.exchange_bytes += rrecv * static_cast<double>(R);
    c.reduce_units = R;
    c.vertices += R;
    // A unit that holds partials and receives others' for its share holds both at once.
    c.temp = std::max(c.temp, partial + rrecv);
  }
  c.fits = c.temp <= limit;
  return c;
}

IPUML_INLINE MatrixGrid plan_matrix(const emu::TargetModel& t, const MatrixProblem& p,
                                    DType partials, double limit) {
  const int64_t T = t.machine().units_per_device;
  const auto cb = mdetail::candidates(p.b, T), cm = mdetail::candidates(p.m, T),
             cn = mdetail::candidates(p.n, T), ck = mdetail::candidates(p.k, T);
  MatrixGrid best;
  MatrixCost best_cost;
  bool have = false;
  auto consider = [&](const MatrixGrid& g) {
    const MatrixCost c = matrix_cost(t, p, g, partials, limit);
    bool better = !have;
    if (!better) {
      if (c.fits != best_cost.fits) {
        better = c.fits;
      } else if (c.fits) {
        better = c.total() < best_cost.total() - 1e-9 ||
                 (std::fabs(c.total() - best_cost.total()) <= 1e-9 && g.units() < best.units());
      } else {
        better = c.temp < best_cost.temp;
      }
    }
    if (better) {
      have = true;
      best = g;
      best_cost = c;
    }
    return c.fits;
  };
  for (int32_t pb : cb)
    for (int32_t pm : cm) {
      if (int64_t{pb} * pm > T) break;
      for (int32_t pn : cn) {
        if (int64_t{pb} * pm * pn > T) break;
        for (int32_t pk : ck) {
          if (int64_t{pb} * pm * pn * pk > T) break;
          // Serial steps only where the parallel grid alone does not fit.
          const int64_t kper = (p.k + pk - 1) / pk;
          for (int32_t sk = 1; sk <= kper; sk *= 2)
            if (consider(MatrixGrid{pb, pm, pn, pk, sk})) break;
        }
      }
    }
  return best;
}

IPUML_INLINE std::string to_string(const MatrixGrid& g) {
  std::ostringstream os;
  os << 'b' << g.pb << " m" << g.pm << " n" << g.pn << " k" << g.pk << " s" << g.sk;
  return os.str();
}

}  // namespace ipuml::emu
