// Element types: float32, and float16/bfloat16 (computed in float32 and rounded once, see
// docs/precision.md; conversions round to nearest even or stochastically);
// int32/int64 hold indices and labels; bool holds masks.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include <ipuml/core/error.hpp>

namespace ipuml {

enum class DType : uint8_t { Float32, Float16, BFloat16, Int32, Int64, Bool };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32:
      return 4;
    case DType::Float16:
      return 2;
    case DType::BFloat16:
      return 2;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::Bool:
      return 1;
  }
  return 0;
}

constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32:
      return "float32";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

constexpr bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16;
}
// float16 and bfloat16: the 16-bit floats, computed in float32 and rounded once.
constexpr bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
constexpr bool is_integral(DType t) { return t == DType::Int32 || t == DType::Int64; }

inline DType dtype_from_name(const std::string& s) {
  for (DType t :
       {DType::Float32, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64, DType::Bool})
    if (s == dtype_name(t)) return t;
  fail("unknown dtype '", s, "': expected one of float32, float16, bfloat16, int32, int64, bool");
}

// IEEE binary16 <-> float32, round to nearest even, with subnormals, infinities and NaN.
inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): add the magic number so the FPU rounds at the right bit.
    const float magic = std::bit_cast<float>(0x3f000000u);  // 0.5: shifts mantissa into place
    float v = std::bit_cast<float>(abs) + magic;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(v) - 0x3f000000u));
  }
  const uint32_t mant_odd = (abs >> 13) & 1u;
  uint32_t r = abs + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (r >> 13));
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: value = mant * 2^-24
      float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
      return sign ? -v : v;
    }
  } else if (exp == 31) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// Stochastic rounding (the IPU's `enableStochasticRounding`): f goes to one of its two
// neighbouring representable values, the farther one with probability proportional to the
// distance, decided by the 32 random bits `r` (f = lo + p (hi - lo) rounds up when r < p 2^32),
// so the rounding is unbiased on average. Exact values, infinities and NaN convert as above;
// beyond the largest finite half the neighbour above is taken as 2^16 (the next power of two).
inline uint16_t float_to_half_bits_stochastic(float f, uint32_t r) {
  if (!std::isfinite(f)) return float_to_half_bits(f);
  const uint16_t nearest = float_to_half_bits(f);
  const float nv = half_bits_to_float(nearest);
  if (nv == f) return nearest;
  const uint16_t sign = nearest & 0x8000u;
  const float a = std::fabs(f);
  // Magnitudes of the half values just below and just above |f| (bit patterns are monotonic).
  uint16_t lo = nearest & 0x7fffu, hi = lo;
  if (std::fabs(nv) > a)
    --lo;
  else
    ++hi;
  const float lv = half_bits_to_float(lo);
  const float hv = hi >= 0x7c00u ? 65536.0f : half_bits_to_float(hi);
  const double p = (static_cast<double>(a) - lv) / (static_cast<double>(hv) - lv);
  const bool up = static_cast<double>(r) < p * 4294967296.0;
  return static_cast<uint16_t>(sign | (up ? hi : lo));
}

// bfloat16 keeps float32's exponent: rounding up with probability (low 16 bits) / 2^16 is adding
// 16 random bits below the kept ones and truncating.
inline uint16_t float_to_bf16_bits_stochastic(float f, uint32_t r) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7f800000u) == 0x7f800000u) return float_to_bf16_bits(f);
  const uint32_t low = x & 0xffffu;
  uint32_t t = x >> 16;
  if ((r >> 16) < low) ++t;  // may carry into the exponent, as rounding up must
  return static_cast<uint16_t>(t);
}

}  // namespace ipuml
