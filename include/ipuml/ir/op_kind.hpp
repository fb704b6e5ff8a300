// The op catalogue: every primitive op that eager mode runs, tracing records and executors run.
// Composite ops (linear, losses, norms, dropout) are written in terms of these.
#pragma once

#include <cstdint>
#include <string>

#include <ipuml/core/error.hpp>

namespace ipuml::ir {

// Families of ops that share a shape rule, a split rule and a cost model: passes ask an op's
// family (op_category) instead of listing its members again.
enum class OpCategory : uint8_t {
  Creation,   // no inputs: fills and random draws
  Unary,      // elementwise over one input (output element i reads input element i only)
  Broadcast,  // elementwise over NumPy-broadcast inputs
  ActGrad,    // an activation's gradient from the forward input, elementwise
  Reduce,     // reductions over dims
  View,       // reshape, transpose, slice, broadcast, concat: element moves only
  Index,      // reads by an index tensor
  Scatter,    // adds by an index tensor into a result of a given shape
  Matrix,     // matrix products and convolutions
  Pool,       // pooling windows and their gradients
  Softmax,    // softmax along one dim
  LayerNorm,  // fused layer normalisation and its gradients
  BatchNorm,  // fused batch normalisation (+ residual, ReLU) and its gradient
  Attention,  // fused scaled dot-product attention and its gradient
  Update,     // fused optimizer updates of state, in place
  Count
};

// Properties of single ops that cut across families (bits of op_traits).
enum OpTrait : unsigned {
  kNoTraits = 0,
  // Moves or creates elements of any dtype without arithmetic: kernels handle every dtype
  // themselves, so half operands are never widened to float32.
  kRaw = 1u << 0,
  // Every input has the output's elements and output element i reads element i of each, in
  // flat order: a result may split anywhere, and may overwrite its first input.
  kFlat = 1u << 1,
  // A comparison or logical op: a bool result whatever its operands' dtype.
  kBool = 1u << 2,
};

// X(name, num_outputs, category, flops, traits). flops: the op's floating-point operations per
// element, per output element unless its category's rule in ir::op_flops counts others (a
// reduction's input, a multiply-add of a matrix product, an attention score). Inputs are
// variadic where noted in op_catalogue.hpp. The rows' order gives OpKind its values.
// clang-format off
#define IPUML_OP_LIST(X)                                                                          \
  X(Full, 1, Creation, 0, kRaw)         X(Arange, 1, Creation, 0, kRaw)                           \
  X(RandUniform, 1, Creation, 1, kRaw)  X(RandNormal, 1, Creation, 1, kRaw)                       \
  X(RandInt, 1, Creation, 1, kRaw)                                                                \
  /* transcendental functions: a few multiply-adds (8) */                                         \
  X(Neg, 1, Unary, 1, kFlat)            X(Exp, 1, Unary, 8, kFlat)                                \
  X(Log, 1, Unary, 8, kFlat)            X(Sqrt, 1, Unary, 8, kFlat)                               \
  X(Rsqrt, 1, Unary, 8, kFlat)          X(Abs, 1, Unary, 1, kFlat)                                \
  X(Tanh, 1, Unary, 8, kFlat)           X(Sigmoid, 1, Unary, 8, kFlat)                            \
  X(Relu, 1, Unary, 1, kFlat)           X(Gelu, 1, Unary, 8, kFlat)                               \
  X(Sign, 1, Unary, 1, kFlat)           X(Clamp, 1, Unary, 1, kFlat)                              \
  X(Cast, 1, Unary, 0, kFlat | kRaw)    X(PowScalar, 1, Unary, 8, kFlat)                          \
  X(Add, 1, Broadcast, 1, kNoTraits)    X(Sub, 1, Broadcast, 1, kNoTraits)                        \
  X(Mul, 1, Broadcast, 1, kNoTraits)    X(Div, 1, Broadcast, 1, kNoTraits)                        \
  X(Pow, 1, Broadcast, 8, kNoTraits)    X(Maximum, 1, Broadcast, 1, kNoTraits)                    \
  X(Minimum, 1, Broadcast, 1, kNoTraits)                                                          \
  X(Eq, 1, Broadcast, 1, kBool)         X(Ne, 1, Broadcast, 1, kBool)                             \
  X(Lt, 1, Broadcast, 1, kBool)         X(Le, 1, Broadcast, 1, kBool)                             \
  X(Gt, 1, Broadcast, 1, kBool)         X(Ge, 1, Broadcast, 1, kBool)                             \
  X(LogicalAnd, 1, Broadcast, 1, kBool) X(Where, 1, Broadcast, 1, kRaw)                           \
  X(ReluGrad, 1, ActGrad, 1, kFlat)     X(GeluGrad, 1, ActGrad, 8, kFlat)                         \
  /* flops per input element */                                                                   \
  X(Sum, 1, Reduce, 1, kNoTraits)       X(Amax, 1, Reduce, 1, kNoTraits)                          \
  X(Amin, 1, Reduce, 1, kNoTraits)      X(MaxDim, 2, Reduce, 1, kNoTraits)                        \
  X(MinDim, 2, Reduce, 1, kNoTraits)    X(ArgMax, 1, Reduce, 1, kNoTraits)                        \
  X(ArgMin, 1, Reduce, 1, kNoTraits)                                                              \
  X(Reshape, 1, View, 0, kFlat | kRaw)  X(Permute, 1, View, 0, kRaw)                              \
  X(Slice, 1, View, 0, kRaw)            X(Expand, 1, View, 0, kRaw)                               \
  X(Cat, 1, View, 0, kRaw)              X(Copy, 1, Unary, 0, kFlat | kRaw)                        \
  X(IndexSelect, 1, Index, 0, kRaw)     X(IndexAdd, 1, Scatter, 1, kNoTraits)                     \
  X(Gather, 1, Index, 0, kRaw)          X(ScatterAdd, 1, Scatter, 1, kNoTraits)                   \
  /* flops per multiply-add */                                                                    \
  X(MatMul, 1, Matrix, 2, kNoTraits)    X(Conv, 1, Matrix, 2, kNoTraits)                          \
  X(ConvBackwardInput, 1, Matrix, 2, kNoTraits) X(ConvBackwardWeight, 1, Matrix, 2, kNoTraits)    \
  /* MaxPool and AvgPool: flops per output element and window element */                         \
  X(MaxPool, 2, Pool, 1, kNoTraits)     X(MaxPoolBackward, 1, Pool, 1, kNoTraits)                 \
  X(AvgPool, 1, Pool, 1, kNoTraits)     X(AvgPoolBackward, 1, Pool, 1, kNoTraits)                 \
  X(AdaptiveAvgPool, 1, Pool, 1, kNoTraits) X(AdaptiveAvgPoolBackward, 1, Pool, 1, kNoTraits)     \
  X(Softmax, 1, Softmax, 12, kNoTraits) X(LogSoftmax, 1, Softmax, 12, kNoTraits)                  \
  /* LayerNorm: y, mean, rstd (two passes for the statistics, one for the output); dx; */         \
  /* dweight, dbias. The gradients' flops are per element of the input x. */                      \
  X(LayerNorm, 3, LayerNorm, 8, kNoTraits) X(LayerNormBackward, 1, LayerNorm, 10, kNoTraits)    \
  X(LayerNormParamBackward, 2, LayerNorm, 10, kNoTraits)                                          \
  /* fused batch norm (+ residual, ReLU): y, mean, var (flops as LayerNorm); y from given */      \
  /* statistics (one multiply-add, the residual and the ReLU); dx, dw, db */                      \
  X(BatchNorm, 3, BatchNorm, 8, kNoTraits) X(BatchNormInference, 1, BatchNorm, 4, kNoTraits)    \
  X(BatchNormBackward, 3, BatchNorm, 10, kNoTraits)                                               \
  /* out, logsumexp; dq, dk, dv. flops per score besides the two matrix products */               \
  X(Attention, 2, Attention, 12, kNoTraits) X(AttentionBackward, 3, Attention, 24, kNoTraits)     \
  /* param, exp_avg, exp_avg_sq (+ max_exp_avg_sq with AMSGrad); param (+ momentum_buffer with */ \
  /* momentum). flops per element without the options' extra work */                             \
  X(AdamUpdate, 3, Update, 16, kNoTraits) X(SgdUpdate, 1, Update, 2, kNoTraits)
// clang-format on

enum class OpKind : uint16_t {
#define IPUML_OP_ENUM(name, n, cat, flops, traits) name,
  IPUML_OP_LIST(IPUML_OP_ENUM)
#undef IPUML_OP_ENUM
      Count
};

inline const char* op_name(OpKind k) {
  switch (k) {
#define IPUML_OP_NAME(name, n, cat, flops, traits) \
  case OpKind::name:                               \
    return #name;
    IPUML_OP_LIST(IPUML_OP_NAME)
#undef IPUML_OP_NAME
    default:
      return "?";
  }
}

// The number of outputs of `k` (AdamUpdate: without AMSGrad, SgdUpdate: without momentum;
// ir::num_outputs in op_catalogue.hpp counts one instance's).
inline int op_num_outputs(OpKind k) {
  switch (k) {
#define IPUML_OP_NOUT(name, n, cat, flops, traits) \
  case OpKind::name:                               \
    return n;
    IPUML_OP_LIST(IPUML_OP_NOUT)
#undef IPUML_OP_NOUT
    default:
      return 1;
  }
}

// OpCategory::Count for a value outside the table.
constexpr OpCategory op_category(OpKind k) {
  switch (k) {
#define IPUML_OP_CATEGORY(name, n, cat, flops, traits) \
  case OpKind::name:                                   \
    return OpCategory::cat;
    IPUML_OP_LIST(IPUML_OP_CATEGORY)
#undef IPUML_OP_CATEGORY
    default:
      return OpCategory::Count;
  }
}

constexpr unsigned op_traits(OpKind k) {
  switch (k) {
#define IPUML_OP_TRAITS(name, n, cat, flops, traits) \
  case OpKind::name:                                 \
    return traits;
    IPUML_OP_LIST(IPUML_OP_TRAITS)
#undef IPUML_OP_TRAITS
    default:
      return kNoTraits;
  }
}

// The flops column of the table; ir::op_flops applies it.
constexpr double op_flops_per_element(OpKind k) {
  switch (k) {
#define IPUML_OP_FLOPS(name, n, cat, flops, traits) \
  case OpKind::name:                                \
    return flops;
    IPUML_OP_LIST(IPUML_OP_FLOPS)
#undef IPUML_OP_FLOPS
    default:
      return 0;
  }
}

// Whether `k` belongs to one of the categories `cs`.
template <class... C>
constexpr bool op_in(OpKind k, C... cs) {
  return ((op_category(k) == cs) || ...);
}

constexpr bool op_has(OpKind k, OpTrait t) { return (op_traits(k) & t) != 0; }

inline bool is_elementwise_unary(OpKind k) { return op_category(k) == OpCategory::Unary; }

inline bool is_elementwise_broadcasting(OpKind k) {
  return op_category(k) == OpCategory::Broadcast;
}

// Fused updates of optimizer state: output k is the new value of input k (updated in place),
// and every output element i depends only on element i of the inputs of the outputs' shape and
// on 0-dim scalar inputs (learning rate, step count).
inline bool is_elementwise_update(OpKind k) { return op_category(k) == OpCategory::Update; }

inline OpKind op_from_name(const std::string& s) {
  for (int i = 0; i < static_cast<int>(OpKind::Count); ++i)
    if (s == op_name(static_cast<OpKind>(i))) return static_cast<OpKind>(i);
  fail("unknown op '", s, "'");
}

}  // namespace ipuml::ir
