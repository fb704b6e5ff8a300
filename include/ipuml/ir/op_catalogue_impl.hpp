// Bodies of the op catalogue's inference and FLOP counts (compiled once in compiled mode).
#pragma once

#include <cmath>

#include <ipuml/ir/op_catalogue.hpp>

namespace ipuml::ir {

namespace catalogue_detail {

inline void expect_inputs(OpKind k, const std::vector<TensorMeta>& in, size_t lo, size_t hi) {
  IPUML_CHECK(in.size() >= lo && in.size() <= hi, op_name(k), ": expected ", lo,
              lo == hi ? "" : detail::str(" to ", hi), " inputs, got ", in.size());
}

inline void expect_float(OpKind k, const TensorMeta& t, const char* what = "input") {
  IPUML_CHECK(is_floating(t.dtype), op_name(k), ": expected a floating-point ", what,
              " (float32, float16 or bfloat16), got ", dtype_name(t.dtype));
}

// Two operands of one arithmetic op share their dtype (mixed precision is an explicit cast).
inline void expect_same_dtype(OpKind k, const TensorMeta& a, const TensorMeta& b,
                              const char* what) {
  IPUML_CHECK(a.dtype == b.dtype, op_name(k), ": the ", what, " has dtype ", dtype_name(b.dtype),
              " but the input has ", dtype_name(a.dtype),
              " (expected the same dtype; convert one with .to())");
}

inline void expect_rank(OpKind k, const TensorMeta& t, size_t rank, const char* what) {
  IPUML_CHECK(t.shape.size() == rank, op_name(k), ": expected ", what, " of rank ", rank,
              ", got shape ", shape_str(t.shape));
}

inline Shape reduce_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<bool> red(s.size(), dims.empty());
  for (auto d : dims) red[d] = true;
  Shape out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!red[i])
      out.push_back(s[i]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

inline void check_dims(OpKind k, const std::vector<int64_t>& dims, size_t rank) {
  std::vector<bool> seen(rank, false);
  for (auto d : dims) {
    IPUML_CHECK(d >= 0 && static_cast<size_t>(d) < std::max<size_t>(rank, 1), op_name(k), ": dim ",
                d, " out of range for rank ", rank);
    if (rank == 0) continue;
    IPUML_CHECK(!seen[d], op_name(k), ": dim ", d, " appears twice in ", detail::str(dims));
    seen[d] = true;
  }
}

// A fused optimizer update's results: `states` state tensors and the gradient (named by `what`,
// the gradient last), float32 of the param's shape, then one-element float32 lr [and step]; the
// new values of the states are shaped like the param.
inline std::vector<TensorMeta> update_results(const char* name, const std::vector<TensorMeta>& in,
                                              size_t states, const std::vector<const char*>& what) {
  for (size_t i = 0; i < states + 1; ++i) {
    const TensorMeta& t = in[i];
    const char* w = what[i == states ? what.size() - 1 : i];
    IPUML_CHECK(t.dtype == DType::Float32, name, ": expected a float32 ", w, ", got ",
                dtype_name(t.dtype));
    IPUML_CHECK(t.shape == in[0].shape, name, ": ", w, " has shape ", shape_str(t.shape),
                " but the param has shape ", shape_str(in[0].shape));
  }
  for (size_t i = states + 1; i < in.size(); ++i)
    IPUML_CHECK(in[i].dtype == DType::Float32 && in[i].numel() == 1, name, ": expected ",
                i == states + 1 ? "lr" : "step", " as a one-element float32 tensor, got ",
                dtype_name(in[i].dtype), " ", shape_str(in[i].shape));
  return std::vector<TensorMeta>(states, in[0]);
}

inline void check_geometry(OpKind k, const Attrs& a) {
  for (auto* v : {&a.kernel, &a.stride, &a.padding})
    IPUML_CHECK(v->size() == 2, op_name(k), ": expected 2-d kernel/stride/padding, got ",
                detail::str(*v));
  for (int i = 0; i < 2; ++i) {
    IPUML_CHECK(a.kernel[i] > 0 && a.stride[i] > 0 && a.padding[i] >= 0, op_name(k),
                ": kernel and stride must be positive and padding non-negative, got kernel ",
                detail::str(a.kernel), " stride ", detail::str(a.stride), " padding ",
                detail::str(a.padding));
  }
}

// Fills and random draws: the shape and dtype are attributes.
inline std::vector<TensorMeta> infer_creation(OpKind k, const Attrs& a,
                                              const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  expect_inputs(k, in, 0, 0);
  for (auto d : a.shape) IPUML_CHECK(d >= 0, name, ": negative size in shape ", shape_str(a.shape));
  return {{a.shape, a.dtype}};
}

// One input, one output of its shape: neg, abs, sign and copy take integers too, the other
// functions floating point only, and a cast any dtype.
inline std::vector<TensorMeta> infer_unary(OpKind k, const Attrs& a,
                                           const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  switch (k) {
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Sign:
    case OpKind::Copy: {
      expect_inputs(k, in, 1, 1);
      IPUML_CHECK(in[0].dtype != DType::Bool || k == OpKind::Copy, name, ": not defined for bool");
      IPUML_CHECK(is_floating(in[0].dtype) || is_integral(in[0].dtype) || k == OpKind::Copy, name,
                  ": expected a floating-point or an integer type, got ", dtype_name(in[0].dtype));
      return {in[0]};
    }
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::Relu:
    case OpKind::Gelu:
    case OpKind::Clamp:
    case OpKind::PowScalar: {
      expect_inputs(k, in, 1, 1);
      expect_float(k, in[0]);
      return {in[0]};
    }
    case OpKind::Cast:
      expect_inputs(k, in, 1, 1);
      return {{in[0].shape, a.dtype}};
    default:
      break;
  }
  fail("infer: unknown op");
}

// Arithmetic, comparisons and where over NumPy-broadcast operands of one dtype.
inline std::vector<TensorMeta> infer_broadcast(OpKind k, const Attrs&,
                                               const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  switch (k) {
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Pow:
    case OpKind::Maximum:
    case OpKind::Minimum:
    case OpKind::Eq:
    case OpKind::Ne:
    case OpKind::Lt:
    case OpKind::Le:
    case OpKind::Gt:
    case OpKind::Ge:
    case OpKind::LogicalAnd: {
      expect_inputs(k, in, 2, 2);
      IPUML_CHECK(in[0].dtype == in[1].dtype, name, ": dtypes differ: ", dtype_name(in[0].dtype),
                  " and ", dtype_name(in[1].dtype), " (expected the same dtype; use .to())");
      const bool cmp = op_has(k, kBool);
      if (k == OpKind::LogicalAnd) {
        IPUML_CHECK(in[0].dtype == DType::Bool, name, ": expected bool inputs, got ",
                    dtype_name(in[0].dtype));
      } else if (k == OpKind::Div || k == OpKind::Pow) {
        expect_float(k, in[0]);
      } else {
        IPUML_CHECK(is_floating(in[0].dtype) || is_integral(in[0].dtype) ||
                        (cmp && in[0].dtype == DType::Bool),
                    name, ": expected a floating-point or an integer type, got ",
                    dtype_name(in[0].dtype));
      }
      Shape s = broadcast_shapes(in[0].shape, in[1].shape, name);
      return {{s, cmp ? DType::Bool : in[0].dtype}};
    }
    case OpKind::Where: {
      expect_inputs(k, in, 3, 3);
      IPUML_CHECK(in[0].dtype == DType::Bool, name, ": condition must be bool, got ",
                  dtype_name(in[0].dtype));
      IPUML_CHECK(in[1].dtype == in[2].dtype, name, ": branches have different dtypes ",
                  dtype_name(in[1].dtype), " and ", dtype_name(in[2].dtype));
      Shape s =
          broadcast_shapes(broadcast_shapes(in[0].shape, in[1].shape, name), in[2].shape, name);
      return {{s, in[1].dtype}};
    }
    default:
      break;
  }
  fail("infer: unknown op");
}

// (the gradient, the forward input) -> the input's gradient.
inline std::vector<TensorMeta> infer_act_grad(OpKind k, const Attrs&,
                                              const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  expect_inputs(k, in, 2, 2);
  expect_float(k, in[0]);
  expect_same_dtype(k, in[0], in[1], "second operand");
  IPUML_CHECK(in[0].shape == in[1].shape, name, ": shapes differ");
  return {in[0]};
}

// Reductions over a.dims (every dim when empty); the *Dim and Arg* ops also give indices.
inline std::vector<TensorMeta> infer_reduce(OpKind k, const Attrs& a,
                                            const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  switch (k) {
    case OpKind::Sum:
    case OpKind::Amax:
    case OpKind::Amin: {
      expect_inputs(k, in, 1, 1);
      check_dims(k, a.dims, in[0].shape.size());
      if (k != OpKind::Sum)
        IPUML_CHECK(in[0].numel() > 0, name, ": cannot reduce an empty tensor of shape ",
                    shape_str(in[0].shape));
      IPUML_CHECK(in[0].dtype != DType::Bool || k == OpKind::Sum, name, ": not defined for bool");
      DType out = in[0].dtype;
      if (is_integral(out) || out == DType::Bool) out = k == OpKind::Sum ? DType::Int64 : out;
      // Sum's flag: a floating sum accumulated and returned in float32.
      if (k == OpKind::Sum && a.flag && is_floating(out)) out = DType::Float32;
      return {{reduce_shape(in[0].shape, a.dims, a.keepdim), out}};
    }
    case OpKind::MaxDim:
    case OpKind::MinDim:
    case OpKind::ArgMax:
    case OpKind::ArgMin: {
      expect_inputs(k, in, 1, 1);
      IPUML_CHECK(a.dims.size() <= 1, name, ": expects at most one dim");
      check_dims(k, a.dims, in[0].shape.size());
      IPUML_CHECK(in[0].numel() > 0, name, ": cannot reduce an empty tensor");
      if (k == OpKind::MaxDim || k == OpKind::MinDim) {
        IPUML_CHECK(a.dims.size() == 1, name, ": expects one dim");
        Shape s = reduce_shape(in[0].shape, a.dims, a.keepdim);
        return {{s, in[0].dtype}, {s, DType::Int64}};
      }
      return {
          {reduce_shape(in[0].shape, a.dims, a.dims.empty() ? false : a.keepdim), DType::Int64}};
    }
    default:
      break;
  }
  fail("infer: unknown op");
}

// Element moves: the result's shape from the attributes or the inputs, the input's dtype.
inline std::vector<TensorMeta> infer_view(OpKind k, const Attrs& a,
                                          const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  switch (k) {
    case OpKind::Reshape:
      expect_inputs(k, in, 1, 1);
      IPUML_CHECK(numel(a.shape) == in[0].numel(), "reshape: cannot reshape a tensor of shape ",
                  shape_str(in[0].shape), " (", in[0].numel(), " elements) into shape ",
                  shape_str(a.shape), " (", numel(a.shape), " elements)");
      return {{a.shape, in[0].dtype}};
    case OpKind::Permute: {
      expect_inputs(k, in, 1, 1);
      IPUML_CHECK(a.dims.size() == in[0].shape.size(), "permute: expected ", in[0].shape.size(),
                  " dims for shape ", shape_str(in[0].shape), ", got ", detail::str(a.dims));
      check_dims(k, a.dims, in[0].shape.size());
      Shape s;
      for (auto d : a.dims) s.push_back(in[0].shape[d]);
      return {{s, in[0].dtype}};
    }
    case OpKind::Slice: {
      expect_inputs(k, in, 1, 1);
      IPUML_CHECK(!in[0].shape.empty(), "slice: cannot be applied to a 0-dim tensor");
      IPUML_CHECK(a.dims.size() == 1, name, ": expects one dim");
      check_dims(k, a.dims, in[0].shape.size());
      const int64_t size = in[0].shape[a.dims[0]];
      IPUML_CHECK(a.step > 0 && a.start >= 0 && a.start <= a.end && a.end <= size, "slice: range [",
                  a.start, ", ", a.end, ") step ", a.step, " is invalid for dim ", a.dims[0],
                  " of size ", size);
      Shape s = in[0].shape;
      s[a.dims[0]] = (a.end - a.start + a.step - 1) / a.step;
      return {{s, in[0].dtype}};
    }
    case OpKind::Expand: {
      expect_inputs(k, in, 1, 1);
      const Shape& s = in[0].shape;
      IPUML_CHECK(a.shape.size() >= s.size(), "expand: cannot expand shape ", shape_str(s),
                  " to fewer dims ", shape_str(a.shape));
      const size_t off = a.shape.size() - s.size();
      for (size_t i = 0; i < s.size(); ++i)
        IPUML_CHECK(s[i] == a.shape[off + i] || s[i] == 1, "expand: cannot expand shape ",
                    shape_str(s), " to ", shape_str(a.shape), " (dim ", off + i, ": ", s[i],
                    " is neither 1 nor ", a.shape[off + i], ")");
      return {{a.shape, in[0].dtype}};
    }
    case OpKind::Cat: {
      IPUML_CHECK(!in.empty(), "cat: expected at least one tensor");
      for (size_t i = 0; i < in.size(); ++i)
        IPUML_CHECK(!in[i].shape.empty(), "cat: tensor ", i,
                    " is 0-dim, and 0-dim tensors cannot be concatenated");
      IPUML_CHECK(a.dims.size() == 1, name, ": expects one dim");
      const int64_t d = a.dims[0];
      check_dims(k, a.dims, in[0].shape.size());
      Shape s = in[0].shape;
      s[d] = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        IPUML_CHECK(in[i].dtype == in[0].dtype, "cat: tensor ", i, " has dtype ",
                    dtype_name(in[i].dtype), ", expected ", dtype_name(in[0].dtype));
        IPUML_CHECK(in[i].shape.size() == in[0].shape.size(), "cat: tensor ", i, " has shape ",
                    shape_str(in[i].shape), ", expected rank ", in[0].shape.size());
        for (size_t j = 0; j < s.size(); ++j)
          IPUML_CHECK(static_cast<int64_t>(j) == d || in[i].shape[j] == in[0].shape[j],
                      "cat: tensor ", i, " has shape ", shape_str(in[i].shape),
                      ", which differs from ", shape_str(in[0].shape), " outside dim ", d);
        s[d] += in[i].shape[d];
      }
      return {{s, in[0].dtype}};
    }
    default:
      break;
  }
  fail("infer: unknown op");
}

// Reads by an index tensor: index_select(x, idx) along a.dims[0], gather(x, idx) -> idx's shape.
inline std::vector<TensorMeta> infer_index(OpKind k, const Attrs& a,
                                           const std::vector<TensorMeta>& in) {
  switch (k) {
    case OpKind::IndexSelect: {
      expect_inputs(k, in, 2, 2);
      IPUML_CHECK(in[1].dtype == DType::Int64 || in[1].dtype == DType::Int32,
                  "index_select: index must be int64 or int32, got ", dtype_name(in[1].dtype));
      IPUML_CHECK(in[1].shape.size() == 1, "index_select: index must be 1-d, got shape ",
                  shape_str(in[1].shape));
      IPUML_CHECK(!in[0].shape.empty() && a.dims.size() == 1,
                  "index_select: expects one dim of a tensor of rank >= 1, got shape ",
                  shape_str(in[0].shape));
      check_dims(k, a.dims, in[0].shape.size());
      Shape s = in[0].shape;
      s[a.dims[0]] = in[1].shape[0];
      return {{s, in[0].dtype}};
    }
    case OpKind::Gather: {
      expect_inputs(k, in, 2, 2);
      IPUML_CHECK(is_integral(in[1].dtype), "gather: index must be int64, got ",
                  dtype_name(in[1].dtype));
      IPUML_CHECK(in[1].shape.size() == in[0].shape.size(), "gather: index shape ",
                  shape_str(in[1].shape), " must have the rank of the input ",
                  shape_str(in[0].shape));
      IPUML_CHECK(a.dims.size() == 1, "gather: expects one dim");
      check_dims(k, a.dims, in[0].shape.size());
      for (size_t i = 0; i < in[0].shape.size(); ++i)
        IPUML_CHECK(static_cast<int64_t>(i) == a.dims[0] || in[1].shape[i] <= in[0].shape[i],
                    "gather: index shape ", shape_str(in[1].shape), " exceeds input shape ",
                    shape_str(in[0].shape), " in dim ", i);
      return {{in[1].shape, in[0].dtype}};
    }
    default:
      break;
  }
  fail("infer: unknown op");
}

// Adds by an index tensor into a result of shape a.shape: index_add(idx, src) along a.dims[0],
// scatter_add(idx, src) with idx shaped like src.
inline std::vector<TensorMeta> infer_scatter(OpKind k, const Attrs& a,
                                             const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  switch (k) {
    case OpKind::IndexAdd: {
      expect_inputs(k, in, 2, 2);
      IPUML_CHECK(in[0].shape.size() == 1 && is_integral(in[0].dtype), name,
                  ": index must be a 1-d integer tensor");
      IPUML_CHECK(!a.shape.empty() && a.dims.size() == 1, name,
                  ": expects one dim of a result of rank >= 1, got shape ", shape_str(a.shape));
      check_dims(k, a.dims, a.shape.size());
      Shape expect = a.shape;
      expect[a.dims[0]] = in[0].shape[0];
      IPUML_CHECK(in[1].shape == expect, name, ": source shape ", shape_str(in[1].shape),
                  ", expected ", shape_str(expect));
      return {{a.shape, in[1].dtype}};
    }
    case OpKind::ScatterAdd: {
      expect_inputs(k, in, 2, 2);
      IPUML_CHECK(is_integral(in[0].dtype) && in[0].shape == in[1].shape, name,
                  ": index must be an integer tensor shaped like the source");
      check_dims(k, a.dims, a.shape.size());
      return {{a.shape, in[1].dtype}};
    }
    default:
      break;
  }
  fail("infer: unknown op");
}

// Matrix products (a.flag / a.flag2: the first / second operand transposed) and convolutions;
// a convolution's gradients take their result's shape from a.shape.
inline std::vector<TensorMeta> infer_matrix(OpKind k, const Attrs& a,
                                            const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  switch (k) {
    case OpKind::MatMul: {
      expect_inputs(k, in, 2, 2);
      expect_float(k, in[0]);
      expect_same_dtype(k, in[0], in[1], "second operand");
      const Shape& sa = in[0].shape;
      const Shape& sb = in[1].shape;
      IPUML_CHECK(sa.size() >= 2 && sb.size() >= 2, "matmul: expected operands of rank >= 2, got ",
                  shape_str(sa), " and ", shape_str(sb));
      const int64_t m = a.flag ? sa[sa.size() - 1] : sa[sa.size() - 2];
      const int64_t ka = a.flag ? sa[sa.size() - 2] : sa[sa.size() - 1];
      const int64_t kb = a.flag2 ? sb[sb.size() - 1] : sb[sb.size() - 2];
      const int64_t n = a.flag2 ? sb[sb.size() - 2] : sb[sb.size() - 1];
      IPUML_CHECK(ka == kb, "matmul: inner dimensions differ: ", shape_str(sa), " @ ",
                  shape_str(sb), " (", ka, " vs ", kb, ")");
      Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
      Shape s = broadcast_shapes(ba, bb, "matmul (batch dims)");
      s.push_back(m);
      s.push_back(n);
      return {{s, in[0].dtype}};
    }
    case OpKind::Conv: {
      expect_inputs(k, in, 2, 3);
      expect_rank(k, in[0], 4, "input");
      expect_rank(k, in[1], 4, "weight");
      expect_float(k, in[0]);
      expect_same_dtype(k, in[0], in[1], "weight");
      if (in.size() == 3) expect_same_dtype(k, in[0], in[2], "bias");
      check_geometry(k, a);
      IPUML_CHECK(a.dilation.size() == 2 && a.dilation[0] > 0 && a.dilation[1] > 0, name,
                  ": dilation must be positive, got ", detail::str(a.dilation));
      const Shape& x = in[0].shape;
      const Shape& w = in[1].shape;
      IPUML_CHECK(a.groups > 0 && x[1] % a.groups == 0 && w[0] % a.groups == 0,
                  "conv: groups=", a.groups, " must divide input channels ", x[1],
                  " and output channels ", w[0]);
      IPUML_CHECK(w[1] * a.groups == x[1], "conv: weight of shape ", shape_str(w), " expects ",
                  w[1] * a.groups, " input channels, but the input of shape ", shape_str(x),
                  " has ", x[1]);
      IPUML_CHECK(w[2] == a.kernel[0] && w[3] == a.kernel[1], name, ": weight shape ", shape_str(w),
                  " disagrees with kernel ", detail::str(a.kernel));
      if (in.size() == 3)
        IPUML_CHECK(in[2].shape == Shape{w[0]}, "conv: bias of shape ", shape_str(in[2].shape),
                    ", expected [", w[0], "]");
      const int64_t oh = window_out_size(x[2], w[2], a.stride[0], a.padding[0], a.dilation[0]);
      const int64_t ow = window_out_size(x[3], w[3], a.stride[1], a.padding[1], a.dilation[1]);
      IPUML_CHECK(oh > 0 && ow > 0, "conv: input of spatial size ", x[2], "x", x[3],
                  " is too small for kernel ", w[2], "x", w[3], " with padding ",
                  detail::str(a.padding), " and dilation ", detail::str(a.dilation));
      return {{{x[0], w[0], oh, ow}, in[0].dtype}};
    }
    case OpKind::ConvBackwardInput:
    case OpKind::ConvBackwardWeight:
      expect_inputs(k, in, 2, 2);
      expect_float(k, in[0]);
      expect_same_dtype(k, in[0], in[1], "second operand");
      return {{a.shape, in[0].dtype}};
    default:
      break;
  }
  fail("infer: unknown op");
}

// 2-d pooling over [N, C, H, W]; the gradients take their result's shape from a.shape.
inline std::vector<TensorMeta> infer_pool(OpKind k, const Attrs& a,
                                          const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  switch (k) {
    case OpKind::MaxPool:
    case OpKind::AvgPool: {
      expect_inputs(k, in, 1, 1);
      expect_rank(k, in[0], 4, "input");
      expect_float(k, in[0]);
      check_geometry(k, a);
      for (int i = 0; i < 2; ++i)
        IPUML_CHECK(a.padding[i] * 2 <= a.kernel[i], name, ": padding ", detail::str(a.padding),
                    " must be at most half the kernel ", detail::str(a.kernel));
      const Shape& x = in[0].shape;
      const DType x_dtype = in[0].dtype;
      const int64_t oh = window_out_size(x[2], a.kernel[0], a.stride[0], a.padding[0]);
      const int64_t ow = window_out_size(x[3], a.kernel[1], a.stride[1], a.padding[1]);
      IPUML_CHECK(oh > 0 && ow > 0, name, ": input of spatial size ", x[2], "x", x[3],
                  " is smaller than the kernel ", detail::str(a.kernel));
      Shape s{x[0], x[1], oh, ow};
      if (k == OpKind::MaxPool) return {{s, x_dtype}, {s, DType::Int64}};
      return {{s, x_dtype}};
    }
    case OpKind::MaxPoolBackward:
      expect_inputs(k, in, 2, 2);
      expect_float(k, in[0]);
      return {{a.shape, in[0].dtype}};
    case OpKind::AvgPoolBackward:
    case OpKind::AdaptiveAvgPoolBackward:
      expect_inputs(k, in, 1, 1);
      expect_float(k, in[0]);
      return {{a.shape, in[0].dtype}};
    case OpKind::AdaptiveAvgPool: {
      expect_inputs(k, in, 1, 1);
      expect_rank(k, in[0], 4, "input");
      expect_float(k, in[0]);
      IPUML_CHECK(a.shape.size() == 2 && a.shape[0] > 0 && a.shape[1] > 0,
                  "adaptive_avg_pool2d: output size must be two positive numbers, got ",
                  shape_str(a.shape));
      return {{{in[0].shape[0], in[0].shape[1], a.shape[0], a.shape[1]}, in[0].dtype}};
    }
    default:
      break;
  }
  fail("infer: unknown op");
}

// Softmax along a.dims[0]: the input's shape and dtype.
inline std::vector<TensorMeta> infer_softmax(OpKind k, const Attrs& a,
                                             const std::vector<TensorMeta>& in) {
  expect_inputs(k, in, 1, 1);
  expect_float(k, in[0]);
  check_dims(k, a.dims, in[0].shape.size());
  return {in[0]};
}

// LayerNorm(x, [w], [b]) -> y, mean, rstd; LayerNormBackward(dy, x, mean, rstd, [w]) -> dx;
// LayerNormParamBackward(dy, x, mean, rstd) -> dweight, dbias.
inline std::vector<TensorMeta> infer_layer_norm(OpKind k, const Attrs& a,
                                                const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  // dims[0]: the first normalised dim; flag/flag2: weight/bias present (LayerNorm), flag:
  // weight present (LayerNormBackward). mean and rstd are float32 [leading dims].
  const bool fwd = k == OpKind::LayerNorm;
  const size_t xi = fwd ? 0 : 1;
  const size_t extra = fwd ? (a.flag ? 1 : 0) + (a.flag2 ? 1 : 0)
                           : (k == OpKind::LayerNormBackward && a.flag ? 1 : 0);
  const size_t n = (fwd ? 1 : 4) + extra;
  expect_inputs(k, in, n, n);
  const TensorMeta& x = in[xi];
  expect_float(k, x);
  IPUML_CHECK(
      a.dims.size() == 1 && a.dims[0] >= 0 && a.dims[0] < static_cast<int64_t>(x.shape.size()),
      name, ": first normalised dim ", detail::str(a.dims), " is out of range for input of shape ",
      shape_str(x.shape));
  const Shape lead(x.shape.begin(), x.shape.begin() + a.dims[0]);
  const Shape norm(x.shape.begin() + a.dims[0], x.shape.end());
  if (!fwd) {
    IPUML_CHECK(in[0].shape == x.shape && in[0].dtype == x.dtype, name, ": gradient of shape ",
                shape_str(in[0].shape), " and ", dtype_name(in[0].dtype),
                " does not match the input of shape ", shape_str(x.shape), " and ",
                dtype_name(x.dtype));
    for (size_t i : {size_t{2}, size_t{3}})
      IPUML_CHECK(in[i].shape == lead && in[i].dtype == DType::Float32, name,
                  ": mean/rstd of shape ", shape_str(in[i].shape), " and ", dtype_name(in[i].dtype),
                  ", expected float32 ", shape_str(lead));
  }
  for (size_t i = (fwd ? 1 : 4); i < in.size(); ++i) {
    IPUML_CHECK(in[i].shape == norm, name, ": weight/bias of shape ", shape_str(in[i].shape),
                ", expected the normalised shape ", shape_str(norm));
    expect_same_dtype(k, x, in[i], "weight/bias");
  }
  if (fwd) return {{x.shape, x.dtype}, {lead, DType::Float32}, {lead, DType::Float32}};
  if (k == OpKind::LayerNormBackward) return {{x.shape, x.dtype}};
  return {{norm, x.dtype}, {norm, x.dtype}};
}

inline std::vector<TensorMeta> infer_batch_norm(OpKind k, const Attrs& a,
                                                const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  // x [N, C, ...] float32; scalar: eps; flag2: weight and bias [C] given (BatchNorm,
  // BatchNormInference) or weight given (BatchNormBackward); flag: a residual shaped like x
  // added before the activation; mode 1: ReLU after. Statistics are float32 in x's rank,
  // [1, C, 1, ...], so that every output of the op has its channels in dim 1.
  //   BatchNorm(x, [w, b], [r]) -> y, mean, biased var
  //   BatchNormInference(x, mean [C], var [C], [w, b], [r]) -> y
  //   BatchNormBackward(dy, x, mean, var, [w], [y when mode 1]) -> dx, dw, db (dw, db sum
  //   over the batch in the statistics' shape)
  const bool bwd = k == OpKind::BatchNormBackward;
  const bool inf = k == OpKind::BatchNormInference;
  IPUML_CHECK(a.mode == 0 || a.mode == 1, name, ": activation mode ", a.mode,
              " is not 0 (none) or 1 (ReLU)");
  IPUML_CHECK(!(bwd && a.flag), name,
              ": the residual's gradient is the output's (flag must "
              "be off)");
  const size_t xi = bwd ? 1 : 0;
  const size_t n = (bwd   ? 4
                    : inf ? 3
                          : 1) +
                   (a.flag2 ? (bwd ? 1 : 2) : 0) + (a.flag ? 1 : 0) + (bwd && a.mode == 1 ? 1 : 0);
  expect_inputs(k, in, n, n);
  const TensorMeta& x = in[xi];
  IPUML_CHECK(x.dtype == DType::Float32, name, ": expected a float32 input, got ",
              dtype_name(x.dtype));
  IPUML_CHECK(x.shape.size() >= 2, name, ": expected an input of rank >= 2 [N, C, ...], got ",
              shape_str(x.shape));
  const int64_t c = x.shape[1];
  Shape cs(x.shape.size(), 1);
  cs[1] = c;
  size_t i = xi + 1;
  if (bwd) {
    IPUML_CHECK(in[0].shape == x.shape && in[0].dtype == x.dtype, name, ": gradient of shape ",
                shape_str(in[0].shape), " and ", dtype_name(in[0].dtype),
                " does not match the input of shape ", shape_str(x.shape), " and ",
                dtype_name(x.dtype));
  }
  if (bwd || inf) {
    const Shape want = bwd ? cs : Shape{c};
    for (size_t j : {i, i + 1})
      IPUML_CHECK(in[j].shape == want && in[j].dtype == DType::Float32, name,
                  ": mean/var of shape ", shape_str(in[j].shape), " and ", dtype_name(in[j].dtype),
                  ", expected float32 ", shape_str(want));
    i += 2;
  }
  for (size_t j = 0; j < (a.flag2 ? (bwd ? 1u : 2u) : 0u); ++j, ++i)
    IPUML_CHECK(in[i].shape == Shape{c} && in[i].dtype == x.dtype, name, ": weight/bias of shape ",
                shape_str(in[i].shape), " and ", dtype_name(in[i].dtype), ", expected ",
                dtype_name(x.dtype), " [", c, "]");
  if (i < in.size())  // the residual, or the output whose sign masks the ReLU's gradient
    IPUML_CHECK(in[i].shape == x.shape && in[i].dtype == x.dtype, name,
                bwd ? ": output of shape " : ": residual of shape ", shape_str(in[i].shape),
                " and ", dtype_name(in[i].dtype), " does not match the input of shape ",
                shape_str(x.shape), " and ", dtype_name(x.dtype));
  if (inf) return {{x.shape, x.dtype}};
  if (bwd) return {{x.shape, x.dtype}, {cs, x.dtype}, {cs, x.dtype}};
  return {{x.shape, x.dtype}, {cs, DType::Float32}, {cs, DType::Float32}};
}

// Attention(q, k, v, [bias]) -> out, logsumexp;
// AttentionBackward(dout, q, k, v, out, logsumexp, [bias]) -> dq, dk, dv.
inline std::vector<TensorMeta> infer_attention(OpKind k, const Attrs& a,
                                               const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  // q [B.., L, E], k [B.., S, E], v [B.., S, Ev] with equal batch dims; scalar: the scale;
  // flag: causal; flag2: an additive bias of q's rank broadcasting to [B.., L, S].
  const bool fwd = k == OpKind::Attention;
  const size_t qi = fwd ? 0 : 1;
  const size_t n = (fwd ? 3 : 6) + (a.flag2 ? 1 : 0);
  expect_inputs(k, in, n, n);
  const TensorMeta &q = in[qi], &kk = in[qi + 1], &v = in[qi + 2];
  expect_float(k, q);
  expect_same_dtype(k, q, kk, "key");
  expect_same_dtype(k, q, v, "value");
  const size_t r = q.shape.size();
  IPUML_CHECK(r >= 2 && kk.shape.size() == r && v.shape.size() == r, name,
              ": expected query, key and value of one rank >= 2, got ", shape_str(q.shape), ", ",
              shape_str(kk.shape), " and ", shape_str(v.shape));
  bool fits = kk.shape[r - 1] == q.shape[r - 1] && v.shape[r - 2] == kk.shape[r - 2];
  for (size_t i = 0; i + 2 < r; ++i)
    fits = fits && kk.shape[i] == q.shape[i] && v.shape[i] == q.shape[i];
  IPUML_CHECK(fits, name, ": key ", shape_str(kk.shape), " and value ", shape_str(v.shape),
              " do not fit query ", shape_str(q.shape),
              " (expected equal batch dims, key [.., S, E], value [.., S, Ev])");
  const int64_t l = q.shape[r - 2], s = kk.shape[r - 2];
  if (a.flag2) {
    const TensorMeta& b = in.back();
    expect_same_dtype(k, q, b, "bias");
    bool ok = b.shape.size() == r && (b.shape[r - 2] == 1 || b.shape[r - 2] == l) &&
              (b.shape[r - 1] == 1 || b.shape[r - 1] == s);
    for (size_t i = 0; ok && i + 2 < r; ++i) ok = b.shape[i] == 1 || b.shape[i] == q.shape[i];
    IPUML_CHECK(ok, name, ": bias of shape ", shape_str(b.shape), " does not broadcast to [",
                shape_str(Shape(q.shape.begin(), q.shape.end() - 2)), ", ", l, ", ", s, "]");
  }
  Shape os = q.shape;
  os[r - 1] = v.shape[r - 1];
  const Shape lse(q.shape.begin(), q.shape.end() - 1);
  if (fwd) return {{os, q.dtype}, {lse, DType::Float32}};
  IPUML_CHECK(in[0].shape == os && in[0].dtype == q.dtype && in[4].shape == os &&
                  in[5].shape == lse && in[5].dtype == DType::Float32,
              name, ": gradient ", shape_str(in[0].shape), ", output ", shape_str(in[4].shape),
              " and logsumexp ", shape_str(in[5].shape), " do not fit the query ",
              shape_str(q.shape));
  return {q, kk, v};
}

// Fused optimizer updates: the new values of the param and its state, float32.
inline std::vector<TensorMeta> infer_update(OpKind k, const Attrs& a,
                                            const std::vector<TensorMeta>& in) {
  const char* name = op_name(k);
  switch (k) {
    case OpKind::AdamUpdate: {
      // (param, exp_avg, exp_avg_sq, [max_exp_avg_sq], grad, lr, step) -> the new param,
      // exp_avg, exp_avg_sq [, max_exp_avg_sq], each the same shape, float32. lr and step are
      // one-element float32 tensors (the step already counts this update: t >= 1). reals: beta1,
      // beta2, eps, weight decay; mode: how the decay applies (0 none, 1 L2: grad += wd * param
      // as torch.optim.Adam, 2 decoupled: param *= 1 - lr * wd as torch.optim.AdamW); flag:
      // AMSGrad.
      const size_t states = a.flag ? 4 : 3;
      expect_inputs(k, in, states + 3, states + 3);
      IPUML_CHECK(a.reals.size() == 4, name, ": expected 4 scalars (beta1, beta2, eps, ",
                  "weight decay), got ", a.reals.size());
      const double b1 = a.reals[0], b2 = a.reals[1], eps = a.reals[2], wd = a.reals[3];
      IPUML_CHECK(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1, name, ": betas (", b1, ", ", b2,
                  ") must be in [0, 1)");
      IPUML_CHECK(eps >= 0 && std::isfinite(eps) && wd >= 0 && std::isfinite(wd), name, ": eps ",
                  eps, " and weight decay ", wd, " must be finite and >= 0");
      IPUML_CHECK(a.mode >= 0 && a.mode <= 2, name, ": weight decay mode ", a.mode,
                  " is not 0 (none), 1 (L2) or 2 (decoupled)");
      return update_results(name, in, states,
                            {"param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "grad"});
    }
    case OpKind::SgdUpdate: {
      // (param, [momentum_buffer], grad, lr, [step]) -> the new param [, momentum_buffer], each
      // the same shape, float32; lr and step one-element float32 tensors. reals: momentum,
      // dampening, weight decay; flag: a momentum buffer (exactly when momentum != 0); flag2:
      // Nesterov momentum; mode: how the buffer starts (0: from its value, zero before the first
      // step, so momentum * 0 + grad is the gradient; 1: from the step input, which already
      // counts this update: buf = grad when it is 1, as torch.optim.SGD's lazy buffer).
      const size_t states = a.flag ? 2 : 1;
      const size_t scalars = a.mode == 1 ? 2 : 1;
      expect_inputs(k, in, states + 1 + scalars, states + 1 + scalars);
      IPUML_CHECK(a.reals.size() == 3, name, ": expected 3 scalars (momentum, dampening, ",
                  "weight decay), got ", a.reals.size());
      const double mom = a.reals[0], damp = a.reals[1], wd = a.reals[2];
      IPUML_CHECK(mom >= 0 && std::isfinite(mom) && wd >= 0 && std::isfinite(wd), name,
                  ": momentum ", mom, " and weight decay ", wd, " must be finite and >= 0");
      IPUML_CHECK(damp >= 0 && damp <= 1, name, ": dampening ", damp, " must be in [0, 1]");
      IPUML_CHECK(a.flag == (mom != 0), name, ": a momentum buffer goes with momentum != 0 (got ",
                  "momentum ", mom, a.flag ? " and a buffer)" : " and no buffer)");
      IPUML_CHECK(!a.flag2 || (mom > 0 && damp == 0), name,
                  ": nesterov momentum requires momentum > 0 and dampening = 0");
      IPUML_CHECK(a.mode == 0 || (a.mode == 1 && a.flag), name, ": buffer mode ", a.mode,
                  " is not 0 (from its value) or 1 (from the step, with momentum)");
      return update_results(name, in, states, {"param", "momentum_buffer", "grad"});
    }
    default:
      break;
  }
  fail("infer: unknown op");
}

}  // namespace catalogue_detail

// Each category's rule beside its family: infer_* above, one per OpCategory.
IPUML_INLINE std::vector<TensorMeta> infer(OpKind k, const Attrs& a,
                                           const std::vector<TensorMeta>& in) {
  using namespace catalogue_detail;
  using C = OpCategory;
  switch (op_category(k)) {
    case C::Creation:
      return infer_creation(k, a, in);
    case C::Unary:
      return infer_unary(k, a, in);
    case C::Broadcast:
      return infer_broadcast(k, a, in);
    case C::ActGrad:
      return infer_act_grad(k, a, in);
    case C::Reduce:
      return infer_reduce(k, a, in);
    case C::View:
      return infer_view(k, a, in);
    case C::Index:
      return infer_index(k, a, in);
    case C::Scatter:
      return infer_scatter(k, a, in);
    case C::Matrix:
      return infer_matrix(k, a, in);
    case C::Pool:
      return infer_pool(k, a, in);
    case C::Softmax:
      return infer_softmax(k, a, in);
    case C::LayerNorm:
      return infer_layer_norm(k, a, in);
    case C::BatchNorm:
      return infer_batch_norm(k, a, in);
    case C::Attention:
      return infer_attention(k, a, in);
    case C::Update:
      return infer_update(k, a, in);
    case C::Count:
      break;
  }
  fail("infer: unknown op");
}

namespace catalogue_detail {

// per: the op's flops per multiply-add.
inline double matrix_flops(OpKind k, const Attrs& a, const std::vector<TensorMeta>& in,
                           double n_out, double per) {
  switch (k) {
    case OpKind::MatMul: {
      const Shape& sa = in[0].shape;
      const double kdim = static_cast<double>(a.flag ? sa[sa.size() - 2] : sa[sa.size() - 1]);
      return per * n_out * kdim;
    }
    case OpKind::Conv: {
      const Shape& w = in[1].shape;
      return per * n_out * static_cast<double>(w[1] * w[2] * w[3]) + (in.size() == 3 ? n_out : 0);
    }
    case OpKind::ConvBackwardInput: {
      const Shape& w = in[1].shape;  // dy, w
      return per * static_cast<double>(in[0].numel()) * static_cast<double>(w[1] * w[2] * w[3]);
    }
    case OpKind::ConvBackwardWeight: {
      const Shape& dy = in[1].shape;  // x, dy
      return per * static_cast<double>(numel(dy)) *
             static_cast<double>(a.shape[1] * a.shape[2] * a.shape[3]);
    }
    default:
      return n_out;
  }
}

// q k^T and p v, plus `per` flops per score (the softmax); a causal mask halves the work.
inline double attention_flops(OpKind k, const Attrs& a, const std::vector<TensorMeta>& in,
                              double per) {
  const size_t qi = k == OpKind::Attention ? 0 : 1;
  const Shape& q = in[qi].shape;
  const double l = static_cast<double>(q[q.size() - 2]), e = static_cast<double>(q.back());
  const double s = static_cast<double>(in[qi + 1].shape[q.size() - 2]);
  const double ev = static_cast<double>(in[qi + 2].shape.back());
  const double b = static_cast<double>(in[qi].numel()) / std::max(l * e, 1.0);
  if (k == OpKind::Attention) return b * l * s * (2.0 * e + 2.0 * ev + per) * (a.flag ? 0.5 : 1.0);
  return b * l * s * (6.0 * e + 4.0 * ev + per) * (a.flag ? 0.5 : 1.0);
}

// per: the update's flops per element without its options.
inline double update_flops(OpKind k, const Attrs& a, double n_out, double per) {
  if (k == OpKind::AdamUpdate)
    // Two moment updates (4), the square root (8, as the transcendental ops), the denominator
    // and the step (4), AMSGrad's maximum and the weight decay's multiply-add.
    return n_out * (per + (a.flag ? 1.0 : 0.0) + (a.mode != 0 ? 2.0 : 0.0));
  // The step's multiply-add, the weight decay's, the buffer's two multiplies and add, and
  // Nesterov's multiply-add.
  return n_out * (per + (a.reals.size() == 3 && a.reals[2] != 0 ? 2.0 : 0.0) +
                  (a.flag ? 3.0 : 0.0) + (a.flag2 ? 2.0 : 0.0));
}

}  // namespace catalogue_detail

// The table's flops column, counted per element as each category's rule says.
IPUML_INLINE double op_flops(OpKind k, const Attrs& a, const std::vector<TensorMeta>& in,
                             const std::vector<TensorMeta>& out) {
  using namespace catalogue_detail;
  using C = OpCategory;
  const double n_out = out.empty() ? 0.0 : static_cast<double>(out[0].numel());
  const double per = op_flops_per_element(k);
  switch (op_category(k)) {
    case C::Reduce:  // every input element once
      return per * static_cast<double>(in[0].numel());
    case C::Matrix:
      return matrix_flops(k, a, in, n_out, per);
    case C::Pool:  // a forward window reads its kernel's elements for each output element
      if (k == OpKind::MaxPool || k == OpKind::AvgPool)
        return per * n_out * static_cast<double>(a.kernel[0] * a.kernel[1]);
      return per * n_out;
    case C::LayerNorm:
    case C::BatchNorm:  // the gradients count the elements of x, their second input
      if (k == OpKind::LayerNorm || k == OpKind::BatchNorm || k == OpKind::BatchNormInference)
        return per * n_out;
      return per * static_cast<double>(in[1].numel());
    case C::Attention:
      return attention_flops(k, a, in, per);
    case C::Update:
      return update_flops(k, a, n_out, per);
    default:
      return per * n_out;
  }
}

}  // namespace ipuml::ir
