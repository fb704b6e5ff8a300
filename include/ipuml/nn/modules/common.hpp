// Pieces every module's options share: IPUML_ARG (chaining setters), ExpandingArray (an int or a
// tuple, as PyTorch's kernel_size/stride arguments) and the Python formatting extra_repr() needs.
#pragma once

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <ipuml/core/error.hpp>

// Declares an option `name` of type T with a chaining setter `name(v)` and a getter `name()`,
// so each option is named once: `IPUML_ARG(double, eps) = 1e-5;`.
#define IPUML_ARG(T, name)                                 \
 public:                                                   \
  auto name(const T& new_##name)->decltype(*this) {        \
    this->name##_ = new_##name;                            \
    return *this;                                          \
  }                                                        \
  auto name(T&& new_##name)->decltype(*this) {             \
    this->name##_ = std::move(new_##name);                 \
    return *this;                                          \
  }                                                        \
  const T& name() const noexcept { return this->name##_; } \
  T& name() noexcept { return this->name##_; }             \
                                                           \
 private:                                                  \
  T name##_

namespace ipuml::nn {

// D integers given either as one number (repeated) or as D numbers. It remembers which, because
// PyTorch's pooling reprs print the argument as the user wrote it (`kernel_size=2` vs `(2, 2)`).
template <size_t D>
class ExpandingArray {
 public:
  ExpandingArray(int64_t v) : scalar_(true) { values_.fill(v); }
  ExpandingArray(std::initializer_list<int64_t> vs) : ExpandingArray(std::vector<int64_t>(vs)) {}
  ExpandingArray(const std::vector<int64_t>& vs) {
    IPUML_CHECK(vs.size() == D, "expected ", D, " values (or one to repeat), got ", vs.size(),
                " values ", vs);
    for (size_t i = 0; i < D; ++i) values_[i] = vs[i];
  }

  int64_t operator[](size_t i) const { return values_[i]; }
  std::vector<int64_t> vec() const { return {values_.begin(), values_.end()}; }
  bool given_as_scalar() const { return scalar_; }
  bool all_equal(int64_t v) const {
    for (auto x : values_)
      if (x != v) return false;
    return true;
  }
  bool operator==(const ExpandingArray& o) const { return values_ == o.values_; }

 private:
  std::array<int64_t, D> values_{};
  bool scalar_ = false;
};

namespace repr {

// Python's repr of a float: shortest round-trip digits, scientific below 1e-4 or from 1e16
// ("1e-05", "0.001", "0.1", "1.0", "1e+16").
inline std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string s(buf, res.ptr);  // "-d.ddde[+-]XX"
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const size_t e = s.find('e');
  const int exp10 = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  std::string out;
  if (exp10 < -4 || exp10 >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int a = exp10 < 0 ? -exp10 : exp10;
    out += std::string("e") + (exp10 < 0 ? "-" : "+") + (a < 10 ? "0" : "") + std::to_string(a);
  } else if (exp10 < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  } else {
    const size_t int_len = static_cast<size_t>(exp10) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return neg ? "-" + out : out;
}

inline std::string py_bool(bool b) { return b ? "True" : "False"; }

// A Python tuple of ints: "(3, 3)", and "(4,)" for one element.
inline std::string py_tuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

// As the user wrote it: "2" or "(2, 3)".
template <size_t D>
std::string py_arg(const ExpandingArray<D>& a) {
  return a.given_as_scalar() ? std::to_string(a[0]) : py_tuple(a.vec());
}

inline std::string py_optional_float(const std::optional<double>& v) {
  return v ? py_float(*v) : "None";
}

}  // namespace repr
}  // namespace ipuml::nn
