// Shared machinery of the CPU kernels: dtype dispatch, value conversions, partition-independent
// parallel loops, broadcast plans and the vector map that every float elementwise kernel uses.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include <xsimd/xsimd.hpp>

#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/backends/cpu/vmath.hpp>
#include <ipuml/core/dtype.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/core/parallel.hpp>
#include <ipuml/core/shape.hpp>

namespace ipuml::cpu::kdetail {

using fbatch = xsimd::batch<float>;
inline constexpr int64_t kLanes = static_cast<int64_t>(fbatch::size);

// Elementwise work is cut into blocks of this many elements; block boundaries (not thread count)
// decide where vector loops start, so every element sees the same instructions.
inline constexpr int64_t kBlock = 8192;

// Calls fn(begin, end) over [0, n) in parallel with boundaries at multiples of `block`.
template <typename Fn>
void parallel_blocks(int64_t n, int64_t block, Fn&& fn) {
  if (n <= 0) return;
  const int64_t nb = (n + block - 1) / block;
  ipuml::parallel_for(nb, 1,
                      [&](int64_t b0, int64_t b1) { fn(b0 * block, std::min(n, b1 * block)); });
}

// Parallel over `n` independent items of roughly `cost` elements of work each.
template <typename Fn>
void parallel_items(int64_t n, int64_t cost, Fn&& fn) {
  const int64_t grain = std::max<int64_t>(1, kBlock / std::max<int64_t>(cost, 1));
  ipuml::parallel_for(n, grain, fn);
}

// ---- dtype dispatch -------------------------------------------------------------------------

// Tags carry the storage type; float16 and bfloat16 share uint16_t storage but differ in tag.
struct F32 {
  using S = float;
  static constexpr DType dt = DType::Float32;
};
struct F16 {
  using S = uint16_t;
  static constexpr DType dt = DType::Float16;
};
struct BF16 {
  using S = uint16_t;
  static constexpr DType dt = DType::BFloat16;
};
struct I32 {
  using S = int32_t;
  static constexpr DType dt = DType::Int32;
};
struct I64 {
  using S = int64_t;
  static constexpr DType dt = DType::Int64;
};
struct B8 {
  using S = uint8_t;
  static constexpr DType dt = DType::Bool;
};

template <typename Fn>
decltype(auto) dispatch_all(DType t, Fn&& fn) {
  switch (t) {
    case DType::Float32:
      return fn(F32{});
    case DType::Float16:
      return fn(F16{});
    case DType::BFloat16:
      return fn(BF16{});
    case DType::Int32:
      return fn(I32{});
    case DType::Int64:
      return fn(I64{});
    case DType::Bool:
      return fn(B8{});
  }
  fail("cpu kernel: unknown dtype ", static_cast<int>(t));
}

// Storage-only dispatch by element size, for ops that move bytes without looking at values.
template <typename Fn>
decltype(auto) dispatch_size(size_t bytes, Fn&& fn) {
  switch (bytes) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
  }
  fail("cpu kernel: unsupported element size ", bytes);
}

[[noreturn]] inline void bad_dtype(const char* op, DType t) {
  fail(op, ": not implemented for dtype ", dtype_name(t));
}

// ---- conversions ----------------------------------------------------------------------------

// float32 rounded to odd: a later rounding to float16/bfloat16 (<= 11 bits) is then correctly
// rounded, avoiding double-rounding errors when converting from double or int64.
inline float to_float_odd(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(f) && static_cast<double>(f) != d && (std::bit_cast<uint32_t>(f) & 1u) == 0)
    f = std::nextafter(f, d > static_cast<double>(f) ? std::numeric_limits<float>::infinity()
                                                     : -std::numeric_limits<float>::infinity());
  return f;
}

inline float int_to_float_odd(int64_t v) {
  const bool neg = v < 0;
  uint64_t u = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (u >= (uint64_t{1} << 24)) {
    const int shift = 64 - std::countl_zero(u) - 24;
    const uint64_t sticky = (u & ((uint64_t{1} << shift) - 1)) != 0;
    u = ((u >> shift) | sticky) << shift;  // 24 significant bits, exactly representable
  }
  const float f = static_cast<float>(u);
  return neg ? -f : f;
}

// Float to integer truncates toward zero; NaN gives 0 and out-of-range values saturate, so the
// conversion is defined for every input (C++ leaves it undefined).
template <typename I>
I float_to_int(double f) {
  if (std::isnan(f)) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());
  if (f <= lo) return std::numeric_limits<I>::min();
  if (f >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(f);
}

// Reads an element as float (float tags) or int64 (integer and bool tags).
template <typename Tag>
auto load_value(typename Tag::S s) {
  if constexpr (std::is_same_v<Tag, F32>)
    return s;
  else if constexpr (std::is_same_v<Tag, F16>)
    return half_bits_to_float(s);
  else if constexpr (std::is_same_v<Tag, BF16>)
    return bf16_bits_to_float(s);
  else if constexpr (std::is_same_v<Tag, B8>)
    return static_cast<int64_t>(s != 0);
  else
    return static_cast<int64_t>(s);
}

// Converts one element between any two dtypes (the Cast semantics).
template <typename From, typename To>
typename To::S convert(typename From::S s) {
  using S = typename To::S;
  const auto v = load_value<From>(s);
  constexpr bool from_float = std::is_same_v<decltype(v), const float>;
  if constexpr (std::is_same_v<To, B8>) {
    return static_cast<S>(v != 0);
  } else if constexpr (std::is_same_v<To, F32>) {
    return static_cast<float>(v);
  } else if constexpr (std::is_same_v<To, F16>) {
    if constexpr (from_float)
      return float_to_half_bits(v);
    else
      return float_to_half_bits(int_to_float_odd(v));
  } else if constexpr (std::is_same_v<To, BF16>) {
    if constexpr (from_float)
      return float_to_bf16_bits(v);
    else
      return float_to_bf16_bits(int_to_float_odd(v));
  } else {
    if constexpr (from_float)
      return float_to_int<S>(v);
    else
      return static_cast<S>(v);  // int64 -> int32 wraps modulo 2^32, like PyTorch
  }
}

// A double (Full, Arange, random values) stored as dtype Tag.
template <typename Tag>
typename Tag::S from_double(double d) {
  using S = typename Tag::S;
  if constexpr (std::is_same_v<Tag, F32>)
    return static_cast<float>(d);
  else if constexpr (std::is_same_v<Tag, F16>)
    return float_to_half_bits(to_float_odd(d));
  else if constexpr (std::is_same_v<Tag, BF16>)
    return float_to_bf16_bits(to_float_odd(d));
  else if constexpr (std::is_same_v<Tag, B8>)
    return static_cast<S>(d != 0);
  else
    return float_to_int<S>(d);
}

// ---- vector map -----------------------------------------------------------------------------

// y[i] = f(x[i]) with a lane-wise batch function; the tail is padded into a full batch so every
// element, wherever it falls, goes through the same vector code.
template <typename F>
void map_batch(const float* x, float* y, int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) f(fbatch::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) float buf[fbatch::size] = {};
    std::memcpy(buf, x + i, static_cast<size_t>(n - i) * sizeof(float));
    f(fbatch::load_aligned(buf)).store_aligned(buf);
    std::memcpy(y + i, buf, static_cast<size_t>(n - i) * sizeof(float));
  }
}

template <typename F>
void map_batch2(const float* a, const float* b, float* y, int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    f(fbatch::load_unaligned(a + i), fbatch::load_unaligned(b + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) float ba[fbatch::size] = {}, bb[fbatch::size] = {};
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(ba, a + i, bytes);
    std::memcpy(bb, b + i, bytes);
    f(fbatch::load_aligned(ba), fbatch::load_aligned(bb)).store_aligned(ba);
    std::memcpy(y + i, ba, bytes);
  }
}

template <typename F>
void map_batch3(const float* a, const float* b, const float* c, float* y, int64_t n, F&& f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    f(fbatch::load_unaligned(a + i), fbatch::load_unaligned(b + i), fbatch::load_unaligned(c + i))
        .store_unaligned(y + i);
  if (i < n) {
    alignas(64) float ba[fbatch::size] = {}, bb[fbatch::size] = {}, bc[fbatch::size] = {};
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(ba, a + i, bytes);
    std::memcpy(bb, b + i, bytes);
    std::memcpy(bc, c + i, bytes);
    f(fbatch::load_aligned(ba), fbatch::load_aligned(bb), fbatch::load_aligned(bc))
        .store_aligned(ba);
    std::memcpy(y + i, ba, bytes);
  }
}

// ---- exp, tanh and erf ----------------------------------------------------------------------

// Kernels built on exp, tanh or erf run them through vmath (backends/cpu/vmath.hpp: xsimd's
// bits, 16 or 8 lanes at a time) in chunks of this many floats: the argument into a small buffer
// with the fbatch arithmetic it always had, vmath, then the rest. A float stored between two
// fbatch operations is the float they pass in a register, so the bits are those of the single
// fbatch expression around xsimd::exp / tanh / erf.
inline constexpr int64_t kMathChunk = 512;

// y[i] = exp(x[i] - shift), the bits of xsimd::exp(v - shift); y may be x.
inline void exp_shifted(const float* x, float shift, float* y, int64_t n) {
  const fbatch sb(shift);
  for (int64_t c = 0; c < n; c += kMathChunk) {
    const int64_t m = std::min(kMathChunk, n - c);
    map_batch(x + c, y + c, m, [&](fbatch v) { return v - sb; });
    vmath::exp(y + c, y + c, m);
  }
}

// ---- accurate sums --------------------------------------------------------------------------

// Pairwise summation with 8 interleaved accumulators at the leaves (vectorisable without
// reassociation); the order depends only on n, never on threads.
inline float pairwise_sum(const float* x, int64_t n) {
  if (n < 8) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  if (n <= 256) {
    float r[8];
    for (int j = 0; j < 8; ++j) r[j] = x[j];
    int64_t i = 8;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += x[i + j];
    float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += x[i];
    return s;
  }
  int64_t half = n / 2;
  half -= half % 8;
  return pairwise_sum(x, half) + pairwise_sum(x + half, n - half);
}

inline double pairwise_sum_d(const double* x, int64_t n) {
  if (n <= 8) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  const int64_t half = n / 2;
  return pairwise_sum_d(x, half) + pairwise_sum_d(x + half, n - half);
}

// ---- broadcast plans ------------------------------------------------------------------------

// N operands read with (possibly zero) strides over one output shape, coalesced so that the
// innermost loop is as long as possible. Inner strides are 0 or 1 after coalescing.
template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> sizes;                   // outer dims (excluding the inner one)
  std::vector<std::array<int64_t, N>> strides;  // per outer dim, per operand
  int64_t inner = 1;
  std::array<int64_t, N> inner_stride{};
  int64_t outer = 1;
};

template <size_t N>
BroadcastPlan<N> make_plan(const Shape& out, const std::array<const Shape*, N>& ins) {
  std::vector<int64_t> sz;
  std::vector<std::array<int64_t, N>> st;
  std::array<Strides, N> bs;
  for (size_t k = 0; k < N; ++k) bs[k] = broadcast_strides(*ins[k], out);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    std::array<int64_t, N> s{};
    for (size_t k = 0; k < N; ++k) s[k] = bs[k][d];
    if (!sz.empty()) {
      bool merge = true;
      for (size_t k = 0; k < N; ++k) merge = merge && st.back()[k] == s[k] * out[d];
      if (merge) {
        sz.back() *= out[d];
        st.back() = s;
        continue;
      }
    }
    sz.push_back(out[d]);
    st.push_back(s);
  }
  BroadcastPlan<N> p;
  if (!sz.empty()) {
    p.inner = sz.back();
    p.inner_stride = st.back();
    sz.pop_back();
    st.pop_back();
  }
  p.sizes = std::move(sz);
  p.strides = std::move(st);
  for (auto s : p.sizes) p.outer *= s;
  return p;
}

// Calls row(out_offset, in_offsets, len) over the plan; rows are split into fixed blocks when
// there is a single long row, so the split never depends on the thread count.
template <size_t N, typename Row>
void for_each_row(const BroadcastPlan<N>& p, Row&& row) {
  if (p.outer * p.inner == 0) return;
  if (p.outer == 1) {
    parallel_blocks(p.inner, kBlock, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = b * p.inner_stride[k];
      row(b, off, e - b);
    });
    return;
  }
  const size_t nd = p.sizes.size();
  parallel_items(p.outer, p.inner, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> idx(nd);
    std::array<int64_t, N> off{};
    int64_t rem = r0;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % p.sizes[d];
      rem /= p.sizes[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * p.strides[d][k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(r * p.inner, off, p.inner);
      for (size_t d = nd; d-- > 0;) {
        for (size_t k = 0; k < N; ++k) off[k] += p.strides[d][k];
        if (++idx[d] < p.sizes[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= p.strides[d][k] * p.sizes[d];
        idx[d] = 0;
      }
    }
  });
}

// Splits a shape around dim d into (outer, size of d, inner) element counts.
struct Split3 {
  int64_t outer = 1, mid = 1, inner = 1;
};
inline Split3 split_at(const Shape& s, int64_t d) {
  Split3 r;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    if (i < d)
      r.outer *= s[i];
    else if (i == d)
      r.mid = s[i];
    else
      r.inner *= s[i];
  }
  return r;
}

template <typename T>
const T* in_ptr(const ConstBuffer& b) {
  return static_cast<const T*>(b.data);
}
template <typename T>
T* out_ptr(const MutableBuffer& b) {
  return static_cast<T*>(b.data);
}

// Reads index i of an int32/int64 index tensor.
inline int64_t read_index(const ConstBuffer& b, int64_t i) {
  if (b.meta.dtype == DType::Int64) return in_ptr<int64_t>(b)[i];
  if (b.meta.dtype == DType::Int32) return in_ptr<int32_t>(b)[i];
  fail("index tensor must be int64 or int32, got ", dtype_name(b.meta.dtype));
}

inline void expect_n(const char* op, size_t got_in, size_t want_in, size_t got_out,
                     size_t want_out) {
  IPUML_CHECK(got_in == want_in && got_out == want_out, op, ": expected ", want_in, " inputs and ",
              want_out, " outputs, got ", got_in, " and ", got_out);
}

}  // namespace ipuml::cpu::kdetail
