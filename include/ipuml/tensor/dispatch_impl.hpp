// Bodies of the dispatcher (compiled once in compiled mode).
#pragma once

#include <cstring>
#include <new>
#include <optional>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml {

IPUML_INLINE Tensor empty(const Shape& shape, DType dtype) {
  return detail::empty_on(shape, dtype, default_device());
}

IPUML_INLINE Tensor empty(const Shape& shape, const TensorOptions& options) {
  Tensor t = detail::empty_on(shape, options.dtype(), options.device());
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}

namespace detail {

IPUML_INLINE Tensor empty_on(const Shape& shape, DType dtype, Device device) {
  // Every tensor on a device is made here (factories, .to(device), Module::to), so a device no
  // backend serves (kCUDA, or a type registered without kernels) is refused once, up front,
  // rather than at the first op.
  if (!device.is_cpu() && !device.is_meta() && backend::eager_backend(device.type()) == nullptr) {
    std::string served;
    for (const Device& d : backend::eager_devices())
      served += (served.empty() ? "" : ", ") + d.str();
    fail("no backend runs tensors on device ", device,
         device.type() == kCUDA ? " (ipuml has no CUDA backend: ipuml::cuda::is_available() is "
                                  "false)"
                                : "",
         "; expected a device of a registered backend (", served, ")");
  }
  const size_t nbytes = checked_nbytes(shape, dtype_size(dtype), "empty");
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  try {
    impl->storage = std::make_shared<Storage>(nbytes, device);
  } catch (const std::bad_alloc&) {
    // Blocks the allocator keeps for reuse go back to the system, and the request is retried once.
    HostAllocator::instance().empty_cache();
    try {
      impl->storage = std::make_shared<Storage>(nbytes, device);
    } catch (const std::bad_alloc&) {
      fail("out of host memory: could not allocate ", nbytes, " bytes for a ", dtype_name(dtype),
           " tensor of shape ", shape_str(shape), " (expected a smaller tensor, batch or model)");
    }
  }
  return Tensor(std::move(impl));
}

// The device of the inputs other than 0-dim CPU tensors (which go with any device, as in
// LibTorch), or nullopt when there are none.
inline std::optional<Device> inputs_device(ir::OpKind kind, const std::vector<Tensor>& inputs) {
  std::optional<Device> dev;
  for (auto& t : inputs) {
    const auto& st = t.impl()->storage;
    IPUML_CHECK(st != nullptr, ir::op_name(kind),
                ": got a symbolic tensor (recorded while tracing) outside its trace");
    const Device d = st->device();
    if (d.is_cpu() && t.impl()->shape.empty()) continue;
    if (!dev)
      dev = d;
    else if (d != *dev)
      fail(ir::op_name(kind), ": expected all tensors on the same device, got tensors on ", *dev,
           " and on ", d, "; move them with .to(device)");
  }
  return dev;
}

IPUML_INLINE Device common_device(ir::OpKind kind, const std::vector<Tensor>& inputs) {
  return inputs_device(kind, inputs).value_or(Device());
}

// Writes r's values into target (same shape and dtype; target may be strided).
inline void write_into(Tensor& target, const Tensor& r) {
  if (target.is_contiguous()) {
    std::memcpy(target.raw_data(), r.raw_data(),
                static_cast<size_t>(r.numel()) * dtype_size(r.dtype()));
    return;
  }
  const auto& shape = target.shape();
  const auto& st = target.strides();
  const size_t es = dtype_size(target.dtype());
  const int64_t n = target.numel();
  std::vector<int64_t> idx(shape.size(), 0);
  const char* s = static_cast<const char*>(r.raw_data());
  char* base = static_cast<char*>(target.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * st[d];
    std::memcpy(base + off * static_cast<int64_t>(es), s + i * static_cast<int64_t>(es), es);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// An op on a device other than the CPU: its backend's kernel table runs it, or, for an op the
// backend lacks, the CPU does with copies in and out (reported once per backend and op).
inline std::vector<Tensor> dispatch_on_device(Device device, ir::OpKind kind,
                                              const ir::Attrs& attrs,
                                              const std::vector<Tensor>& inputs,
                                              const std::vector<ir::TensorMeta>& metas) {
  backend::Backend* b = backend::eager_backend(device.type());
  IPUML_CHECK(b != nullptr, ir::op_name(kind), ": no backend with eager kernels is registered for ",
              "device ", device);
  std::vector<ir::TensorMeta> in_metas;
  in_metas.reserve(inputs.size());
  for (auto& t : inputs) in_metas.push_back({t.shape(), t.dtype()});
  if (b->supports_op(kind, attrs, in_metas)) {
    std::vector<Tensor> in;
    in.reserve(inputs.size());
    for (auto& t : inputs)
      in.push_back(t.device() != device ? copy_to_device(t, device)
                   : t.is_contiguous()  ? t
                                        : copy_to_device(t, device));
    std::vector<Tensor> outputs;
    outputs.reserve(metas.size());
    for (auto& m : metas) outputs.push_back(empty_on(m.shape, m.dtype, device));
    b->run_eager(device, kind, attrs, in, outputs);
    return outputs;
  }
  backend::report_fallback(*b, kind);
  std::vector<Tensor> host;
  host.reserve(inputs.size());
  for (auto& t : inputs) host.push_back(t.device().is_cpu() ? t : copy_to_device(t, Device()));
  std::vector<Tensor> outputs = dispatch(kind, attrs, host);
  for (auto& o : outputs) o = copy_to_device(o, device);
  return outputs;
}

inline std::vector<ir::TensorMeta> metas_of(const std::vector<Tensor>& inputs) {
  std::vector<ir::TensorMeta> m;
  m.reserve(inputs.size());
  for (auto& t : inputs) {
    IPUML_CHECK(t.defined(), "an op received an undefined tensor");
    m.push_back({t.shape(), t.dtype()});
  }
  return m;
}

IPUML_INLINE std::vector<Tensor> dispatch(ir::OpKind kind, const ir::Attrs& attrs,
                                          const std::vector<Tensor>& inputs) {
  const auto metas = ir::infer(kind, attrs, metas_of(inputs));
  if (auto* tracer = ir::Tracer::current()) return tracer->record(kind, attrs, inputs, metas);
  std::optional<Device> device = inputs_device(kind, inputs);
  // A factory (no inputs) makes its tensor on the thread's default device.
  if (inputs.empty() && !default_device().is_cpu()) device = default_device();
  if (device && device->is_meta()) {
    // Shapes only: the results are made, no kernel runs.
    std::vector<Tensor> outputs;
    outputs.reserve(metas.size());
    for (auto& m : metas) outputs.push_back(empty_on(m.shape, m.dtype, *device));
    return outputs;
  }
  if (device && !device->is_cpu()) return dispatch_on_device(*device, kind, attrs, inputs, metas);

  std::vector<Tensor> contiguous;
  contiguous.reserve(inputs.size());
  std::vector<cpu::ConstBuffer> in;
  in.reserve(inputs.size());
  for (auto& t : inputs) {
    contiguous.push_back(t.is_contiguous() ? t : t.contiguous());
    in.push_back({contiguous.back().raw_data(), {t.shape(), t.dtype()}});
  }
  std::vector<Tensor> outputs;
  std::vector<cpu::MutableBuffer> out;
  for (auto& m : metas) {
    outputs.push_back(empty(m.shape, m.dtype));
    out.push_back({outputs.back().raw_data(), m});
  }
  cpu::run_kernel(kind, attrs, in, out);
  return outputs;
}

inline void check_in_place_target(const Tensor& target) {
  IPUML_CHECK(!(autograd::is_grad_enabled() && target.requires_grad() && target.is_leaf()),
              "a leaf tensor that requires grad cannot be modified in place while grad mode is "
              "on; wrap the update in ipuml::NoGradGuard");
  IPUML_CHECK(
      !(autograd::is_grad_enabled() && target.grad_fn()),
      "in-place modification of a tensor that is part of an autograd graph is not supported");
}

IPUML_INLINE void dispatch_into(Tensor& target, ir::OpKind kind, const ir::Attrs& attrs,
                                const std::vector<Tensor>& inputs) {
  check_in_place_target(target);
  const auto metas = ir::infer(kind, attrs, metas_of(inputs));
  IPUML_CHECK(metas[0].shape == target.shape() && metas[0].dtype == target.dtype(),
              ir::op_name(kind), " (in-place): the result has shape ", shape_str(metas[0].shape),
              " and dtype ", dtype_name(metas[0].dtype), ", but the target has shape ",
              shape_str(target.shape()), " and dtype ", dtype_name(target.dtype()));
  if (auto* tracer = ir::Tracer::current()) {
    auto out = tracer->record(kind, attrs, inputs, metas);
    tracer->rebind(target, out[0]);
    return;
  }
  if (target.is_meta()) {  // no values to write (copy_ from any device included, as PyTorch)
    target.impl()->version++;
    return;
  }
  const std::optional<Device> device = inputs_device(kind, inputs);
  const Device target_device = target.device();
  IPUML_CHECK(!device || *device == target_device, ir::op_name(kind),
              " (in-place): the target is on ", target_device, " but the other tensors are on ",
              *device, "; move them with .to(device)");
  target.impl()->version++;
  // A strided target, or one on another device (whose bytes are host memory too): the op runs
  // out of place and its values are written into the target.
  if (!target.is_contiguous() || !target_device.is_cpu()) {
    write_into(target, dispatch1(kind, attrs, inputs));
    return;
  }
  std::vector<Tensor> contiguous;
  std::vector<cpu::ConstBuffer> in;
  for (auto& t : inputs) {
    contiguous.push_back(t.is_contiguous() ? t : t.contiguous());
    in.push_back({contiguous.back().raw_data(), {t.shape(), t.dtype()}});
  }
  // Elementwise kernels tolerate out aliasing in[0] exactly; any other overlap goes through a copy.
  bool alias_ok = true;
  for (size_t i = 0; i < in.size(); ++i)
    if (i > 0 && contiguous[i].defined() && !contiguous[i].is_symbolic() &&
        contiguous[i].impl()->storage == target.impl()->storage && in[i].data != target.raw_data())
      alias_ok = false;
  if (!in.empty() && in[0].data != target.raw_data() &&
      contiguous[0].impl()->storage == target.impl()->storage)
    alias_ok = false;
  if (!alias_ok) {
    Tensor r = dispatch1(kind, attrs, inputs);
    std::memcpy(target.raw_data(), r.raw_data(), metas[0].nbytes());
    return;
  }
  std::vector<cpu::MutableBuffer> out{{target.raw_data(), metas[0]}};
  cpu::run_kernel(kind, attrs, in, out);
}

IPUML_INLINE void dispatch_update(const std::vector<Tensor*>& targets, ir::OpKind kind,
                                  const ir::Attrs& attrs, const std::vector<Tensor>& inputs) {
  const char* name = ir::op_name(kind);
  IPUML_CHECK(ir::is_elementwise_update(kind) && inputs.size() >= targets.size(), name,
              ": not a fused update of ", targets.size(), " tensors");
  for (size_t k = 0; k < targets.size(); ++k) {
    check_in_place_target(*targets[k]);
    IPUML_CHECK(inputs[k].same(*targets[k]), name, ": input ", k, " must be the tensor it updates");
  }
  const auto metas = ir::infer(kind, attrs, metas_of(inputs));
  IPUML_CHECK(metas.size() == targets.size(), name, " (in-place): ", metas.size(), " results for ",
              targets.size(), " targets");
  for (size_t k = 0; k < targets.size(); ++k)
    IPUML_CHECK(metas[k].shape == targets[k]->shape() && metas[k].dtype == targets[k]->dtype(),
                name, " (in-place): result ", k, " has shape ", shape_str(metas[k].shape),
                " but its target has shape ", shape_str(targets[k]->shape()));
  if (auto* tracer = ir::Tracer::current()) {
    auto out = tracer->record(kind, attrs, inputs, metas);
    for (size_t k = 0; k < targets.size(); ++k) tracer->rebind(*targets[k], out[k]);
    return;
  }
  bool all_meta = true;
  for (auto* t : targets) all_meta = all_meta && t->is_meta();
  if (all_meta) {  // an optimizer step on a model made for sizing: nothing to compute
    for (auto* t : targets) t->impl()->version++;
    return;
  }
  const std::optional<Device> device = inputs_device(kind, inputs);
  bool direct = true;  // every target a contiguous CPU tensor, overlapping no other operand
  for (size_t k = 0; k < targets.size(); ++k) {
    Tensor& t = *targets[k];
    IPUML_CHECK(!device || *device == t.device(), name, " (in-place): target ", k, " is on ",
                t.device(), " but the other tensors are on ", *device,
                "; move them with .to(device)");
    direct = direct && t.is_contiguous() && t.device().is_cpu();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (i != k && inputs[i].impl()->storage == t.impl()->storage) direct = false;
  }
  for (auto* t : targets) t->impl()->version++;
  if (!direct) {
    // Out of place, then each result written into its target (strided, or on another device
    // whose bytes are host memory too).
    const std::vector<Tensor> r = dispatch(kind, attrs, inputs);
    for (size_t k = 0; k < targets.size(); ++k) write_into(*targets[k], r[k]);
    return;
  }
  std::vector<Tensor> contiguous;
  contiguous.reserve(inputs.size());
  std::vector<cpu::ConstBuffer> in;
  for (auto& t : inputs) {
    contiguous.push_back(t.is_contiguous() ? t : t.contiguous());
    in.push_back({contiguous.back().raw_data(), {t.shape(), t.dtype()}});
  }
  std::vector<cpu::MutableBuffer> out;
  for (size_t k = 0; k < targets.size(); ++k) out.push_back({targets[k]->raw_data(), metas[k]});
  cpu::run_kernel(kind, attrs, in, out);
}

}  // namespace detail
}  // namespace ipuml
