// Half-precision compute on the CPU: float16/bfloat16 operands are widened to float32, the op
// runs in float32 and each half result is rounded once to nearest even. That is the arithmetic
// of an IPU vertex with float accumulators ("16.32"); half partials and stochastic rounding are
// the IPU executor's (it rounds where its plan does). Creation, casts and data movement handle
// every dtype themselves and never come here.
#pragma once

#include <vector>

#include <ipuml/backends/cpu/kernels_common.hpp>

namespace ipuml::cpu::kdetail {

inline bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// Ops whose kernels move or create elements of any dtype without arithmetic.
inline bool dtype_generic(ir::OpKind k) { return ir::op_has(k, ir::kRaw); }

inline void widen(DType t, const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  parallel_blocks(n, kBlock * 4, [&](int64_t b, int64_t e) {
    if (t == DType::Float16)
      for (int64_t i = b; i < e; ++i) dst[i] = half_bits_to_float(h[i]);
    else
      for (int64_t i = b; i < e; ++i) dst[i] = bf16_bits_to_float(h[i]);
  });
}

inline void narrow(DType t, const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  parallel_blocks(n, kBlock * 4, [&](int64_t b, int64_t e) {
    if (t == DType::Float16)
      for (int64_t i = b; i < e; ++i) h[i] = float_to_half_bits(src[i]);
    else
      for (int64_t i = b; i < e; ++i) h[i] = float_to_bf16_bits(src[i]);
  });
}

}  // namespace ipuml::cpu::kdetail
