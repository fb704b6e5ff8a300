// Body of cpu::run_kernel: validates buffer counts and dispatches each op of the catalogue to its
// kernel family (compiled once in src/lib/cpu_kernels.cpp in compiled mode).
#pragma once

#include <memory>

#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/core/denormals.hpp>
#include <ipuml/backends/cpu/kernels_attention.hpp>
#include <ipuml/backends/cpu/kernels_batch_norm.hpp>
#include <ipuml/backends/cpu/kernels_common.hpp>
#include <ipuml/backends/cpu/kernels_elementwise.hpp>
#include <ipuml/backends/cpu/kernels_half.hpp>
#include <ipuml/backends/cpu/kernels_movement.hpp>
#include <ipuml/backends/cpu/kernels_nn.hpp>
#include <ipuml/backends/cpu/kernels_norm.hpp>
#include <ipuml/backends/cpu/kernels_optim.hpp>
#include <ipuml/backends/cpu/kernels_reduce.hpp>

namespace ipuml::cpu {

namespace kdetail {

inline bool overlaps(const void* a, size_t na, const void* b, size_t nb) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

// Whether output `o` may be exactly input `i` (same bytes, same shape): kernels that read each
// element before writing the same position, so out[0] may be in[0], and the fused updates,
// whose output k is input k's new value.
inline bool alias_safe(ir::OpKind k, size_t i, size_t o) {
  using C = ir::OpCategory;
  if (ir::is_elementwise_update(k)) return i == o;
  return i == 0 && o == 0 && (ir::op_has(k, ir::kFlat) || ir::op_in(k, C::Broadcast, C::Softmax));
}

// Runs an arithmetic op on half operands in float32 (kernels_half.hpp): half inputs are widened
// into scratch, half outputs computed in float32 scratch and rounded to nearest even.
inline bool run_widened(ir::OpKind kind, const ir::Attrs& attrs, const std::vector<ConstBuffer>& in,
                        const std::vector<MutableBuffer>& out, const KernelContext& ctx) {
  bool any = false;
  for (const auto& b : in) any = any || is_half(b.meta.dtype);
  for (const auto& b : out) any = any || is_half(b.meta.dtype);
  if (!any || dtype_generic(kind)) return false;
  // Inputs' scratch is left uninitialised (widen writes every element); outputs' is zeroed, as
  // the kernels find a float32 output.
  std::vector<std::unique_ptr<float[]>> scratch;
  scratch.reserve(in.size() + out.size());
  auto take = [&](int64_t n, bool zeroed) {
    const size_t len = static_cast<size_t>(std::max<int64_t>(n, 1));
    scratch.emplace_back(zeroed ? new float[len]() : new float[len]);
    return scratch.back().get();
  };
  std::vector<ConstBuffer> win(in);
  for (auto& b : win) {
    if (!is_half(b.meta.dtype)) continue;
    float* w = take(b.meta.numel(), false);
    widen(b.meta.dtype, b.data, w, b.meta.numel());
    b = {w, {b.meta.shape, DType::Float32}};
  }
  std::vector<MutableBuffer> wout(out);
  for (auto& b : wout) {
    if (!is_half(b.meta.dtype)) continue;
    b = {take(b.meta.numel(), true), {b.meta.shape, DType::Float32}};
  }
  run_kernel(kind, attrs, win, wout, ctx);
  for (size_t i = 0; i < out.size(); ++i)
    if (is_half(out[i].meta.dtype))
      narrow(out[i].meta.dtype, static_cast<const float*>(wout[i].data), out[i].data,
             out[i].meta.numel());
  return true;
}

inline void expect_buffers(const char* name, const std::vector<ConstBuffer>& in, size_t lo,
                           size_t hi) {
  IPUML_CHECK(in.size() >= lo && in.size() <= hi, name, ": expected ", lo,
              lo == hi ? "" : ipuml::detail::str(" to ", hi), " inputs, got ", in.size());
}

inline void expect_same_size(const char* name, const std::vector<ConstBuffer>& in,
                             const MutableBuffer& o) {
  expect_buffers(name, in, 1, 1);
  IPUML_CHECK(in[0].meta.numel() == o.meta.numel(), name, ": input of shape ",
              shape_str(in[0].meta.shape), " and output of shape ", shape_str(o.meta.shape),
              " differ in size");
}

// Reshape and Copy: the bytes as they are.
inline void run_copy(const char* name, const std::vector<ConstBuffer>& in, const MutableBuffer& o) {
  expect_buffers(name, in, 1, 1);
  IPUML_CHECK(in[0].meta.nbytes() == o.meta.nbytes(), name, ": input of shape ",
              shape_str(in[0].meta.shape), " does not fit output of shape ",
              shape_str(o.meta.shape));
  k_copy(in[0], o);
}

// Each run_* below runs one family of the catalogue (ir::OpCategory) on unaliased buffers.
inline void run_creation(ir::OpKind kind, const ir::Attrs& attrs,
                         const std::vector<ConstBuffer>& in, const MutableBuffer& o,
                         const KernelContext& ctx) {
  using K = ir::OpKind;
  expect_buffers(ir::op_name(kind), in, 0, 0);
  if (kind == K::Full) return k_full(attrs, o);
  if (kind == K::Arange) return k_arange(attrs, o);
  return k_random(kind, attrs, o, ctx);
}

inline void run_unary(ir::OpKind kind, const ir::Attrs& attrs, const std::vector<ConstBuffer>& in,
                      const MutableBuffer& o) {
  using K = ir::OpKind;
  const char* name = ir::op_name(kind);
  switch (kind) {
    case K::Copy:
      return run_copy(name, in, o);
    case K::Neg:
    case K::Abs:
    case K::Sign:
      expect_same_size(name, in, o);
      return k_unary_signed(kind, in[0], o);
    case K::Cast:
      expect_same_size(name, in, o);
      return k_cast(in[0], o);
    default:
      expect_same_size(name, in, o);
      return k_unary_float(kind, attrs, in[0], o);
  }
}

// Broadcasting ops and activation gradients.
inline void run_binary(ir::OpKind kind, const ir::Attrs& attrs, const std::vector<ConstBuffer>& in,
                       const MutableBuffer& o) {
  using K = ir::OpKind;
  const char* name = ir::op_name(kind);
  if (kind == K::Where) {
    expect_buffers(name, in, 3, 3);
    return k_where(in[0], in[1], in[2], o);
  }
  expect_buffers(name, in, 2, 2);
  if (ir::op_category(kind) == ir::OpCategory::ActGrad)
    return k_act_grad(kind, attrs, in[0], in[1], o);
  return k_binary(kind, in[0], in[1], o);
}

inline void run_reduce(ir::OpKind kind, const ir::Attrs& attrs, const std::vector<ConstBuffer>& in,
                       const std::vector<MutableBuffer>& out) {
  using K = ir::OpKind;
  expect_buffers(ir::op_name(kind), in, 1, 1);
  if (kind == K::Sum) return k_sum(attrs, in[0], out[0]);
  if (kind == K::Amax || kind == K::Amin) return k_extreme(kind == K::Amax, attrs, in[0], out[0]);
  return k_arg(kind, attrs, in[0], out);
}

// Views, indexed reads and indexed adds.
inline void run_movement(ir::OpKind kind, const ir::Attrs& attrs,
                         const std::vector<ConstBuffer>& in, const MutableBuffer& o) {
  using K = ir::OpKind;
  const char* name = ir::op_name(kind);
  switch (kind) {
    case K::Reshape:
      return run_copy(name, in, o);
    case K::Permute:
      expect_buffers(name, in, 1, 1);
      return k_permute(attrs, in[0], o);
    case K::Slice:
      expect_buffers(name, in, 1, 1);
      return k_slice(attrs, in[0], o);
    case K::Expand:
      expect_buffers(name, in, 1, 1);
      return k_expand(in[0], o);
    case K::Cat:
      return k_cat(attrs, in, o);
    case K::IndexSelect:
      expect_buffers(name, in, 2, 2);
      return k_index_select(attrs, in[0], in[1], o);
    case K::IndexAdd:
      expect_buffers(name, in, 2, 2);
      return k_index_add(attrs, in[0], in[1], o);
    case K::Gather:
      expect_buffers(name, in, 2, 2);
      return k_gather(attrs, in[0], in[1], o);
    case K::ScatterAdd:
      expect_buffers(name, in, 2, 2);
      return k_scatter_add(attrs, in[0], in[1], o);
    default:
      fail("run_kernel: unknown op ", static_cast<int>(kind));
  }
}

// Matrix products, convolutions, pooling and softmax.
inline void run_nn(ir::OpKind kind, const ir::Attrs& attrs, const std::vector<ConstBuffer>& in,
                   const std::vector<MutableBuffer>& out) {
  using K = ir::OpKind;
  const char* name = ir::op_name(kind);
  const MutableBuffer& o = out[0];
  switch (kind) {
    case K::MatMul:
      expect_buffers(name, in, 2, 2);
      return k_matmul(attrs, in[0], in[1], o);
    case K::Conv:
      return k_conv(attrs, in, o);
    case K::ConvBackwardInput:
      expect_buffers(name, in, 2, 2);
      return k_conv_backward_input(attrs, in[0], in[1], o);
    case K::ConvBackwardWeight:
      expect_buffers(name, in, 2, 2);
      return k_conv_backward_weight(attrs, in[0], in[1], o);
    case K::MaxPool:
      expect_buffers(name, in, 1, 1);
      return k_maxpool(attrs, in[0], out);
    case K::MaxPoolBackward:
      expect_buffers(name, in, 2, 2);
      return k_maxpool_backward(attrs, in[0], in[1], o);
    case K::AvgPool:
      expect_buffers(name, in, 1, 1);
      return k_avgpool(attrs, in[0], o);
    case K::AvgPoolBackward:
      expect_buffers(name, in, 1, 1);
      return k_avgpool_backward(attrs, in[0], o);
    case K::AdaptiveAvgPool:
      expect_buffers(name, in, 1, 1);
      return k_adaptive(false, in[0], o);
    case K::AdaptiveAvgPoolBackward:
      expect_buffers(name, in, 1, 1);
      return k_adaptive(true, in[0], o);
    case K::Softmax:
    case K::LogSoftmax:
      expect_buffers(name, in, 1, 1);
      return k_softmax(kind == K::LogSoftmax, attrs, in[0], o);
    default:
      fail("run_kernel: unknown op ", static_cast<int>(kind));
  }
}

// The fused ops: normalisation, attention and optimizer updates.
inline void run_fused(ir::OpKind kind, const ir::Attrs& attrs, const std::vector<ConstBuffer>& in,
                      const std::vector<MutableBuffer>& out) {
  using K = ir::OpKind;
  const char* name = ir::op_name(kind);
  switch (kind) {
    case K::LayerNorm:
      expect_buffers(name, in, 1, 3);
      return k_layer_norm(attrs, in, out);
    case K::LayerNormBackward:
      expect_buffers(name, in, 4, 5);
      return k_layer_norm_backward(attrs, in, out[0]);
    case K::LayerNormParamBackward:
      expect_buffers(name, in, 4, 4);
      return k_layer_norm_param_backward(attrs, in, out);
    case K::BatchNorm:
      expect_buffers(name, in, 1, 4);
      return k_batch_norm(attrs, in, out);
    case K::BatchNormInference:
      expect_buffers(name, in, 3, 6);
      return k_batch_norm_inference(attrs, in, out[0]);
    case K::BatchNormBackward:
      expect_buffers(name, in, 4, 6);
      return k_batch_norm_backward(attrs, in, out);
    case K::Attention:
      expect_buffers(name, in, 3, 4);
      return k_attention(attrs, in, out);
    case K::AttentionBackward:
      expect_buffers(name, in, 6, 7);
      return k_attention_backward(attrs, in, out);
    case K::AdamUpdate:
      return k_adam_update(attrs, in, out);
    case K::SgdUpdate:
      return k_sgd_update(attrs, in, out);
    default:
      fail("run_kernel: unknown op ", static_cast<int>(kind));
  }
}

}  // namespace kdetail

IPUML_INLINE void run_kernel(ir::OpKind kind, const ir::Attrs& attrs,
                             const std::vector<ConstBuffer>& in_arg,
                             const std::vector<MutableBuffer>& out, const KernelContext& ctx) {
  using C = ir::OpCategory;
  using namespace kdetail;
  ipuml::detail::apply_denormal_mode();  // this thread may not have run ipuml before
  const char* name = ir::op_name(kind);
  const size_t nout = static_cast<size_t>(ir::num_outputs(kind, attrs));
  IPUML_CHECK(out.size() == nout, name, ": expected ", nout, " output buffers, got ", out.size());
  // An input overlapping an output is read from a private copy unless the kernel is known to
  // handle that exact aliasing, so in-place calls never read half-written data.
  std::vector<ConstBuffer> copied;
  std::vector<std::vector<unsigned char>> scratch;
  for (size_t i = 0; i < in_arg.size(); ++i) {
    const auto& b = in_arg[i];
    bool clash = false;
    for (size_t j = 0; j < out.size(); ++j) {
      const auto& o = out[j];
      if (!overlaps(b.data, b.meta.nbytes(), o.data, o.meta.nbytes())) continue;
      const bool exact = b.data == o.data && b.meta.shape == o.meta.shape &&
                         dtype_size(b.meta.dtype) == dtype_size(o.meta.dtype);
      clash = clash || !(exact && alias_safe(kind, i, j));
    }
    if (!clash) continue;
    if (copied.empty()) copied = in_arg;
    scratch.emplace_back(static_cast<const unsigned char*>(b.data),
                         static_cast<const unsigned char*>(b.data) + b.meta.nbytes());
    copied[i].data = scratch.back().data();
  }
  const std::vector<ConstBuffer>& in = copied.empty() ? in_arg : copied;
  if (run_widened(kind, attrs, in, out, ctx)) return;
  switch (ir::op_category(kind)) {
    case C::Creation:
      return run_creation(kind, attrs, in, out[0], ctx);
    case C::Unary:
      return run_unary(kind, attrs, in, out[0]);
    case C::Broadcast:
    case C::ActGrad:
      return run_binary(kind, attrs, in, out[0]);
    case C::Reduce:
      return run_reduce(kind, attrs, in, out);
    case C::View:
    case C::Index:
    case C::Scatter:
      return run_movement(kind, attrs, in, out[0]);
    case C::Matrix:
    case C::Pool:
    case C::Softmax:
      return run_nn(kind, attrs, in, out);
    case C::LayerNorm:
    case C::BatchNorm:
    case C::Attention:
    case C::Update:
      return run_fused(kind, attrs, in, out);
    case C::Count:
      break;
  }
  fail("run_kernel: unknown op ", static_cast<int>(kind));
}

IPUML_INLINE void run_log_softmax_backward(const ConstBuffer& y, const ConstBuffer& g,
                                           const MutableBuffer& dx) {
  using namespace kdetail;
  ipuml::detail::apply_denormal_mode();
  const Shape& s = y.meta.shape;
  IPUML_CHECK(!s.empty() && g.meta.shape == s && dx.meta.shape == s, "log_softmax_backward: ",
              "the output, its gradient and the input gradient must have one shape, got ",
              shape_str(s), ", ", shape_str(g.meta.shape), " and ", shape_str(dx.meta.shape));
  IPUML_CHECK(y.meta.dtype == DType::Float32 && g.meta.dtype == DType::Float32 &&
                  dx.meta.dtype == DType::Float32,
              "log_softmax_backward: expected float32 tensors");
  IPUML_CHECK(!overlaps(y.data, y.meta.nbytes(), dx.data, dx.meta.nbytes()) &&
                  !overlaps(g.data, g.meta.nbytes(), dx.data, dx.meta.nbytes()),
              "log_softmax_backward: the input gradient must not overlap its inputs");
  const int64_t cols = s.back();
  if (cols == 0 || y.meta.numel() == 0) return;
  log_softmax_backward_rows(in_ptr<float>(y), in_ptr<float>(g), out_ptr<float>(dx),
                            y.meta.numel() / cols, cols);
}

IPUML_INLINE void run_index_add_onto(const ir::Attrs& attrs, const ConstBuffer& idx,
                                     const ConstBuffer& src, const MutableBuffer& out) {
  using namespace kdetail;
  ipuml::detail::apply_denormal_mode();
  IPUML_CHECK(!overlaps(src.data, src.meta.nbytes(), out.data, out.meta.nbytes()),
              "index_add onto a tensor: the source must not overlap the result");
  k_index_add_onto(attrs, idx, src, out);
}

IPUML_INLINE void run_conv_batch_norm(const ir::Attrs& conv,
                                      const std::vector<ConstBuffer>& conv_in, const ir::Attrs& bn,
                                      const std::vector<ConstBuffer>& bn_in,
                                      const MutableBuffer& out) {
  using namespace kdetail;
  ipuml::detail::apply_denormal_mode();
  const size_t want = 3 + (bn.flag2 ? 2 : 0) + (bn.flag ? 1 : 0);
  IPUML_CHECK(bn_in.size() == want, "conv + batch_norm_inference: expected ", want,
              " batch-norm inputs, got ", bn_in.size());
  IPUML_CHECK(bn.mode == 0 || bn.mode == 1, "conv + batch_norm_inference: activation mode ",
              bn.mode, " is not 0 (none) or 1 (ReLU)");
  for (const auto* ins : {&conv_in, &bn_in})
    for (size_t i = ins == &bn_in ? 1 : 0; i < ins->size(); ++i) {
      const auto& b = (*ins)[i];
      IPUML_CHECK(b.meta.dtype == DType::Float32 &&
                      !overlaps(b.data, b.meta.nbytes(), out.data, out.meta.nbytes()),
                  "conv + batch_norm_inference: input ", i,
                  " must be float32 and apart from the output");
    }
  const auto g = bn_geometry(out.meta.shape);
  IPUML_CHECK(out.meta.dtype == DType::Float32 && bn_in[0].meta.shape == out.meta.shape,
              "conv + batch_norm_inference: the output of shape ", shape_str(out.meta.shape),
              " must be the float32 shape of the convolution's, ", shape_str(bn_in[0].meta.shape));
  const float* mean = in_ptr<float>(bn_in[1]);
  const float* var = in_ptr<float>(bn_in[2]);
  const float* w = bn.flag2 ? in_ptr<float>(bn_in[3]) : nullptr;
  const float* b = bn.flag2 ? in_ptr<float>(bn_in[4]) : nullptr;
  std::vector<float> scale(static_cast<size_t>(g.c)), shift(static_cast<size_t>(g.c));
  for (int64_t c = 0; c < g.c; ++c)
    batch_norm_affine(mean[c], var[c], w, b, c, static_cast<float>(bn.scalar), scale[c], shift[c]);
  const ChannelAffine epilogue{
      scale.data(), shift.data(), bn.flag ? in_ptr<float>(bn_in.back()) : nullptr,
      bn.mode == 1, g.c,          g.s};
  k_conv(conv, conv_in, out, &epilogue);
}

IPUML_INLINE void run_conv_max_pool(const ir::Attrs& conv, const std::vector<ConstBuffer>& conv_in,
                                    const ir::Attrs& pool, const std::vector<MutableBuffer>& out) {
  using namespace kdetail;
  ipuml::detail::apply_denormal_mode();
  const char* op = "conv + max_pool2d";
  IPUML_CHECK(conv_in.size() == 2 || conv_in.size() == 3, op, ": expected 2 or 3 conv inputs, got ",
              conv_in.size());
  IPUML_CHECK(out.size() == 2 && out[0].meta.dtype == DType::Float32 &&
                  out[1].meta.dtype == DType::Int64 && out[1].meta.shape == out[0].meta.shape,
              op, ": expected (float32, int64) outputs of one shape");
  for (const auto& b : conv_in)
    for (const auto& o : out)
      IPUML_CHECK(!overlaps(b.data, b.meta.nbytes(), o.data, o.meta.nbytes()), op,
                  ": the outputs must be apart from the inputs");
  const auto p = conv_params(op, conv, conv_in[0].meta.shape, conv_in[1].meta.shape);
  expect_f32(op, conv_in[0].meta, conv_in[0].meta.shape, "input");
  expect_f32(op, conv_in[1].meta, conv_in[1].meta.shape, "weight");
  if (conv_in.size() == 3) expect_f32(op, conv_in[2].meta, Shape{p.c_out}, "bias");
  PoolGeom g = pool_geom(op, pool, Shape{p.n, p.c_out, p.out_h(), p.out_w()}, out[0].meta.shape);
  const MaxPoolPlanesFn fn = maxpool_planes_for(g, active_isa());
  float* y = out_ptr<float>(out[0]);
  int64_t* ix = out_ptr<int64_t>(out[1]);
  const int64_t image = p.c_out * g.oh * g.ow;
  g.planes = p.c_out;  // one image's planes a call
  conv2d_forward(p, in_ptr<float>(conv_in[0]), in_ptr<float>(conv_in[1]),
                 conv_in.size() == 3 ? in_ptr<float>(conv_in[2]) : nullptr,
                 ConvImageSink{[&](int64_t img, const float* o) {
                   fn(g, o, y + img * image, ix + img * image, 0, p.c_out);
                 }});
}

}  // namespace ipuml::cpu
