// Shapes and strides: element counts, contiguous strides, NumPy broadcasting, dim wrapping.
// A Shape is a plain vector of extents; a 0-d tensor has an empty shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/core/error.hpp>

namespace ipuml {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

inline int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
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

inline std::string shape_str(const Shape& s) { return detail::str(s); }

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
