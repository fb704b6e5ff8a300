// The one path every primitive op takes: validate and infer shapes, then either record the op
// into the active trace or run the CPU kernel eagerly.
#pragma once

#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/ir/attrs.hpp>
#include <ipuml/ir/op_catalogue.hpp>
#include <ipuml/tensor/tensor.hpp>

namespace ipuml {

// A new contiguous eager tensor with uninitialised values.
Tensor empty(const Shape& shape, DType dtype = kFloat32);

namespace detail {

std::vector<Tensor> dispatch(ir::OpKind kind, const ir::Attrs& attrs,
                             const std::vector<Tensor>& inputs);
inline Tensor dispatch1(ir::OpKind kind, const ir::Attrs& attrs,
                        const std::vector<Tensor>& inputs) {
  return dispatch(kind, attrs, inputs)[0];
}

// Runs an elementwise op and stores its result into `target` (in-place semantics). The result
// must have target's shape and dtype. Refused when autograd would need target's old value.
void dispatch_into(Tensor& target, ir::OpKind kind, const ir::Attrs& attrs,
                   const std::vector<Tensor>& inputs);

}  // namespace detail
}  // namespace ipuml

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/tensor/dispatch_impl.hpp>
#endif
