// Small helpers shared by the op implementations.
#pragma once

#include <ipuml/autograd/node.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/tensor/dispatch.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml::ops_detail {

using autograd::attach;
using ir::Attrs;
using ir::OpKind;

inline Attrs dims_attrs(std::vector<int64_t> dims, bool keepdim = false) {
  Attrs a;
  a.dims = std::move(dims);
  a.keepdim = keepdim;
  return a;
}

inline std::vector<int64_t> wrap_dims(std::vector<int64_t> dims, int64_t rank, const char* op) {
  for (auto& d : dims) d = wrap_dim(d, rank, op);
  return dims;
}

inline Tensor run1(OpKind k, const Attrs& a, const std::vector<Tensor>& in) {
  return detail::dispatch1(k, a, in);
}

// A tensor saved for backward: shares data, carries no history (avoids reference cycles).
inline Tensor saved(const Tensor& t) { return t.defined() ? t.detach() : t; }

// Computes a view in eager mode (sharing storage) or records `kind` when tracing.
inline Tensor make_view(const Tensor& x, Shape shape, Strides strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = x.impl()->storage;
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = x.dtype();
  impl->is_view = true;
  return Tensor(std::move(impl));
}

}  // namespace ipuml::ops_detail
