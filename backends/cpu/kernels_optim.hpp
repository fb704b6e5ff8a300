// CPU kernels of the fused optimizer updates (ir::OpKind::AdamUpdate, SgdUpdate): one pass that
// reads the parameter, its gradient and state once and writes them once, in xsimd vectors over
// oneTBB.
#pragma once

#include <cmath>

#include <ipuml/backends/cpu/kernels_common.hpp>

namespace ipuml::cpu::kdetail {

// What one update multiplies by, worked out once per call in double from the lr and step
// tensors as torch.optim does (1 - beta^t, lr / (1 - beta1^t), sqrt(1 - beta2^t) are Python
// floats there), then rounded to float32 as PyTorch rounds a scalar operand of a float32 op.
struct AdamScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  float decay;                  // decoupled decay: 1 - lr * wd
  float neg_step_size;          // -lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
};

// 1 - beta^t as -expm1(t log beta): no cancellation when beta^t is close to 1.
inline double adam_one_minus_pow(double beta, double t) {
  return beta == 0.0 ? 1.0 : -std::expm1(t * std::log(beta));
}

inline AdamScalars adam_scalars(const ir::Attrs& a, float lr_value, float step_value) {
  const double b1 = a.reals[0], b2 = a.reals[1], eps = a.reals[2], wd = a.reals[3];
  const double lr = lr_value, t = step_value;
  AdamScalars s{};
  s.beta1 = static_cast<float>(b1);
  s.one_minus_beta1 = static_cast<float>(1.0 - b1);
  s.beta2 = static_cast<float>(b2);
  s.one_minus_beta2 = static_cast<float>(1.0 - b2);
  s.eps = static_cast<float>(eps);
  s.weight_decay = static_cast<float>(wd);
  s.decay = static_cast<float>(1.0 - lr * wd);
  s.neg_step_size = static_cast<float>(-(lr / adam_one_minus_pow(b1, t)));
  s.bias_correction2_sqrt = static_cast<float>(std::sqrt(adam_one_minus_pow(b2, t)));
  return s;
}

// Pointers of one update: what it reads (the state's old values, the gradient) and where the
// new state goes (each output may be exactly its input: element i is read before it is written).
struct AdamBuffers {
  const float *p, *m, *v, *vmax, *g;
  float *p_out, *m_out, *v_out, *vmax_out;
};

// Elements [i, i + kLanes) with torch.optim's order of operations (Adam: grad + wd * param;
// AdamW: param * (1 - lr * wd) first); only IEEE-exact operations (no FMA, no approximate
// reciprocal or square root), so a scalar loop, any vector width and any split give these bits.
template <int Mode, bool Amsgrad>
inline void adam_lanes(const AdamScalars& s, const AdamBuffers& b, int64_t i) {
  fbatch p = fbatch::load_unaligned(b.p + i);
  fbatch g = fbatch::load_unaligned(b.g + i);
  if constexpr (Mode == 2) p = p * fbatch(s.decay);
  if constexpr (Mode == 1) g = g + p * fbatch(s.weight_decay);
  const fbatch m =
      fbatch::load_unaligned(b.m + i) * fbatch(s.beta1) + g * fbatch(s.one_minus_beta1);
  const fbatch v =
      fbatch::load_unaligned(b.v + i) * fbatch(s.beta2) + (g * g) * fbatch(s.one_minus_beta2);
  m.store_unaligned(b.m_out + i);
  v.store_unaligned(b.v_out + i);
  fbatch second = v;
  if constexpr (Amsgrad) {
    // torch.maximum: a NaN on either side propagates.
    const fbatch old = fbatch::load_unaligned(b.vmax + i);
    second = xsimd::select((old > v) | (old != old), old, v);
    second.store_unaligned(b.vmax_out + i);
  }
  const fbatch denom = xsimd::sqrt(second) / fbatch(s.bias_correction2_sqrt) + fbatch(s.eps);
  p = p + (m / denom) * fbatch(s.neg_step_size);
  p.store_unaligned(b.p_out + i);
}

template <int Mode, bool Amsgrad>
void adam_range(const AdamScalars& s, const AdamBuffers& b, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) adam_lanes<Mode, Amsgrad>(s, b, i);
  if (i == end) return;
  // The tail through the same vector code, from padded copies.
  alignas(64) float buf[9][fbatch::size] = {};
  const size_t bytes = static_cast<size_t>(end - i) * sizeof(float);
  std::memcpy(buf[0], b.p + i, bytes);
  std::memcpy(buf[1], b.m + i, bytes);
  std::memcpy(buf[2], b.v + i, bytes);
  if (Amsgrad) std::memcpy(buf[3], b.vmax + i, bytes);
  std::memcpy(buf[4], b.g + i, bytes);
  const AdamBuffers t{buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6], buf[7], buf[8]};
  adam_lanes<Mode, Amsgrad>(s, t, 0);
  std::memcpy(b.p_out + i, buf[5], bytes);
  std::memcpy(b.m_out + i, buf[6], bytes);
  std::memcpy(b.v_out + i, buf[7], bytes);
  if (Amsgrad) std::memcpy(b.vmax_out + i, buf[8], bytes);
}

// A fused update's operands: `states` state tensors and the gradient, float32 of one size (each
// state's new value likewise), then one-element float32 scalars (lr, step).
inline void check_update_operands(const char* name, const std::vector<ConstBuffer>& in,
                                  const std::vector<MutableBuffer>& out, size_t states) {
  const int64_t n = in[0].meta.numel();
  for (size_t j = 0; j <= states; ++j)
    IPUML_CHECK(
        in[j].meta.dtype == DType::Float32 && in[j].meta.numel() == n &&
            (j == states || (out[j].meta.dtype == DType::Float32 && out[j].meta.numel() == n)),
        name, ": expected float32 operands of ", n, " elements");
  for (size_t j = states + 1; j < in.size(); ++j)
    IPUML_CHECK(in[j].meta.dtype == DType::Float32 && in[j].meta.numel() == 1, name,
                ": expected one-element float32 lr and step");
}

// in: param, exp_avg, exp_avg_sq, [max_exp_avg_sq], grad, lr, step; out: the new param,
// exp_avg, exp_avg_sq [, max_exp_avg_sq] (ir::infer checks shapes, dtypes and attributes).
inline void k_adam_update(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                          const std::vector<MutableBuffer>& out) {
  const bool ams = a.flag;
  const size_t states = ams ? 4 : 3;
  expect_n("AdamUpdate", in.size(), states + 3, out.size(), states);
  IPUML_CHECK(a.reals.size() == 4 && a.mode >= 0 && a.mode <= 2,
              "AdamUpdate: expected 4 scalars and a weight decay mode in 0..2");
  check_update_operands("AdamUpdate", in, out, states);
  const int64_t n = in[0].meta.numel();
  const AdamScalars s =
      adam_scalars(a, *in_ptr<float>(in[states + 1]), *in_ptr<float>(in[states + 2]));
  const AdamBuffers b{in_ptr<float>(in[0]),
                      in_ptr<float>(in[1]),
                      in_ptr<float>(in[2]),
                      ams ? in_ptr<float>(in[3]) : nullptr,
                      in_ptr<float>(in[states]),
                      out_ptr<float>(out[0]),
                      out_ptr<float>(out[1]),
                      out_ptr<float>(out[2]),
                      ams ? out_ptr<float>(out[3]) : nullptr};
  auto run = [&](auto mode, auto amsgrad) {
    parallel_blocks(n, kBlock, [&](int64_t lo, int64_t hi) {
      adam_range<decltype(mode)::value, decltype(amsgrad)::value>(s, b, lo, hi);
    });
  };
  auto with_mode = [&](auto amsgrad) {
    switch (a.mode) {
      case 1:
        return run(std::integral_constant<int, 1>{}, amsgrad);
      case 2:
        return run(std::integral_constant<int, 2>{}, amsgrad);
      default:
        return run(std::integral_constant<int, 0>{}, amsgrad);
    }
  };
  if (ams)
    with_mode(std::true_type{});
  else
    with_mode(std::false_type{});
}

}  // namespace ipuml::cpu::kdetail

namespace ipuml::cpu::kdetail {

// The fused SGD update (ir::OpKind::SgdUpdate): its scalars rounded to float32 as PyTorch
// rounds a scalar operand of a float32 op (the composite of tensor ops it replaced did the same).
struct SgdScalars {
  float momentum, one_minus_dampening, weight_decay;
  float neg_lr;  // -lr, exact
};

struct SgdBuffers {
  const float *p, *buf, *g;
  float *p_out, *buf_out;
};

// Elements [i, i + kLanes) with torch.optim.SGD's order of operations: g += wd * p; buf = g on
// the first step (Mom 2), else momentum * buf + (1 - dampening) * g (Mom 1; g * 1 is g when
// there is no dampening); g = nesterov ? g + momentum * buf : buf; p += -lr * g. IEEE-exact
// operations only (no FMA), each rounded as the separate tensor ops rounded them.
template <bool Decay, int Mom, bool Nesterov>
inline void sgd_lanes(const SgdScalars& s, const SgdBuffers& b, int64_t i) {
  const fbatch p = fbatch::load_unaligned(b.p + i);
  fbatch g = fbatch::load_unaligned(b.g + i);
  if constexpr (Decay) g = g + p * fbatch(s.weight_decay);
  if constexpr (Mom != 0) {
    fbatch buf = g;
    if constexpr (Mom == 1)
      buf = fbatch::load_unaligned(b.buf + i) * fbatch(s.momentum) +
            g * fbatch(s.one_minus_dampening);
    buf.store_unaligned(b.buf_out + i);
    if constexpr (Nesterov)
      g = g + buf * fbatch(s.momentum);
    else
      g = buf;
  }
  (p + g * fbatch(s.neg_lr)).store_unaligned(b.p_out + i);
}

template <bool Decay, int Mom, bool Nesterov>
void sgd_range(const SgdScalars& s, const SgdBuffers& b, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) sgd_lanes<Decay, Mom, Nesterov>(s, b, i);
  if (i == end) return;
  // The tail through the same vector code, from padded copies.
  alignas(64) float pad[5][fbatch::size] = {};
  const size_t bytes = static_cast<size_t>(end - i) * sizeof(float);
  std::memcpy(pad[0], b.p + i, bytes);
  if (Mom == 1) std::memcpy(pad[1], b.buf + i, bytes);
  std::memcpy(pad[2], b.g + i, bytes);
  const SgdBuffers t{pad[0], pad[1], pad[2], pad[3], pad[4]};
  sgd_lanes<Decay, Mom, Nesterov>(s, t, 0);
  std::memcpy(b.p_out + i, pad[3], bytes);
  if (Mom != 0) std::memcpy(b.buf_out + i, pad[4], bytes);
}

// in: param, [momentum_buffer], grad, lr, [step]; out: the new param [, momentum_buffer]
// (ir::infer checks shapes, dtypes and attributes).
inline void k_sgd_update(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                         const std::vector<MutableBuffer>& out) {
  const size_t states = a.flag ? 2 : 1;
  const size_t scalars = a.mode == 1 ? 2 : 1;
  expect_n("SgdUpdate", in.size(), states + 1 + scalars, out.size(), states);
  IPUML_CHECK(a.reals.size() == 3, "SgdUpdate: expected 3 scalars");
  check_update_operands("SgdUpdate", in, out, states);
  const int64_t n = in[0].meta.numel();
  SgdScalars s{};
  s.momentum = static_cast<float>(a.reals[0]);
  s.one_minus_dampening = static_cast<float>(1.0 - a.reals[1]);
  s.weight_decay = static_cast<float>(a.reals[2]);
  s.neg_lr = -*in_ptr<float>(in[states + 1]);
  // The first step (the step input, already counting it, is 1) takes the gradient as the buffer.
  const bool first = a.mode == 1 && *in_ptr<float>(in[states + 2]) == 1.0f;
  const SgdBuffers b{in_ptr<float>(in[0]), a.flag ? in_ptr<float>(in[1]) : nullptr,
                     in_ptr<float>(in[states]), out_ptr<float>(out[0]),
                     a.flag ? out_ptr<float>(out[1]) : nullptr};
  auto run = [&](auto decay, auto mom, auto nesterov) {
    parallel_blocks(n, kBlock, [&](int64_t lo, int64_t hi) {
      sgd_range<decltype(decay)::value, decltype(mom)::value, decltype(nesterov)::value>(s, b, lo,
                                                                                         hi);
    });
  };
  auto with_momentum = [&](auto decay) {
    using F = std::false_type;
    using T = std::true_type;
    if (!a.flag) return run(decay, std::integral_constant<int, 0>{}, F{});
    if (first)
      return a.flag2 ? run(decay, std::integral_constant<int, 2>{}, T{})
                     : run(decay, std::integral_constant<int, 2>{}, F{});
    return a.flag2 ? run(decay, std::integral_constant<int, 1>{}, T{})
                   : run(decay, std::integral_constant<int, 1>{}, F{});
  };
  if (a.reals[2] != 0.0)
    with_momentum(std::true_type{});
  else
    with_momentum(std::false_type{});
}

}  // namespace ipuml::cpu::kdetail
