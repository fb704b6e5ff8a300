// Shape and dtype inference for every primitive op, with the validation that makes a bad call
// fail with a readable ipuml::Error before anything runs. Eager mode, tracing and every
// executor use this one function, so they agree on what each op means.
#pragma once

#include <algorithm>
#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/core/dtype.hpp>
#include <ipuml/core/shape.hpp>
#include <ipuml/ir/attrs.hpp>
#include <ipuml/ir/op_kind.hpp>

namespace ipuml::ir {

struct TensorMeta {
  Shape shape;
  DType dtype = DType::Float32;
  int64_t numel() const { return ipuml::numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
};

// Output size of a convolution or pooling window along one axis.
inline int64_t window_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d = 1) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;  // C++ division truncates toward zero: guard negatives
}

// The number of outputs of one instance: op_num_outputs, plus max_exp_avg_sq for an AdamUpdate
// with AMSGrad and the momentum buffer for an SgdUpdate with momentum (attrs.flag of both).
inline int num_outputs(OpKind kind, const Attrs& attrs) {
  return op_num_outputs(kind) + (is_elementwise_update(kind) && attrs.flag ? 1 : 0);
}

// Validates `inputs` for op `kind` and returns the metadata of its outputs.
std::vector<TensorMeta> infer(OpKind kind, const Attrs& attrs,
                              const std::vector<TensorMeta>& inputs);

// Floating-point operations one execution of the op performs (for the cycle model and reports).
double op_flops(OpKind kind, const Attrs& attrs, const std::vector<TensorMeta>& inputs,
                const std::vector<TensorMeta>& outputs);

}  // namespace ipuml::ir

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/ir/op_catalogue_impl.hpp>
#endif
