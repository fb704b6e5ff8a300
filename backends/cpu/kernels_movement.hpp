// CPU kernels that move data without arithmetic (permute, slice, expand, cat) and the indexing
// ops (index_select/index_add, gather/scatter_add) with bounds checks before any write.
#pragma once

#include <ipuml/backends/cpu/kernels_common.hpp>

#include <numeric>

namespace ipuml::cpu::kdetail {

// Offsets of item c of a multi-index over `sizes`, through two stride sets.
inline void unravel2(int64_t c, const std::vector<int64_t>& sizes, const std::vector<int64_t>& sa,
                     const std::vector<int64_t>& sb, int64_t& oa, int64_t& ob) {
  oa = ob = 0;
  for (size_t d = sizes.size(); d-- > 0;) {
    const int64_t i = c % sizes[d];
    c /= sizes[d];
    oa += i * sa[d];
    ob += i * sb[d];
  }
}

// out (contiguous, shape in_shape permuted by perm) = x permuted. Rows whose source is contiguous
// are copied with memcpy; otherwise a cache-blocked 2-d transpose runs between the output's
// innermost dim and the dim that is innermost in the source.
template <typename T>
void permute_copy(const T* x, const Shape& in_shape, const std::vector<int64_t>& perm, T* y) {
  const Strides cs = contiguous_strides(in_shape);
  std::vector<int64_t> sz, ist;
  for (size_t j = 0; j < perm.size(); ++j) {
    const int64_t s = in_shape[perm[j]];
    if (s == 1) continue;
    const int64_t st = cs[perm[j]];
    if (!sz.empty() && ist.back() == st * s) {
      sz.back() *= s;
      ist.back() = st;
      continue;
    }
    sz.push_back(s);
    ist.push_back(st);
  }
  const int64_t n = numel(in_shape);
  if (n == 0) return;
  if (sz.empty() || ist.back() == 1) {
    const int64_t inner = sz.empty() ? 1 : sz.back();
    std::vector<int64_t> osz(sz.begin(), sz.end() - (sz.empty() ? 0 : 1));
    std::vector<int64_t> oist(ist.begin(), ist.end() - (ist.empty() ? 0 : 1));
    std::vector<int64_t> ost = contiguous_strides(osz);
    for (auto& v : ost) v *= inner;
    parallel_items(n / inner, inner, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t oi, oo;
        unravel2(r, osz, oist, ost, oi, oo);
        std::memcpy(y + oo, x + oi, static_cast<size_t>(inner) * sizeof(T));
      }
    });
    return;
  }
  const size_t nd = sz.size();
  const Strides ost = contiguous_strides(sz);
  size_t q = 0;
  for (size_t d = 0; d < nd; ++d)
    if (ist[d] == 1) q = d;
  const size_t last = nd - 1;
  std::vector<int64_t> osz, oist, oost;
  for (size_t d = 0; d < nd; ++d) {
    if (d == q || d == last) continue;
    osz.push_back(sz[d]);
    oist.push_back(ist[d]);
    oost.push_back(ost[d]);
  }
  constexpr int64_t kTile = 32;
  const int64_t sq = sz[q], sl = sz[last];
  const int64_t oq = ost[q], il = ist[last];
  const int64_t qtiles = (sq + kTile - 1) / kTile;
  const int64_t combos = n / (sq * sl);
  parallel_items(combos * qtiles, kTile * sl, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      int64_t bi, bo;
      unravel2(t / qtiles, osz, oist, oost, bi, bo);
      const int64_t q0 = (t % qtiles) * kTile, q1 = std::min(sq, q0 + kTile);
      for (int64_t l0 = 0; l0 < sl; l0 += kTile) {
        const int64_t l1 = std::min(sl, l0 + kTile);
        for (int64_t a = q0; a < q1; ++a) {
          const T* src = x + bi + a;
          T* dst = y + bo + a * oq;
          for (int64_t l = l0; l < l1; ++l) dst[l] = src[l * il];
        }
      }
    }
  });
}

inline void k_permute(const ir::Attrs& a, const ConstBuffer& in, const MutableBuffer& o) {
  const Shape& s = in.meta.shape;
  IPUML_CHECK(a.dims.size() == s.size(), "permute: expected ", s.size(), " dims, got ",
              ipuml::detail::str(a.dims));
  std::vector<bool> seen(s.size(), false);
  for (auto d : a.dims) {
    IPUML_CHECK(d >= 0 && d < static_cast<int64_t>(s.size()) && !seen[d],
                "permute: ", ipuml::detail::str(a.dims), " is not a permutation of ", s.size(),
                " dims");
    seen[d] = true;
  }
  dispatch_size(dtype_size(in.meta.dtype), [&](auto tag) {
    using T = decltype(tag);
    permute_copy(in_ptr<T>(in), s, a.dims, out_ptr<T>(o));
  });
}

inline void k_slice(const ir::Attrs& a, const ConstBuffer& in, const MutableBuffer& o) {
  const Shape& s = in.meta.shape;
  IPUML_CHECK(a.dims.size() == 1 && a.dims[0] >= 0 && a.dims[0] < static_cast<int64_t>(s.size()),
              "slice: invalid dim ", ipuml::detail::str(a.dims), " for shape ", shape_str(s));
  const auto sp = split_at(s, a.dims[0]);
  IPUML_CHECK(a.step > 0 && a.start >= 0 && a.start <= a.end && a.end <= sp.mid, "slice: range [",
              a.start, ", ", a.end, ") step ", a.step, " is invalid for dim ", a.dims[0],
              " of size ", sp.mid);
  const int64_t len = (a.end - a.start + a.step - 1) / a.step;
  const size_t es = dtype_size(in.meta.dtype);
  const char* x = static_cast<const char*>(in.data);
  char* y = static_cast<char*>(o.data);
  if (a.step == 1) {
    const size_t row = static_cast<size_t>(len * sp.inner) * es;
    parallel_items(sp.outer, len * sp.inner, [&](int64_t o0, int64_t o1) {
      for (int64_t i = o0; i < o1; ++i)
        std::memcpy(y + static_cast<size_t>(i) * row,
                    x + static_cast<size_t>(i * sp.mid + a.start) * sp.inner * es, row);
    });
    return;
  }
  const size_t row = static_cast<size_t>(sp.inner) * es;
  parallel_items(sp.outer * len, sp.inner, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / len, j = r % len;
      std::memcpy(y + static_cast<size_t>(r) * row,
                  x + static_cast<size_t>(i * sp.mid + a.start + j * a.step) * row, row);
    }
  });
}

inline void k_expand(const ConstBuffer& in, const MutableBuffer& o) {
  IPUML_CHECK(o.meta.shape.size() >= in.meta.shape.size() &&
                  broadcast_shapes(in.meta.shape, o.meta.shape, "expand") == o.meta.shape,
              "expand: cannot expand ", shape_str(in.meta.shape), " to ", shape_str(o.meta.shape));
  const auto p = make_plan<1>(o.meta.shape, {&in.meta.shape});
  dispatch_size(dtype_size(in.meta.dtype), [&](auto tag) {
    using T = decltype(tag);
    const T* x = in_ptr<T>(in);
    T* y = out_ptr<T>(o);
    for_each_row(p, [&](int64_t oo, const std::array<int64_t, 1>& off, int64_t len) {
      if (p.inner_stride[0] == 1)
        std::memcpy(y + oo, x + off[0], static_cast<size_t>(len) * sizeof(T));
      else
        std::fill(y + oo, y + oo + len, x[off[0]]);
    });
  });
}

inline void k_cat(const ir::Attrs& a, const std::vector<ConstBuffer>& in, const MutableBuffer& o) {
  IPUML_CHECK(!in.empty() && a.dims.size() == 1, "cat: expected inputs and one dim");
  const int64_t d = a.dims[0];
  const Shape& os = o.meta.shape;
  IPUML_CHECK(d >= 0 && d < static_cast<int64_t>(std::max<size_t>(os.size(), 1)), "cat: dim ", d,
              " out of range for shape ", shape_str(os));
  const auto sp = split_at(os, d);
  const size_t es = dtype_size(o.meta.dtype);
  int64_t total = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    IPUML_CHECK(in[k].meta.dtype == o.meta.dtype && in[k].meta.shape.size() == os.size(),
                "cat: tensor ", k, " has dtype ", dtype_name(in[k].meta.dtype), " and shape ",
                shape_str(in[k].meta.shape), ", expected ", dtype_name(o.meta.dtype), " and rank ",
                os.size());
    const auto ik = split_at(in[k].meta.shape, d);
    IPUML_CHECK(ik.outer == sp.outer && ik.inner == sp.inner, "cat: tensor ", k, " of shape ",
                shape_str(in[k].meta.shape), " does not fit output ", shape_str(os));
    total += ik.mid;
  }
  IPUML_CHECK(total == sp.mid, "cat: sizes along dim ", d, " sum to ", total, ", expected ",
              sp.mid);
  char* y = static_cast<char*>(o.data);
  int64_t off = 0;
  for (const auto& b : in) {
    const int64_t mid = split_at(b.meta.shape, d).mid;
    const size_t row = static_cast<size_t>(mid * sp.inner) * es;
    const char* x = static_cast<const char*>(b.data);
    const int64_t base = off;
    if (row > 0)
      parallel_items(sp.outer, mid * sp.inner, [&](int64_t o0, int64_t o1) {
        for (int64_t i = o0; i < o1; ++i)
          std::memcpy(y + static_cast<size_t>(i * sp.mid + base) * sp.inner * es,
                      x + static_cast<size_t>(i) * row, row);
      });
    off += mid;
  }
}

// Reads all indices once, checking bounds before anything is written.
inline std::vector<int64_t> checked_indices(const char* op, const ConstBuffer& idx, int64_t size,
                                            int64_t dim) {
  IPUML_CHECK(idx.meta.dtype == DType::Int64 || idx.meta.dtype == DType::Int32, op,
              ": index must be int64 or int32, got ", dtype_name(idx.meta.dtype));
  const int64_t n = idx.meta.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = read_index(idx, i);
    IPUML_CHECK(j >= 0 && j < size, op, ": index ", j, " is out of range for dim ", dim,
                " of size ", size);
    v[static_cast<size_t>(i)] = j;
  }
  return v;
}

inline void k_index_select(const ir::Attrs& a, const ConstBuffer& x, const ConstBuffer& idx,
                           const MutableBuffer& o) {
  const Shape& s = x.meta.shape;
  IPUML_CHECK(a.dims.size() == 1 && a.dims[0] >= 0 &&
                  a.dims[0] < static_cast<int64_t>(std::max<size_t>(s.size(), 1)),
              "index_select: invalid dim ", ipuml::detail::str(a.dims), " for shape ",
              shape_str(s));
  IPUML_CHECK(idx.meta.shape.size() == 1, "index_select: index must be 1-d, got shape ",
              shape_str(idx.meta.shape));
  const auto sp = split_at(s, a.dims[0]);
  const auto ix = checked_indices("index_select", idx, sp.mid, a.dims[0]);
  const int64_t len = static_cast<int64_t>(ix.size());
  IPUML_CHECK(o.meta.numel() == sp.outer * len * sp.inner, "index_select: output of shape ",
              shape_str(o.meta.shape), " does not fit");
  const size_t row = static_cast<size_t>(sp.inner) * dtype_size(x.meta.dtype);
  const char* xp = static_cast<const char*>(x.data);
  char* y = static_cast<char*>(o.data);
  parallel_items(sp.outer * len, sp.inner, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / len, j = r % len;
      std::memcpy(y + static_cast<size_t>(r) * row,
                  xp + static_cast<size_t>(i * sp.mid + ix[static_cast<size_t>(j)]) * row, row);
    }
  });
}

template <typename Fn>
void dispatch_accum(const char* op, DType t, Fn&& fn) {
  switch (t) {
    case DType::Float32:
      return fn(float{});
    case DType::Int32:
      return fn(int32_t{});
    case DType::Int64:
      return fn(int64_t{});
    default:
      bad_dtype(op, t);
  }
}

// Whether the indices are first, first + 1, ... (a slice's gradient, arange as its index).
inline bool is_ascending_range(const std::vector<int64_t>& ix) {
  for (size_t j = 1; j < ix.size(); ++j)
    if (ix[j] != ix[0] + int64_t(j)) return false;
  return true;
}

// y[i, first + j, :] += s[i, j, :] + 0 for every outer slice i and j < len (index_add with an
// ascending range of indices, whose contributions are one contiguous run per slice). The + 0
// keeps index_add's bits: the sum of a zero and s, so a -0 in s counts as +0.
template <typename T>
void add_range_rows(const T* s, T* y, const Split3& sp, int64_t first, int64_t len) {
  const int64_t run = len * sp.inner;
  parallel_blocks(sp.outer * run, kBlock, [&](int64_t b, int64_t e) {
    while (b < e) {
      const int64_t i = b / run, k0 = b % run, k1 = std::min(run, k0 + (e - b));
      const T* sr = s + i * run;
      T* dst = y + (i * sp.mid + first) * sp.inner;
      for (int64_t k = k0; k < k1; ++k) dst[k] += sr[k] + T(0);
      b += k1 - k0;
    }
  });
}

inline void k_index_add(const ir::Attrs& a, const ConstBuffer& idx, const ConstBuffer& src,
                        const MutableBuffer& o) {
  const Shape& os = o.meta.shape;
  IPUML_CHECK(a.dims.size() == 1 && a.dims[0] >= 0 &&
                  a.dims[0] < static_cast<int64_t>(std::max<size_t>(os.size(), 1)),
              "index_add: invalid dim ", ipuml::detail::str(a.dims), " for shape ", shape_str(os));
  IPUML_CHECK(idx.meta.shape.size() == 1, "index_add: index must be 1-d");
  const auto sp = split_at(os, a.dims[0]);
  const auto ix = checked_indices("index_add", idx, sp.mid, a.dims[0]);
  const int64_t len = static_cast<int64_t>(ix.size());
  IPUML_CHECK(src.meta.numel() == sp.outer * len * sp.inner && src.meta.dtype == o.meta.dtype,
              "index_add: source of shape ", shape_str(src.meta.shape), " does not fit output ",
              shape_str(os), " with ", len, " indices");
  dispatch_accum("index_add", o.meta.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* s = in_ptr<T>(src);
    T* y = out_ptr<T>(o);
    parallel_blocks(o.meta.numel(), kBlock,
                    [&](int64_t b, int64_t e) { std::fill(y + b, y + e, T(0)); });
    if (is_ascending_range(ix)) {  // a slice's gradient: one contiguous run per outer slice
      add_range_rows(s, y, sp, ix.empty() ? 0 : ix.front(), len);
      return;
    }
    // Work splits over outer slices and column blocks, at least 64 pieces where the columns
    // allow (a 32-core node's threads each get work); every output element still receives its
    // contributions in index order, so the result does not depend on the split.
    constexpr int64_t kMinCols = 16, kPieces = 64;
    const int64_t per_slice = std::max<int64_t>(1, kPieces / std::max<int64_t>(sp.outer, 1));
    const int64_t cols = std::max(
        kMinCols, (sp.inner + per_slice * kMinCols - 1) / (per_slice * kMinCols) * kMinCols);
    const int64_t cb = (sp.inner + cols - 1) / cols;
    parallel_items(sp.outer * cb, len * cols, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t i = t / cb, k0 = (t % cb) * cols, k1 = std::min(sp.inner, k0 + cols);
        T* yo = y + i * sp.mid * sp.inner;
        for (int64_t j = 0; j < len; ++j) {
          T* dst = yo + ix[static_cast<size_t>(j)] * sp.inner;
          const T* sr = s + (i * len + j) * sp.inner;
          for (int64_t k = k0; k < k1; ++k) dst[k] += sr[k];
        }
      }
    });
  });
}

// out[...] += index_add(idx, src) in place: out holds a value of index_add's result shape and
// receives, at each destination, the sum of its contributions in index order, each started from
// zero as index_add starts them ((0 + s1) + s2 ...), added once. So every element the index
// reaches gets the bits of add(out, index_add(idx, src)); the others keep theirs (a -0 stays -0,
// where the add would give +0: an equal value). Float32.
inline void k_index_add_onto(const ir::Attrs& a, const ConstBuffer& idx, const ConstBuffer& src,
                             const MutableBuffer& o) {
  const Shape& os = o.meta.shape;
  IPUML_CHECK(a.dims.size() == 1 && a.dims[0] >= 0 &&
                  a.dims[0] < static_cast<int64_t>(std::max<size_t>(os.size(), 1)) && a.shape == os,
              "index_add onto a tensor: invalid dim ", ipuml::detail::str(a.dims),
              " or result shape ", shape_str(a.shape), " for a tensor of shape ", shape_str(os));
  IPUML_CHECK(idx.meta.shape.size() == 1, "index_add onto a tensor: index must be 1-d");
  IPUML_CHECK(o.meta.dtype == DType::Float32 && src.meta.dtype == DType::Float32,
              "index_add onto a tensor: expected float32, got ", dtype_name(src.meta.dtype),
              " onto ", dtype_name(o.meta.dtype));
  const auto sp = split_at(os, a.dims[0]);
  const auto ix = checked_indices("index_add", idx, sp.mid, a.dims[0]);
  const int64_t len = static_cast<int64_t>(ix.size());
  IPUML_CHECK(src.meta.numel() == sp.outer * len * sp.inner, "index_add onto a tensor: source ",
              "of shape ", shape_str(src.meta.shape), " does not fit ", shape_str(os), " with ",
              len, " indices");
  const float* s = in_ptr<float>(src);
  float* y = out_ptr<float>(o);
  if (is_ascending_range(ix)) return add_range_rows(s, y, sp, ix.empty() ? 0 : ix.front(), len);
  // Positions grouped by destination, in index order within a group.
  std::vector<int64_t> order(static_cast<size_t>(len));
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](int64_t p, int64_t q) {
    return ix[static_cast<size_t>(p)] < ix[static_cast<size_t>(q)];
  });
  std::vector<int64_t> group_start;  // into `order`; one past the last group at the end
  for (int64_t j = 0; j < len; ++j)
    if (j == 0 ||
        ix[static_cast<size_t>(order[size_t(j)])] != ix[static_cast<size_t>(order[size_t(j - 1)])])
      group_start.push_back(j);
  const int64_t groups = static_cast<int64_t>(group_start.size());
  group_start.push_back(len);
  constexpr int64_t kCols = 256;  // a group's partial sums, on the stack
  const int64_t cb = (sp.inner + kCols - 1) / kCols;
  parallel_items(
      sp.outer * groups * cb,
      std::max<int64_t>(1, len / std::max<int64_t>(groups, 1)) * std::min(kCols, sp.inner),
      [&](int64_t t0, int64_t t1) {
        float sum[kCols];
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t i = t / (groups * cb), gi = t / cb % groups;
          const int64_t k0 = t % cb * kCols, w = std::min(kCols, sp.inner - k0);
          std::fill(sum, sum + w, 0.0f);
          for (int64_t q = group_start[size_t(gi)]; q < group_start[size_t(gi + 1)]; ++q) {
            const float* sr = s + (i * len + order[size_t(q)]) * sp.inner + k0;
            for (int64_t k = 0; k < w; ++k) sum[k] += sr[k];
          }
          const int64_t dest = ix[static_cast<size_t>(order[size_t(group_start[size_t(gi)])])];
          float* dst = y + (i * sp.mid + dest) * sp.inner + k0;
          for (int64_t k = 0; k < w; ++k) dst[k] += sum[k];
        }
      });
}

inline std::vector<int64_t> checked_gather_index(const char* op, const ConstBuffer& idx,
                                                 const Shape& target, int64_t d) {
  const Shape& is = idx.meta.shape;
  IPUML_CHECK(is.size() == target.size(), op, ": index shape ", shape_str(is),
              " must have the rank of ", shape_str(target));
  for (size_t k = 0; k < is.size(); ++k)
    IPUML_CHECK(static_cast<int64_t>(k) == d || is[k] <= target[k], op, ": index shape ",
                shape_str(is), " exceeds shape ", shape_str(target), " in dim ", k);
  const int64_t size = target.empty() ? 1 : target[static_cast<size_t>(d)];
  return checked_indices(op, idx, size, d);
}

inline void k_gather(const ir::Attrs& a, const ConstBuffer& x, const ConstBuffer& idx,
                     const MutableBuffer& o) {
  const Shape& xs = x.meta.shape;
  const Shape& is = idx.meta.shape;
  IPUML_CHECK(a.dims.size() == 1 && a.dims[0] >= 0 &&
                  a.dims[0] < static_cast<int64_t>(std::max<size_t>(xs.size(), 1)),
              "gather: invalid dim ", ipuml::detail::str(a.dims), " for shape ", shape_str(xs));
  const int64_t d = a.dims[0];
  const auto ix = checked_gather_index("gather", idx, xs, d);
  IPUML_CHECK(o.meta.numel() == idx.meta.numel(), "gather: output does not match index shape");
  if (ix.empty()) return;
  const size_t nd = is.size();
  const Strides xst = contiguous_strides(xs);
  const int64_t inner = nd ? is.back() : 1;
  std::vector<int64_t> osz(is.begin(), is.end() - (nd ? 1 : 0)), xo(osz.size()),
      dummy(osz.size(), 0);
  for (size_t k = 0; k < osz.size(); ++k) xo[k] = static_cast<int64_t>(k) == d ? 0 : xst[k];
  const int64_t sd = nd ? xst[static_cast<size_t>(d)] : 0;
  const int64_t sl = nd && static_cast<size_t>(d) != nd - 1 ? 1 : 0;
  dispatch_size(dtype_size(x.meta.dtype), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = in_ptr<T>(x);
    T* y = out_ptr<T>(o);
    parallel_items(static_cast<int64_t>(ix.size()) / inner, inner, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t base, unused;
        unravel2(r, osz, xo, dummy, base, unused);
        const int64_t* ir = ix.data() + r * inner;
        for (int64_t j = 0; j < inner; ++j) y[r * inner + j] = xp[base + j * sl + ir[j] * sd];
      }
    });
  });
}

inline void k_scatter_add(const ir::Attrs& a, const ConstBuffer& idx, const ConstBuffer& src,
                          const MutableBuffer& o) {
  const Shape& os = o.meta.shape;
  IPUML_CHECK(a.dims.size() == 1 && a.dims[0] >= 0 &&
                  a.dims[0] < static_cast<int64_t>(std::max<size_t>(os.size(), 1)),
              "scatter_add: invalid dim ", ipuml::detail::str(a.dims), " for shape ",
              shape_str(os));
  IPUML_CHECK(idx.meta.shape == src.meta.shape && src.meta.dtype == o.meta.dtype,
              "scatter_add: index shape ", shape_str(idx.meta.shape), " must equal source shape ",
              shape_str(src.meta.shape));
  const int64_t d = a.dims[0];
  const auto ix = checked_gather_index("scatter_add", idx, os, d);
  const Shape& is = idx.meta.shape;
  const size_t nd = is.size();
  const auto isp = split_at(is, d);
  // Output offset of index element (outer i, inner k) without the dim-d term.
  const Strides ost = contiguous_strides(os);
  std::vector<int64_t> in_sz(is.begin() + (nd ? d + 1 : 0), is.end());
  std::vector<int64_t> in_st(ost.begin() + (nd ? d + 1 : 0), ost.end());
  std::vector<int64_t> out_sz(is.begin(), is.begin() + (nd ? d : 0));
  std::vector<int64_t> out_st(ost.begin(), ost.begin() + (nd ? d : 0));
  std::vector<int64_t> inner_off(static_cast<size_t>(isp.inner));
  for (int64_t k = 0; k < isp.inner; ++k) {
    int64_t off, unused;
    unravel2(k, in_sz, in_st, in_st, off, unused);
    inner_off[static_cast<size_t>(k)] = off;
  }
  const int64_t sd = nd ? ost[static_cast<size_t>(d)] : 0;
  dispatch_accum("scatter_add", o.meta.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* s = in_ptr<T>(src);
    T* y = out_ptr<T>(o);
    parallel_blocks(o.meta.numel(), kBlock,
                    [&](int64_t b, int64_t e) { std::fill(y + b, y + e, T(0)); });
    // Index elements that differ outside dim d never collide, so outer slices and inner column
    // blocks run in parallel; along d each output element is updated in index order.
    constexpr int64_t kCols = 128;
    const int64_t cb = (isp.inner + kCols - 1) / kCols;
    parallel_items(isp.outer * cb, isp.mid * kCols, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t i = t / cb, k0 = (t % cb) * kCols, k1 = std::min(isp.inner, k0 + kCols);
        int64_t base, unused;
        unravel2(i, out_sz, out_st, out_st, base, unused);
        for (int64_t j = 0; j < isp.mid; ++j) {
          const int64_t e = (i * isp.mid + j) * isp.inner;
          for (int64_t k = k0; k < k1; ++k)
            y[base + ix[static_cast<size_t>(e + k)] * sd + inner_off[static_cast<size_t>(k)]] +=
                s[e + k];
        }
      }
    });
  });
}

}  // namespace ipuml::cpu::kdetail
