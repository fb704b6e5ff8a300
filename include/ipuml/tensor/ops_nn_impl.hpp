// Linear algebra, convolution, pooling, softmax, dropout, normalisation and losses.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string>

#include <ipuml/tensor/ops_common_impl.hpp>

namespace ipuml {

namespace ops_detail {

// op(A) @ op(B) on stored operands, where op transposes the last two dims when the flag is set.
inline Tensor matmul_raw(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  Attrs at;
  at.flag = ta;
  at.flag2 = tb;
  Tensor out = run1(OpKind::MatMul, at, {a, b});
  attach({out}, "MatMulBackward", {a, b},
         [a = saved(a), b = saved(b), ta, tb, ra = a.requires_grad(),
          rb = b.requires_grad()](const std::vector<Tensor>& gs) {
           const Tensor& g = gs[0];
           Tensor ga, gb;
           if (ra)
             ga = sum_to(ta ? matmul_raw(b, g, tb, true) : matmul_raw(g, b, false, !tb), a.shape());
           if (rb)
             gb = sum_to(tb ? matmul_raw(g, a, true, ta) : matmul_raw(a, g, !ta, false), b.shape());
           return std::vector<Tensor>{ga, gb};
         });
  return out;
}

// If `t` is an eager 2-d transposed view of contiguous data, returns that data and true.
inline std::pair<Tensor, bool> untranspose(const Tensor& t) {
  if (t.dim() == 2 && !t.is_symbolic() && !t.is_contiguous() && t.strides()[0] == 1 &&
      t.strides()[1] == t.shape()[0] && t.grad_fn() == nullptr && !t.requires_grad())
    return {make_view(t, {t.shape()[1], t.shape()[0]}, {t.shape()[0], 1}, t.offset()), true};
  return {t, false};
}

inline std::vector<int64_t> pair_of(const std::vector<int64_t>& v, const char* op,
                                    const char* what) {
  IPUML_CHECK(v.size() == 1 || v.size() == 2, op, ": ", what, " must have 1 or 2 values, got ",
              detail::str(v));
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

inline Shape channel_shape(const Tensor& x) {
  Shape s(static_cast<size_t>(x.dim()), 1);
  s[1] = x.shape()[1];
  return s;
}

inline Tensor reduce(const Tensor& loss, Reduction r) {
  switch (r) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      return mean(loss);
  }
  return loss;
}

}  // namespace ops_detail

IPUML_INLINE Tensor matmul(const Tensor& a, const Tensor& b) {
  IPUML_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: operands must have at least 1 dim, got ",
              shape_str(a.shape()), " and ", shape_str(b.shape()));
  if (a.dim() == 1 && b.dim() == 1) {
    IPUML_CHECK(a.shape() == b.shape(),
                "matmul: 1-d operands differ in size: ", shape_str(a.shape()), " and ",
                shape_str(b.shape()));
    return reshape(matmul_raw(unsqueeze(a, 0), unsqueeze(b, 1), false, false), {});
  }
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);
  auto [sa, ta] = untranspose(a);
  auto [sb, tb] = untranspose(b);
  return matmul_raw(sa, sb, ta, tb);
}

IPUML_INLINE Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  IPUML_CHECK(weight.dim() == 2, "linear: weight must be 2-d [out, in], got ",
              shape_str(weight.shape()));
  IPUML_CHECK(x.dim() >= 1 && x.shape().back() == weight.shape()[1], "linear: input of shape ",
              shape_str(x.shape()), " does not match weight of shape ", shape_str(weight.shape()),
              " (expected the last input dim to be ", weight.shape()[1], ")");
  Shape out_shape = x.shape();
  out_shape.back() = weight.shape()[0];
  Tensor x2 = x.dim() == 2 ? x : reshape(x, {-1, weight.shape()[1]});
  Tensor y = matmul_raw(x2, weight, false, true);
  if (bias.defined()) {
    IPUML_CHECK(bias.shape() == Shape{weight.shape()[0]}, "linear: bias of shape ",
                shape_str(bias.shape()), ", expected [", weight.shape()[0], "]");
    y = add(y, bias);
  }
  return x.dim() == 2 ? y : reshape(y, out_shape);
}

IPUML_INLINE Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           std::vector<int64_t> stride, std::vector<int64_t> padding,
                           std::vector<int64_t> dilation, int64_t groups) {
  IPUML_CHECK(x.dim() == 4, "conv2d: expected a 4-d input [N, C, H, W], got shape ",
              shape_str(x.shape()));
  IPUML_CHECK(weight.dim() == 4, "conv2d: expected a 4-d weight [O, C/groups, kH, kW], got shape ",
              shape_str(weight.shape()));
  Attrs a;
  a.kernel = {weight.shape()[2], weight.shape()[3]};
  a.stride = pair_of(stride, "conv2d", "stride");
  a.padding = pair_of(padding, "conv2d", "padding");
  a.dilation = pair_of(dilation, "conv2d", "dilation");
  a.groups = groups;
  std::vector<Tensor> in{x, weight};
  if (bias.defined()) in.push_back(bias);
  Tensor out = run1(OpKind::Conv, a, in);
  attach({out}, "ConvolutionBackward", in,
         [x = saved(x), w = saved(weight), a, has_bias = bias.defined(), rx = x.requires_grad(),
          rw = weight.requires_grad()](const std::vector<Tensor>& g) {
           std::vector<Tensor> r(has_bias ? 3 : 2);
           Attrs ai = a;
           if (rx) {
             ai.shape = x.shape();
             r[0] = run1(OpKind::ConvBackwardInput, ai, {g[0], w});
           }
           if (rw) {
             ai.shape = w.shape();
             r[1] = run1(OpKind::ConvBackwardWeight, ai, {x, g[0]});
           }
           if (has_bias) r[2] = sum(g[0], {0, 2, 3});
           return r;
         });
  return out;
}

IPUML_INLINE Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           int64_t stride, int64_t padding, int64_t dilation, int64_t groups) {
  IPUML_CHECK(x.dim() == 3, "conv1d: expected a 3-d input [N, C, L], got shape ",
              shape_str(x.shape()));
  IPUML_CHECK(weight.dim() == 3, "conv1d: expected a 3-d weight [O, C/groups, k], got shape ",
              shape_str(weight.shape()));
  Tensor y = conv2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, {1, stride}, {0, padding},
                    {1, dilation}, groups);
  return squeeze(y, 2);
}

namespace ops_detail {

// A transposed convolution is the input gradient of the convolution that maps an image of shape
// `a.shape` to one shaped like x, so it runs as that op (x in the output gradient's place). Its
// own gradients are that convolution's other two passes: x's is the forward convolution of the
// output gradient with the same weight, the weight's is the convolution's weight gradient with
// the output gradient as the image and x as the gradient.
inline Tensor conv_transpose_raw(const Tensor& x, const Tensor& w, const Attrs& a) {
  Tensor out = run1(OpKind::ConvBackwardInput, a, {x, w});
  attach({out}, "ConvolutionBackward", {x, w},
         [x = saved(x), w = saved(w), a, rx = x.requires_grad(),
          rw = w.requires_grad()](const std::vector<Tensor>& g) {
           std::vector<Tensor> r(2);
           Attrs b = a;
           b.shape.clear();
           if (rx) r[0] = run1(OpKind::Conv, b, {g[0], w});
           if (rw) {
             b.shape = w.shape();
             r[1] = run1(OpKind::ConvBackwardWeight, b, {g[0], x});
           }
           return r;
         });
  return out;
}

}  // namespace ops_detail

IPUML_INLINE Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                     std::vector<int64_t> stride, std::vector<int64_t> padding,
                                     std::vector<int64_t> output_padding, int64_t groups,
                                     std::vector<int64_t> dilation) {
  const char* op = "conv_transpose2d";
  IPUML_CHECK(x.defined() && weight.defined(), op, ": the input or the weight is undefined");
  IPUML_CHECK(x.dim() == 4, op, ": expected a 4-d input [N, C_in, H, W], got shape ",
              shape_str(x.shape()));
  IPUML_CHECK(weight.dim() == 4, op,
              ": expected a 4-d weight [C_in, C_out/groups, kH, kW], got shape ",
              shape_str(weight.shape()));
  IPUML_CHECK(is_floating(x.dtype()) && weight.dtype() == x.dtype(), op,
              ": expected floating-point input and weight of one dtype, got ",
              dtype_name(x.dtype()), " and ", dtype_name(weight.dtype()));
  Attrs a;
  a.stride = pair_of(stride, op, "stride");
  a.padding = pair_of(padding, op, "padding");
  a.dilation = pair_of(dilation, op, "dilation");
  const std::vector<int64_t> out_pad = pair_of(output_padding, op, "output_padding");
  a.groups = groups;
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  IPUML_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  IPUML_CHECK(xs[1] == ws[0], op, ": the input has ", xs[1], " channels but the weight of shape ",
              shape_str(ws), " takes ", ws[0],
              " (the weight of a transposed convolution is [C_in, C_out/groups, kH, kW])");
  IPUML_CHECK(ws[0] % groups == 0, op, ": groups=", groups, " must divide the input channels ",
              ws[0]);
  IPUML_CHECK(ws[1] > 0 && ws[2] > 0 && ws[3] > 0, op,
              ": the weight's sizes must be positive, got shape ", shape_str(ws));
  IPUML_CHECK(xs[2] > 0 && xs[3] > 0, op,
              ": the input's spatial sizes must be positive, got shape ", shape_str(xs));
  for (size_t i = 0; i < 2; ++i) {
    IPUML_CHECK(a.stride[i] > 0 && a.dilation[i] > 0, op,
                ": stride and dilation must be positive, got stride=", detail::str(a.stride),
                " dilation=", detail::str(a.dilation));
    IPUML_CHECK(a.padding[i] >= 0 && out_pad[i] >= 0, op,
                ": padding and output_padding must be non-negative, got padding=",
                detail::str(a.padding), " output_padding=", detail::str(out_pad));
    IPUML_CHECK(out_pad[i] < a.stride[i] || out_pad[i] < a.dilation[i], op,
                ": output_padding must be smaller than either stride or dilation, got "
                "output_padding=",
                detail::str(out_pad), " stride=", detail::str(a.stride),
                " dilation=", detail::str(a.dilation));
  }
  const int64_t c_out = ws[1] * groups;
  Shape out{xs[0], c_out, 0, 0};
  Shape full = out;  // every position the kernel reaches, before padding crops it
  for (size_t i = 0; i < 2; ++i) {
    full[2 + i] = (xs[2 + i] - 1) * a.stride[i] + a.dilation[i] * (ws[2 + i] - 1) + 1;
    out[2 + i] = full[2 + i] - 2 * a.padding[i] + out_pad[i];
  }
  IPUML_CHECK(out[2] > 0 && out[3] > 0, op, ": the output would be ", out[2], "x", out[3],
              " for an input of shape ", shape_str(xs), ", weight ", shape_str(ws),
              ", padding=", detail::str(a.padding), " output_padding=", detail::str(out_pad),
              " (padding too large)");
  if (bias.defined())
    IPUML_CHECK(bias.shape() == Shape{c_out} && bias.dtype() == x.dtype(), op, ": bias of shape ",
                shape_str(bias.shape()), " and dtype ", dtype_name(bias.dtype()), ", expected [",
                c_out, "] of ", dtype_name(x.dtype()));
  a.kernel = {ws[2], ws[3]};
  // output_padding below the stride names one of the input sizes a strided convolution maps
  // onto x's size, so the op's own geometry holds it. Larger ones (allowed when below the
  // dilation) reach past every such size: that dim is computed unpadded, then cropped and
  // filled with zeros where no kernel tap lands.
  bool crop[2] = {false, false};
  const std::vector<int64_t> pad = a.padding;
  a.shape = out;
  for (size_t i = 0; i < 2; ++i) {
    if (out_pad[i] < a.stride[i]) continue;
    crop[i] = true;
    a.padding[i] = 0;
    a.shape[2 + i] = full[2 + i];
  }
  Tensor y = conv_transpose_raw(x, weight, a);
  for (size_t i = 0; i < 2; ++i) {
    if (!crop[i]) continue;
    const int64_t dim = static_cast<int64_t>(2 + i), p = pad[i];
    const int64_t kept = std::max<int64_t>(std::min(full[2 + i], p + out[2 + i]) - p, 0);
    if (kept == out[2 + i]) {
      y = slice(y, dim, p, p + kept);
      continue;
    }
    Shape zs = y.shape();
    zs[2 + i] = out[2 + i] - kept;
    const Tensor fill = zeros(zs, TensorOptions(y.dtype()).device(y.device()));
    y = kept > 0 ? cat({slice(y, dim, p, p + kept), fill}, dim) : fill;
  }
  if (bias.defined()) y = add(y, reshape(bias, {1, c_out, 1, 1}));
  return y;
}

IPUML_INLINE Tensor max_pool2d(const Tensor& x, std::vector<int64_t> kernel,
                               std::vector<int64_t> stride, std::vector<int64_t> padding) {
  IPUML_CHECK(x.dim() == 4, "max_pool2d: expected a 4-d input [N, C, H, W], got shape ",
              shape_str(x.shape()));
  Attrs a;
  a.kernel = pair_of(kernel, "max_pool2d", "kernel_size");
  a.stride = stride.empty() ? a.kernel : pair_of(stride, "max_pool2d", "stride");
  a.padding = pair_of(padding, "max_pool2d", "padding");
  auto outs = detail::dispatch(OpKind::MaxPool, a, {x});
  attach({outs[0]}, "MaxPool2DBackward", {x},
         [idx = outs[1], s = x.shape()](const std::vector<Tensor>& g) {
           Attrs b;
           b.shape = s;
           return std::vector<Tensor>{run1(OpKind::MaxPoolBackward, b, {g[0], idx})};
         });
  return outs[0];
}

IPUML_INLINE Tensor max_pool1d(const Tensor& x, int64_t kernel, int64_t stride, int64_t padding) {
  IPUML_CHECK(x.dim() == 3, "max_pool1d: expected a 3-d input [N, C, L], got shape ",
              shape_str(x.shape()));
  return squeeze(
      max_pool2d(unsqueeze(x, 2), {1, kernel}, {1, stride ? stride : kernel}, {0, padding}), 2);
}

IPUML_INLINE Tensor avg_pool2d(const Tensor& x, std::vector<int64_t> kernel,
                               std::vector<int64_t> stride, std::vector<int64_t> padding,
                               bool count_include_pad) {
  IPUML_CHECK(x.dim() == 4, "avg_pool2d: expected a 4-d input [N, C, H, W], got shape ",
              shape_str(x.shape()));
  Attrs a;
  a.kernel = pair_of(kernel, "avg_pool2d", "kernel_size");
  a.stride = stride.empty() ? a.kernel : pair_of(stride, "avg_pool2d", "stride");
  a.padding = pair_of(padding, "avg_pool2d", "padding");
  a.flag = count_include_pad;
  Tensor out = run1(OpKind::AvgPool, a, {x});
  attach({out}, "AvgPool2DBackward", {x}, [a, s = x.shape()](const std::vector<Tensor>& g) {
    Attrs b = a;
    b.shape = s;
    return std::vector<Tensor>{run1(OpKind::AvgPoolBackward, b, {g[0]})};
  });
  return out;
}

IPUML_INLINE Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size) {
  IPUML_CHECK(x.dim() == 4, "adaptive_avg_pool2d: expected a 4-d input [N, C, H, W], got shape ",
              shape_str(x.shape()));
  Attrs a;
  a.shape = pair_of(output_size, "adaptive_avg_pool2d", "output_size");
  Tensor out = run1(OpKind::AdaptiveAvgPool, a, {x});
  attach({out}, "AdaptiveAvgPool2DBackward", {x}, [s = x.shape()](const std::vector<Tensor>& g) {
    Attrs b;
    b.shape = s;
    return std::vector<Tensor>{run1(OpKind::AdaptiveAvgPoolBackward, b, {g[0]})};
  });
  return out;
}

IPUML_INLINE Tensor softmax(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim(), "softmax");
  Tensor out = run1(OpKind::Softmax, dims_attrs({dim}), {x});
  attach({out}, "SoftmaxBackward", {x}, [y = saved(out), dim](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{mul(y, sub(g[0], sum(mul(g[0], y), {dim}, true)))};
  });
  return out;
}

IPUML_INLINE Tensor log_softmax(const Tensor& x, int64_t dim) {
  dim = wrap_dim(dim, x.dim(), "log_softmax");
  Tensor out = run1(OpKind::LogSoftmax, dims_attrs({dim}), {x});
  attach({out}, "LogSoftmaxBackward", {x}, [y = saved(out), dim](const std::vector<Tensor>& g) {
    return std::vector<Tensor>{sub(g[0], mul(exp(y), sum(g[0], {dim}, true)))};
  });
  return out;
}

IPUML_INLINE Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  IPUML_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return mul(x, zeros_like(x));
  Tensor keep = cast(ge(uniform(x.shape(), 0.0, 1.0, gen).to(x.device()), p), x.dtype());
  return mul(x, mul(keep, 1.0 / (1.0 - p)));
}

namespace ops_detail {

inline void check_batch_norm_args(const Tensor& x, const Tensor& running_mean,
                                  const Tensor& running_var, const Tensor& weight,
                                  const Tensor& bias, bool training) {
  IPUML_CHECK(x.dim() >= 2, "batch_norm: expected an input of rank >= 2 [N, C, ...], got shape ",
              shape_str(x.shape()));
  const int64_t c = x.shape()[1];
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias})
    if (t->defined())
      IPUML_CHECK(t->shape() == Shape{c}, "batch_norm: expected per-channel tensors of shape [", c,
                  "], got ", shape_str(t->shape()));
  IPUML_CHECK(running_mean.defined() == running_var.defined(),
              "batch_norm: running_mean and running_var must be given together");
  if (training || !running_mean.defined()) {
    const int64_t n = x.numel() / std::max<int64_t>(c, 1);
    IPUML_CHECK(n > 1 || !training,
                "batch_norm: expected more than 1 value per channel when "
                "training, got input of shape ",
                shape_str(x.shape()));
  }
}

// running = (1 - momentum) running + momentum stat (the variance unbiased), outside autograd.
inline void update_running_stats(const Tensor& running_mean, const Tensor& running_var,
                                 const Tensor& mu, const Tensor& v, int64_t c, int64_t n,
                                 double momentum) {
  NoGradGuard no_grad;
  Tensor rm = running_mean;
  Tensor rv = running_var;
  rm.mul_(1.0 - momentum).add_(mul(reshape(mu.detach(), {c}), momentum));
  rv.mul_(1.0 - momentum)
      .add_(mul(reshape(v.detach(), {c}),
                momentum * static_cast<double>(n) / static_cast<double>(n - 1)));
}

inline bool is_f32(const Tensor& t) { return !t.defined() || t.dtype() == DType::Float32; }

// IPUML_FUSED_BATCH_NORM=0 at start-up keeps every batch norm on the composite (to measure
// what the fusion gains, or to rule it out).
inline bool fused_batch_norm_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("IPUML_FUSED_BATCH_NORM");
    return env == nullptr || std::string(env) != "0";
  }();
  return on;
}

// Whether act(batch_norm(x) + residual) runs as the fused ops.
inline bool batch_norm_fusable(const Tensor& x, const Tensor& running_mean,
                               const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                               bool use_batch_stats, const Tensor& residual) {
  if (!fused_batch_norm_enabled()) return false;
  if (x.dtype() != DType::Float32 || x.dim() < 3 || weight.defined() != bias.defined())
    return false;
  if (!is_f32(weight) || !is_f32(bias) || !is_f32(running_mean) || !is_f32(running_var))
    return false;
  if (residual.defined() && (residual.shape() != x.shape() || residual.dtype() != x.dtype()))
    return false;
  // Normalising with given statistics is fused for inference only (no gradient through it).
  return use_batch_stats || !autograd::needs_grad({x, weight, bias, residual});
}

}  // namespace ops_detail

IPUML_INLINE Tensor batch_norm(const Tensor& x, const Tensor& running_mean,
                               const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                               bool training, double momentum, double eps) {
  return batch_norm_act(x, running_mean, running_var, weight, bias, training, momentum, eps,
                        Tensor(), false);
}

IPUML_INLINE Tensor batch_norm_act(const Tensor& x, const Tensor& running_mean,
                                   const Tensor& running_var, const Tensor& weight,
                                   const Tensor& bias, bool training, double momentum, double eps,
                                   const Tensor& residual, bool relu) {
  check_batch_norm_args(x, running_mean, running_var, weight, bias, training);
  if (residual.defined())
    IPUML_CHECK(residual.shape() == x.shape(), "batch_norm: residual of shape ",
                shape_str(residual.shape()), " does not match the input of shape ",
                shape_str(x.shape()));
  const int64_t c = x.shape()[1];
  const int64_t n = x.numel() / std::max<int64_t>(c, 1);
  const bool use_batch_stats = training || !running_mean.defined();
  if (batch_norm_fusable(x, running_mean, running_var, weight, bias, use_batch_stats, residual)) {
    Attrs a;
    a.scalar = eps;
    a.flag = residual.defined();
    a.flag2 = weight.defined();
    a.mode = relu ? 1 : 0;
    if (!use_batch_stats) {
      std::vector<Tensor> in{x, running_mean, running_var};
      if (weight.defined()) in.insert(in.end(), {weight, bias});
      if (residual.defined()) in.push_back(residual);
      return run1(OpKind::BatchNormInference, a, in);
    }
    std::vector<Tensor> in{x};
    if (weight.defined()) in.insert(in.end(), {weight, bias});
    if (residual.defined()) in.push_back(residual);
    auto outs = detail::dispatch(OpKind::BatchNorm, a, in);
    if (training && running_mean.defined())
      update_running_stats(running_mean, running_var, outs[1], outs[2], c, n, momentum);
    const Tensor y = outs[0];
    attach({y}, "NativeBatchNormBackward", in,
           [x = saved(x), w = saved(weight), y = saved(y), mean = outs[1], var = outs[2], a, c,
            ni = in.size()](const std::vector<Tensor>& g) {
             std::vector<Tensor> r(ni);
             Tensor gy = g[0];
             Attrs b;
             b.scalar = a.scalar;
             b.flag2 = a.flag2;
             // With a residual the masked gradient is the residual's too: one ReluGrad serves
             // both; without one the mask is applied inside the fused backward.
             if (a.flag && a.mode == 1) gy = run1(OpKind::ReluGrad, {}, {gy, y});
             b.mode = a.flag ? 0 : a.mode;
             std::vector<Tensor> bin{gy, x, mean, var};
             if (a.flag2) bin.push_back(w);
             if (b.mode == 1) bin.push_back(y);
             auto d = detail::dispatch(OpKind::BatchNormBackward, b, bin);
             r[0] = d[0];
             if (a.flag2) {
               r[1] = reshape(d[1], {c});
               r[2] = reshape(d[2], {c});
             }
             if (a.flag) r[ni - 1] = gy;
             return r;
           });
    return y;
  }
  // The composite: statistics, normalisation, then the residual and the activation.
  const Shape cs = channel_shape(x);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != 1) dims.push_back(i);
  Tensor y;
  if (use_batch_stats) {
    Tensor mu = mean(x, dims, true);
    Tensor v = var(x, dims, 0, true);
    y = mul(sub(x, mu), rsqrt(add(v, eps)));
    if (training && running_mean.defined())
      update_running_stats(running_mean, running_var, mu, v, c, n, momentum);
  } else {
    y = mul(sub(x, reshape(running_mean, cs)), rsqrt(add(reshape(running_var, cs), eps)));
  }
  if (weight.defined()) y = mul(y, reshape(weight, cs));
  if (bias.defined()) y = add(y, reshape(bias, cs));
  if (residual.defined()) y = add(y, residual);
  return relu ? ipuml::relu(y) : y;
}

IPUML_INLINE Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                               const Tensor& bias, double eps) {
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  IPUML_CHECK(
      k >= 1 && x.dim() >= k && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
      "layer_norm: input of shape ", shape_str(x.shape()), " does not end with normalized_shape ",
      shape_str(normalized_shape));
  for (const Tensor* t : {&weight, &bias})
    if (t->defined())
      IPUML_CHECK(t->shape() == normalized_shape, "layer_norm: weight/bias of shape ",
                  shape_str(t->shape()), ", expected ", shape_str(normalized_shape));
  IPUML_CHECK(eps >= 0.0 && std::isfinite(eps), "layer_norm: eps must be finite and >= 0, got ",
              eps);
  // One fused op (statistics and output in one pass per row); its backward is two fused ops:
  // dx per row, and dweight/dbias per column.
  Attrs a;
  a.dims = {x.dim() - k};
  a.scalar = eps;
  a.flag = weight.defined();
  a.flag2 = bias.defined();
  std::vector<Tensor> in{x};
  if (weight.defined()) in.push_back(weight);
  if (bias.defined()) in.push_back(bias);
  auto outs = detail::dispatch(OpKind::LayerNorm, a, in);
  attach(
      {outs[0]}, "NativeLayerNormBackward", in,
      [x = saved(x), w = saved(weight), mean = outs[1], rstd = outs[2], a, rx = x.requires_grad(),
       rw = weight.defined() && weight.requires_grad(), rb = bias.defined() && bias.requires_grad(),
       n = in.size()](const std::vector<Tensor>& g) {
        std::vector<Tensor> r(n);
        if (rx) {
          Attrs b;
          b.dims = a.dims;
          b.flag = a.flag;
          std::vector<Tensor> bin{g[0], x, mean, rstd};
          if (a.flag) bin.push_back(w);
          r[0] = run1(OpKind::LayerNormBackward, b, bin);
        }
        if (rw || rb) {
          auto pg = detail::dispatch(OpKind::LayerNormParamBackward, dims_attrs(a.dims),
                                     {g[0], x, mean, rstd});
          if (a.flag) r[1] = pg[0];
          if (a.flag2) r[a.flag ? 2 : 1] = pg[1];
        }
        return r;
      });
  return outs[0];
}

IPUML_INLINE Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight,
                               const Tensor& bias, double eps) {
  IPUML_CHECK(x.dim() >= 2, "group_norm: expected an input of rank >= 2 [N, C, ...], got shape ",
              shape_str(x.shape()));
  const int64_t c = x.shape()[1];
  IPUML_CHECK(num_groups > 0 && c % num_groups == 0, "group_norm: num_groups ", num_groups,
              " must divide the number of channels ", c);
  for (const Tensor* t : {&weight, &bias})
    if (t->defined())
      IPUML_CHECK(t->shape() == Shape{c}, "group_norm: weight/bias of shape ",
                  shape_str(t->shape()), ", expected [", c, "]");
  Tensor g = reshape(x, {x.shape()[0], num_groups, -1});
  Tensor mu = mean(g, {2}, true);
  Tensor v = var(g, {2}, 0, true);
  Tensor y = reshape(mul(sub(g, mu), rsqrt(add(v, eps))), x.shape());
  const Shape cs = channel_shape(x);
  if (weight.defined()) y = mul(y, reshape(weight, cs));
  if (bias.defined()) y = add(y, reshape(bias, cs));
  return y;
}

IPUML_INLINE Reduction reduction_from_name(const std::string& name) {
  if (name == "mean") return Reduction::Mean;
  if (name == "sum") return Reduction::Sum;
  if (name == "none") return Reduction::None;
  fail("unknown reduction '", name, "': expected 'mean', 'sum' or 'none'");
}

namespace ops_detail {

// Checks a loss's per-class weight: undefined, or [C] of the input's floating dtype.
inline void check_class_weight(const char* op, const Tensor& weight, const Tensor& input,
                               int64_t classes) {
  if (!weight.defined()) return;
  IPUML_CHECK(weight.shape() == Shape{classes}, op, ": weight of shape ", shape_str(weight.shape()),
              ", expected one value per class [", classes, "]");
  IPUML_CHECK(weight.dtype() == input.dtype(), op, ": weight is ", dtype_name(weight.dtype()),
              " but the input is ", dtype_name(input.dtype()), " (expected the same dtype)");
}

// The per-element weights of the targets: weight[target] (or 1), 0 where target is ignored.
// Returns the weights and the targets with ignored entries replaced by class 0.
inline std::pair<Tensor, Tensor> target_weights(const Tensor& target, const Tensor& weight,
                                                int64_t ignore_index, DType dtype) {
  Tensor ignored = eq(target, static_cast<double>(ignore_index));
  Tensor safe = where(ignored, scalar_tensor(0, target.dtype()), target);
  Tensor w = cast(ne(target, static_cast<double>(ignore_index)), dtype);
  if (weight.defined())
    w = mul(w, reshape(index_select(weight, 0, reshape(safe, {-1})), target.shape()));
  return {w, safe};
}

}  // namespace ops_detail

IPUML_INLINE Tensor nll_loss(const Tensor& log_probs, const Tensor& target, Reduction reduction,
                             const Tensor& weight, int64_t ignore_index) {
  IPUML_CHECK(log_probs.dim() >= 2, "nll_loss: expected input of shape [N, C, ...], got ",
              shape_str(log_probs.shape()));
  IPUML_CHECK(is_floating(log_probs.dtype()), "nll_loss: expected a floating-point input, got ",
              dtype_name(log_probs.dtype()));
  IPUML_CHECK(is_integral(target.dtype()), "nll_loss: target must hold class indices (int64), got ",
              dtype_name(target.dtype()));
  Shape expect = log_probs.shape();
  expect.erase(expect.begin() + 1);
  IPUML_CHECK(target.shape() == expect, "nll_loss: target of shape ", shape_str(target.shape()),
              " does not match input of shape ", shape_str(log_probs.shape()), " (expected ",
              shape_str(expect), ")");
  const int64_t classes = log_probs.shape()[1];
  check_class_weight("nll_loss", weight, log_probs, classes);
  if (!target.is_symbolic()) {
    for (int64_t t : target.to_vector<int64_t>())
      IPUML_CHECK(t == ignore_index || (t >= 0 && t < classes), "nll_loss: target ", t,
                  " is out of range for ", classes, " classes (expected 0 <= target < ", classes,
                  ", or ignore_index=", ignore_index, ")");
  }
  auto [w, safe] = target_weights(target, weight, ignore_index, log_probs.dtype());
  Tensor picked = squeeze(gather(log_probs, 1, unsqueeze(safe, 1)), 1);
  // Ignored entries are 0 even where the stand-in class has log p = -inf (-inf * 0 is NaN).
  Tensor loss =
      masked_fill(neg(mul(picked, w)), eq(target, static_cast<double>(ignore_index)), 0.0);
  switch (reduction) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      return div(sum(loss), sum(w));  // NaN when every target is ignored, as in PyTorch
  }
  return loss;
}

IPUML_INLINE Tensor cross_entropy(const Tensor& logits, const Tensor& target, Reduction reduction,
                                  double label_smoothing, const Tensor& weight,
                                  int64_t ignore_index) {
  IPUML_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
              "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);
  IPUML_CHECK(logits.dim() >= 2, "cross_entropy: expected logits of shape [N, C, ...], got ",
              shape_str(logits.shape()));
  const int64_t classes = logits.shape()[1];
  check_class_weight("cross_entropy", weight, logits, classes);
  Tensor logp = log_softmax(logits, 1);
  Tensor nll = nll_loss(logp, target, reduction, weight, ignore_index);
  if (label_smoothing == 0.0) return nll;
  // PyTorch 1.13's cross_entropy_loss_label_smoothing: the smoothing term is the (weighted) sum
  // of -log p over classes, zero where the target is ignored, reduced like the NLL term.
  Shape ws(static_cast<size_t>(logits.dim()), 1);
  ws[1] = classes;
  Tensor smooth = neg(sum(weight.defined() ? mul(logp, reshape(weight, ws)) : logp, {1}));
  smooth = masked_fill(smooth, eq(target, static_cast<double>(ignore_index)), 0.0);
  Tensor ret = smooth;
  if (reduction == Reduction::Sum) {
    ret = sum(smooth);
  } else if (reduction == Reduction::Mean) {
    ret = div(sum(smooth), sum(target_weights(target, weight, ignore_index, logits.dtype()).first));
  }
  return add(mul(nll, 1.0 - label_smoothing),
             mul(ret, label_smoothing / static_cast<double>(classes)));
}

IPUML_INLINE Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  IPUML_CHECK(input.shape() == target.shape(), "mse_loss: input of shape ",
              shape_str(input.shape()), " and target of shape ", shape_str(target.shape()),
              " differ (expected equal shapes)");
  Tensor d = sub(input, target);
  return reduce(mul(d, d), reduction);
}

}  // namespace ipuml
