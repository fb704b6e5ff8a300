// Shapes and strides: element counts, contiguous strides, NumPy broadcasting, dim wrapping.
// A Shape is a plain vector of extents; a 0-d tensor has an empty shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/core/error.hpp>

namespace ipuml {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

inline std::string shape_str(const Shape& s) { return detail::str(s); }

// The number of elements; a shape whose count does not fit in int64 is an error, not a wrapped
// count (a wrapped count could match another tensor's and pass a reshape, or size a buffer).
inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s)
    if (__builtin_mul_overflow(n, d, &n))
      fail("shape ", shape_str(s), " has more than 2^63 elements (expected a shape whose ",
           "element count fits in int64)");
  return n;
}

// The bytes a contiguous tensor of this shape needs, or an error naming `op` if that count
// overflows size_t / ptrdiff_t (no allocator can hand that out; checked before asking one).
inline size_t checked_nbytes(const Shape& s, size_t elem_size, const char* op) {
  for (auto d : s) IPUML_CHECK(d >= 0, op, ": negative dimension in shape ", shape_str(s));
  size_t bytes = 0;
  const bool over = __builtin_mul_overflow(static_cast<size_t>(numel(s)), elem_size, &bytes) ||
                    bytes > static_cast<size_t>(PTRDIFF_MAX);
  IPUML_CHECK(!over, op, ": shape ", shape_str(s), " needs more than 2^63 bytes at ", elem_size,
              " bytes per element (expected a shape that fits in memory)");
  return bytes;
}

inline Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

// Wraps a possibly negative dim into [0, rank); names the op in the error.
inline int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  const int64_t r = std::max<int64_t>(rank, 1);
  IPUML_CHECK(dim >= -r && dim < r, op, ": dim ", dim, " is out of range for a tensor of rank ",
              rank, " (expected a dim in [", -r, ", ", r - 1, "])");
  return dim < 0 ? dim + r : dim;
}

inline Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    IPUML_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ",
                shape_str(b), " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides that read a tensor of `in` shape (contiguous) as if it had the broadcast `out` shape.
inline Strides broadcast_strides(const Shape& in, const Shape& out) {
  Strides st(out.size(), 0);
  const Strides cs = contiguous_strides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : cs[i];
  return st;
}

}  // namespace ipuml
