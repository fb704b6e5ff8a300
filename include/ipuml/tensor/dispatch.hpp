// The one path every primitive op takes: validate and infer shapes, then either record the op
// into the active trace or run it eagerly with the kernel table of its inputs' device.
#pragma once

#include <vector>

#include <ipuml/core/config.hpp>
#include <ipuml/ir/attrs.hpp>
#include <ipuml/ir/op_catalogue.hpp>
#include <ipuml/tensor/tensor.hpp>
#include <ipuml/tensor/tensor_options.hpp>

namespace ipuml {

// A new contiguous eager tensor with uninitialised values.
Tensor empty(const Shape& shape, DType dtype = kFloat32);
Tensor empty(const Shape& shape, const TensorOptions& options);

namespace detail {

Tensor empty_on(const Shape& shape, DType dtype, Device device);
// A contiguous copy of `t` on `device`, recording no autograd history.
Tensor copy_to_device(const Tensor& t, Device device);
// The device an op on `inputs` runs on: theirs (a 0-dim CPU tensor goes with any device, as
// in LibTorch); throws naming `kind` when they differ. CPU for an op with no inputs.
Device common_device(ir::OpKind kind, const std::vector<Tensor>& inputs);

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

// Runs a fused update (ir::is_elementwise_update) whose output k is the new value of
// *targets[k], itself inputs[k], and stores every output into its target in place (recorded
// as rebinds while tracing). Refused where dispatch_into refuses.
void dispatch_update(const std::vector<Tensor*>& targets, ir::OpKind kind, const ir::Attrs& attrs,
                     const std::vector<Tensor>& inputs);

}  // namespace detail
}  // namespace ipuml

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/tensor/dispatch_impl.hpp>
#endif
