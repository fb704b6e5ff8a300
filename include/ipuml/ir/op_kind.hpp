// The op catalogue: every primitive op that eager mode runs, tracing records and executors run.
// Composite ops (linear, losses, norms, dropout) are written in terms of these.
#pragma once

#include <cstdint>
#include <string>

#include <ipuml/core/error.hpp>

namespace ipuml::ir {

// X(name, num_outputs). Inputs are variadic where noted in op_catalogue.hpp.
// clang-format off
#define IPUML_OP_LIST(X)                                                                          \
  /* creation */                                                                                  \
  X(Full, 1) X(Arange, 1) X(RandUniform, 1) X(RandNormal, 1) X(RandInt, 1)                        \
  /* elementwise unary */                                                                         \
  X(Neg, 1) X(Exp, 1) X(Log, 1) X(Sqrt, 1) X(Rsqrt, 1) X(Abs, 1) X(Tanh, 1) X(Sigmoid, 1)         \
  X(Relu, 1) X(Gelu, 1) X(Sign, 1) X(Clamp, 1) X(Cast, 1) X(PowScalar, 1)                         \
  /* elementwise binary (broadcasting) */                                                         \
  X(Add, 1) X(Sub, 1) X(Mul, 1) X(Div, 1) X(Pow, 1) X(Maximum, 1) X(Minimum, 1)                   \
  X(Eq, 1) X(Ne, 1) X(Lt, 1) X(Le, 1) X(Gt, 1) X(Ge, 1) X(LogicalAnd, 1) X(Where, 1)              \
  /* backward helpers */                                                                          \
  X(ReluGrad, 1) X(GeluGrad, 1)                                                                   \
  /* reductions */                                                                                \
  X(Sum, 1) X(Amax, 1) X(Amin, 1) X(MaxDim, 2) X(MinDim, 2) X(ArgMax, 1) X(ArgMin, 1)             \
  /* data movement */                                                                             \
  X(Reshape, 1) X(Permute, 1) X(Slice, 1) X(Expand, 1) X(Cat, 1) X(Copy, 1)                       \
  X(IndexSelect, 1) X(IndexAdd, 1) X(Gather, 1) X(ScatterAdd, 1)                                  \
  /* linear algebra and nn */                                                                     \
  X(MatMul, 1) X(Conv, 1) X(ConvBackwardInput, 1) X(ConvBackwardWeight, 1)                        \
  X(MaxPool, 2) X(MaxPoolBackward, 1) X(AvgPool, 1) X(AvgPoolBackward, 1)                         \
  X(AdaptiveAvgPool, 1) X(AdaptiveAvgPoolBackward, 1) X(Softmax, 1) X(LogSoftmax, 1)            \
  /* fused normalisation: y, mean, rstd; dx; dweight, dbias */                                    \
  X(LayerNorm, 3) X(LayerNormBackward, 1) X(LayerNormParamBackward, 2)                            \
  /* fused batch norm (+ residual, ReLU): y, mean, var; y from given statistics; dx, dw, db */    \
  X(BatchNorm, 3) X(BatchNormInference, 1) X(BatchNormBackward, 3)                                \
  /* fused attention: out, logsumexp; dq, dk, dv */                                               \
  X(Attention, 2) X(AttentionBackward, 3)                                                         \
  /* fused optimizer updates: param, exp_avg, exp_avg_sq (+ max_exp_avg_sq with AMSGrad); */      \
  /* param (+ momentum_buffer with momentum) */                                                   \
  X(AdamUpdate, 3) X(SgdUpdate, 1)
// clang-format on

enum class OpKind : uint16_t {
#define IPUML_OP_ENUM(name, n) name,
  IPUML_OP_LIST(IPUML_OP_ENUM)
#undef IPUML_OP_ENUM
      Count
};

inline const char* op_name(OpKind k) {
  switch (k) {
#define IPUML_OP_NAME(name, n) \
  case OpKind::name:           \
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
#define IPUML_OP_NOUT(name, n) \
  case OpKind::name:           \
    return n;
    IPUML_OP_LIST(IPUML_OP_NOUT)
#undef IPUML_OP_NOUT
    default:
      return 1;
  }
}

// Elementwise ops of one input (output element i depends on input element i only).
inline bool is_elementwise_unary(OpKind k) {
  switch (k) {
    case OpKind::Neg:
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Abs:
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::Relu:
    case OpKind::Gelu:
    case OpKind::Sign:
    case OpKind::Clamp:
    case OpKind::Cast:
    case OpKind::PowScalar:
    case OpKind::Copy:
      return true;
    default:
      return false;
  }
}

// Elementwise ops over NumPy-broadcast inputs.
inline bool is_elementwise_broadcasting(OpKind k) {
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
    case OpKind::LogicalAnd:
    case OpKind::Where:
      return true;
    default:
      return false;
  }
}

// Fused updates of optimizer state: output k is the new value of input k (updated in place),
// and every output element i depends only on element i of the inputs of the outputs' shape and
// on 0-dim scalar inputs (learning rate, step count).
inline bool is_elementwise_update(OpKind k) {
  return k == OpKind::AdamUpdate || k == OpKind::SgdUpdate;
}

inline OpKind op_from_name(const std::string& s) {
  for (int i = 0; i < static_cast<int>(OpKind::Count); ++i)
    if (s == op_name(static_cast<OpKind>(i))) return static_cast<OpKind>(i);
  fail("unknown op '", s, "'");
}

}  // namespace ipuml::ir
