// CPU kernels of the reductions (sum, amax/amin, max/min along a dim, argmax/argmin) and softmax:
// fixed summation orders (pairwise in fixed blocks, double across rows) independent of threads.
#pragma once

#include <ipuml/backends/cpu/kernels_common.hpp>
#include <ipuml/backends/cpu/kernels_elementwise.hpp>
#include <ipuml/backends/cpu/kernels_movement.hpp>

namespace ipuml::cpu::kdetail {

// A reduction seen as [outer, reduce, inner]; `data` may point at a permuted copy when the
// reduced dims were not adjacent.
template <typename T>
struct ReduceView {
  const T* data = nullptr;
  int64_t outer = 1, reduce = 1, inner = 1;
  std::vector<T> storage;
};

template <typename T>
ReduceView<T> reduce_view(const char* op, const T* x, const Shape& s,
                          const std::vector<int64_t>& dims) {
  std::vector<bool> red(s.size(), dims.empty());
  for (auto d : dims) {
    IPUML_CHECK(d >= 0 && d < static_cast<int64_t>(std::max<size_t>(s.size(), 1)), op, ": dim ", d,
                " out of range for rank ", s.size());
    if (!s.empty()) red[static_cast<size_t>(d)] = true;
  }
  // Groups of adjacent dims with the same flag, ignoring size-1 dims.
  std::vector<std::pair<bool, int64_t>> groups;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == 1) continue;
    if (!groups.empty() && groups.back().first == red[i])
      groups.back().second *= s[i];
    else
      groups.emplace_back(red[i], s[i]);
  }
  ReduceView<T> v;
  v.data = x;
  int reduced_groups = 0;
  for (auto& g : groups) reduced_groups += g.first;
  if (reduced_groups <= 1) {
    bool seen = false;
    for (auto& g : groups) {
      if (g.first) {
        v.reduce = g.second;
        seen = true;
      } else if (!seen) {
        v.outer *= g.second;
      } else {
        v.inner *= g.second;
      }
    }
    return v;
  }
  std::vector<int64_t> perm;
  for (size_t i = 0; i < s.size(); ++i)
    if (!red[i]) {
      perm.push_back(static_cast<int64_t>(i));
      v.outer *= s[i];
    }
  for (size_t i = 0; i < s.size(); ++i)
    if (red[i]) {
      perm.push_back(static_cast<int64_t>(i));
      v.reduce *= s[i];
    }
  v.storage.resize(static_cast<size_t>(numel(s)));
  permute_copy(x, s, perm, v.storage.data());
  v.data = v.storage.data();
  return v;
}

// Long rows are reduced in fixed blocks whose partials are then combined in order, so one big
// row still uses both cores and the order never depends on the thread count.
inline constexpr int64_t kReduceBlock = 1 << 15;

// out[o] = combine over row o of [outer, reduce] using block(ptr, n) -> Acc and merge(partials).
template <typename T, typename Acc, typename BlockFn, typename MergeFn, typename StoreFn>
void reduce_rows(const T* x, int64_t outer, int64_t reduce, BlockFn&& block, MergeFn&& merge,
                 StoreFn&& store) {
  if (reduce <= kReduceBlock) {
    parallel_items(outer, reduce, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        const Acc p = block(x + o * reduce, reduce);
        store(o, merge(&p, int64_t{1}));
      }
    });
    return;
  }
  const int64_t nb = (reduce + kReduceBlock - 1) / kReduceBlock;
  std::vector<Acc> part(static_cast<size_t>(outer * nb));
  ipuml::parallel_for(outer * nb, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / nb, b = t % nb;
      const int64_t begin = b * kReduceBlock, end = std::min(reduce, begin + kReduceBlock);
      part[static_cast<size_t>(t)] = block(x + o * reduce + begin, end - begin);
    }
  });
  for (int64_t o = 0; o < outer; ++o) store(o, merge(part.data() + o * nb, nb));
}

inline void sum_float(const ReduceView<float>& v, float* y) {
  if (v.inner == 1) {
    reduce_rows<float, double>(
        v.data, v.outer, v.reduce,
        [](const float* p, int64_t n) { return static_cast<double>(pairwise_sum(p, n)); },
        [](const double* p, int64_t n) { return n == 1 ? p[0] : pairwise_sum_d(p, n); },
        [&](int64_t o, double s) { y[o] = static_cast<float>(s); });
    return;
  }
  // Column sums: sequential in double per output element, vectorised across the inner dim.
  constexpr int64_t kCols = 512;
  const int64_t cblocks = (v.inner + kCols - 1) / kCols;
  parallel_items(v.outer * cblocks, v.reduce * kCols, [&](int64_t t0, int64_t t1) {
    double acc[kCols];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / cblocks, c0 = (t % cblocks) * kCols;
      const int64_t w = std::min(kCols, v.inner - c0);
      std::fill(acc, acc + w, 0.0);
      const float* base = v.data + o * v.reduce * v.inner + c0;
      for (int64_t r = 0; r < v.reduce; ++r) {
        const float* row = base + r * v.inner;
        for (int64_t i = 0; i < w; ++i) acc[i] += static_cast<double>(row[i]);
      }
      float* dst = y + o * v.inner + c0;
      for (int64_t i = 0; i < w; ++i) dst[i] = static_cast<float>(acc[i]);
    }
  });
}

template <typename T>
void sum_int(const ReduceView<T>& v, int64_t* y) {
  // Integer sums are exact (wrapping), so any order gives the same result.
  parallel_items(v.outer * v.inner, v.reduce, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t o = t / v.inner, i = t % v.inner;
      const T* p = v.data + o * v.reduce * v.inner + i;
      uint64_t s = 0;
      for (int64_t r = 0; r < v.reduce; ++r)
        s += static_cast<uint64_t>(static_cast<int64_t>(p[r * v.inner]));
      y[t] = static_cast<int64_t>(s);
    }
  });
}

template <typename T, bool IsMax>
T pick(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  if constexpr (IsMax)
    return b > a ? b : a;
  else
    return b < a ? b : a;
}

// Max/min of a contiguous float run with two xsimd accumulators; NaN wins and sticks because
// a comparison with NaN is false. Max and min are exact, so lane order cannot change results.
template <bool IsMax>
float extreme_block_f32(const float* p, int64_t n) {
  float s = p[0];
  int64_t i = 0;
  if (n >= 2 * kLanes) {
    fbatch r0 = fbatch::load_unaligned(p), r1 = fbatch::load_unaligned(p + kLanes);
    auto step = [](fbatch acc, fbatch x) {
      const auto take = (IsMax ? (x > acc) : (x < acc)) | (x != x);
      return xsimd::select(take, x, acc);
    };
    for (i = 2 * kLanes; i + 2 * kLanes <= n; i += 2 * kLanes) {
      r0 = step(r0, fbatch::load_unaligned(p + i));
      r1 = step(r1, fbatch::load_unaligned(p + i + kLanes));
    }
    r0 = step(r0, r1);
    alignas(64) float lanes[fbatch::size];
    r0.store_aligned(lanes);
    s = lanes[0];
    for (int64_t j = 1; j < kLanes; ++j) s = pick<float, IsMax>(s, lanes[j]);
  }
  for (; i < n; ++i) s = pick<float, IsMax>(s, p[i]);
  return s;
}

template <typename T, bool IsMax>
void extreme(const ReduceView<T>& v, T* y) {
  if (v.inner == 1) {
    reduce_rows<T, T>(
        v.data, v.outer, v.reduce,
        [](const T* p, int64_t n) {
          if constexpr (std::is_same_v<T, float>) return extreme_block_f32<IsMax>(p, n);
          T r[8];
          const int64_t m = std::min<int64_t>(8, n);
          for (int64_t j = 0; j < 8; ++j) r[j] = p[j % m];
          int64_t i = 8;
          for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j) r[j] = pick<T, IsMax>(r[j], p[i + j]);
          for (; i < n; ++i) r[0] = pick<T, IsMax>(r[0], p[i]);
          T s = r[0];
          for (int j = 1; j < 8; ++j) s = pick<T, IsMax>(s, r[j]);
          return s;
        },
        [](const T* p, int64_t n) {
          T s = p[0];
          for (int64_t j = 1; j < n; ++j) s = pick<T, IsMax>(s, p[j]);
          return s;
        },
        [&](int64_t o, T s) { y[o] = s; });
    return;
  }
  parallel_items(v.outer, v.reduce * v.inner, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const T* base = v.data + o * v.reduce * v.inner;
      T* dst = y + o * v.inner;
      std::copy(base, base + v.inner, dst);
      for (int64_t r = 1; r < v.reduce; ++r) {
        const T* row = base + r * v.inner;
        for (int64_t i = 0; i < v.inner; ++i) dst[i] = pick<T, IsMax>(dst[i], row[i]);
      }
    }
  });
}

// A reduction over the first and last dims of [a, b, c] (ignoring size-1 dims), such as a
// convolution's bias gradient over N, H and W of NCHW: sets a, b, c when `dims` is one.
inline bool outer_inner_split(const Shape& s, const std::vector<int64_t>& dims, int64_t& a,
                              int64_t& b, int64_t& c) {
  std::vector<bool> red(s.size(), false);
  for (auto d : dims) {
    if (d < 0 || d >= static_cast<int64_t>(s.size())) return false;
    red[static_cast<size_t>(d)] = true;
  }
  int64_t part[3] = {1, 1, 1};
  int stage = 0;  // 0: leading reduced dims, 1: kept dims, 2: trailing reduced dims
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == 1) continue;
    const int want = red[i] ? (stage == 0 ? 0 : 2) : 1;
    if (want < stage) return false;
    stage = want;
    part[stage] *= s[i];
  }
  a = part[0], b = part[1], c = part[2];
  return stage == 2 && a > 1 && b > 1;
}

// Sums [a, b, c] over a and c without permuting: per b, each of the a rows is pairwise-summed
// and the row sums are added in double, in order.
inline void sum_outer_inner(const float* x, int64_t a, int64_t b, int64_t c, float* y) {
  parallel_items(b, a * c, [&](int64_t b0, int64_t b1) {
    for (int64_t j = b0; j < b1; ++j) {
      double acc = 0.0;
      for (int64_t i = 0; i < a; ++i)
        acc += static_cast<double>(pairwise_sum(x + (i * b + j) * c, c));
      y[j] = static_cast<float>(acc);
    }
  });
}

// float16/bfloat16 inputs are widened to float32, reduced, and the result narrowed back.
inline void k_sum(const ir::Attrs& a, const ConstBuffer& in, const MutableBuffer& o) {
  const DType t = in.meta.dtype;
  const Shape& s = in.meta.shape;
  switch (t) {
    case DType::Float32: {
      IPUML_CHECK(o.meta.dtype == DType::Float32, "sum: float32 input needs a float32 output");
      int64_t sa = 0, sb = 0, sc = 0;
      if (outer_inner_split(s, a.dims, sa, sb, sc))
        return sum_outer_inner(in_ptr<float>(in), sa, sb, sc, out_ptr<float>(o));
      return sum_float(reduce_view("sum", in_ptr<float>(in), s, a.dims), out_ptr<float>(o));
    }
    case DType::Float16:
    case DType::BFloat16: {
      std::vector<float> wide(static_cast<size_t>(in.meta.numel())),
          res(static_cast<size_t>(o.meta.numel()));
      k_cast(in, {wide.data(), {s, DType::Float32}});
      sum_float(reduce_view("sum", wide.data(), s, a.dims), res.data());
      k_cast({res.data(), {o.meta.shape, DType::Float32}}, o);
      return;
    }
    case DType::Int32:
      return sum_int(reduce_view("sum", in_ptr<int32_t>(in), s, a.dims), out_ptr<int64_t>(o));
    case DType::Int64:
      return sum_int(reduce_view("sum", in_ptr<int64_t>(in), s, a.dims), out_ptr<int64_t>(o));
    case DType::Bool:
      return sum_int(reduce_view("sum", in_ptr<uint8_t>(in), s, a.dims), out_ptr<int64_t>(o));
  }
}

inline void k_extreme(bool is_max, const ir::Attrs& a, const ConstBuffer& in,
                      const MutableBuffer& o) {
  const char* name = is_max ? "amax" : "amin";
  const Shape& s = in.meta.shape;
  IPUML_CHECK(in.meta.numel() > 0, name, ": cannot reduce an empty tensor of shape ", shape_str(s));
  auto run = [&](auto* x, auto* y) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
    auto v = reduce_view(name, x, s, a.dims);
    if (is_max)
      extreme<T, true>(v, y);
    else
      extreme<T, false>(v, y);
  };
  switch (in.meta.dtype) {
    case DType::Float32:
      return run(in_ptr<float>(in), out_ptr<float>(o));
    case DType::Int32:
      return run(in_ptr<int32_t>(in), out_ptr<int32_t>(o));
    case DType::Int64:
      return run(in_ptr<int64_t>(in), out_ptr<int64_t>(o));
    case DType::Float16:
    case DType::BFloat16: {
      std::vector<float> wide(static_cast<size_t>(in.meta.numel())),
          res(static_cast<size_t>(o.meta.numel()));
      k_cast(in, {wide.data(), {s, DType::Float32}});
      run(static_cast<const float*>(wide.data()), res.data());
      k_cast({res.data(), {o.meta.shape, DType::Float32}}, o);
      return;
    }
    default:
      bad_dtype(name, in.meta.dtype);
  }
}

// Whether candidate c beats the current best b (strictly, so the first extreme wins; NaN wins).
template <typename T, bool IsMax>
bool beats(T c, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b != b) return false;
    if (c != c) return true;
  }
  if constexpr (IsMax)
    return c > b;
  else
    return c < b;
}

template <typename T, bool IsMax>
void arg_extreme(const T* x, int64_t outer, int64_t reduce, int64_t inner, T* vals, int64_t* idx) {
  if (inner == 1) {
    struct Best {
      T v;
      int64_t i;
    };
    const int64_t nb = std::max<int64_t>(1, (reduce + kReduceBlock - 1) / kReduceBlock);
    auto scan = [&](const T* p, int64_t begin, int64_t end) {
      Best b{p[begin], begin};
      for (int64_t r = begin + 1; r < end; ++r)
        if (beats<T, IsMax>(p[r], b.v)) b = {p[r], r};
      return b;
    };
    std::vector<Best> part(static_cast<size_t>(outer * nb));
    ipuml::parallel_for(outer * nb,
                        std::max<int64_t>(1, kReduceBlock / std::max<int64_t>(1, reduce)),
                        [&](int64_t t0, int64_t t1) {
                          for (int64_t t = t0; t < t1; ++t) {
                            const int64_t o = t / nb, b = t % nb;
                            const int64_t begin = b * kReduceBlock;
                            const int64_t end = std::min(reduce, begin + kReduceBlock);
                            part[static_cast<size_t>(t)] = scan(x + o * reduce, begin, end);
                          }
                        });
    for (int64_t o = 0; o < outer; ++o) {
      Best b = part[static_cast<size_t>(o * nb)];
      for (int64_t j = 1; j < nb; ++j)
        if (beats<T, IsMax>(part[static_cast<size_t>(o * nb + j)].v, b.v))
          b = part[static_cast<size_t>(o * nb + j)];
      if (vals) vals[o] = b.v;
      idx[o] = b.i;
    }
    return;
  }
  parallel_items(outer, reduce * inner, [&](int64_t o0, int64_t o1) {
    std::vector<T> best(static_cast<size_t>(inner));
    for (int64_t o = o0; o < o1; ++o) {
      const T* base = x + o * reduce * inner;
      int64_t* ix = idx + o * inner;
      std::copy(base, base + inner, best.begin());
      std::fill(ix, ix + inner, 0);
      for (int64_t r = 1; r < reduce; ++r) {
        const T* row = base + r * inner;
        for (int64_t i = 0; i < inner; ++i)
          if (beats<T, IsMax>(row[i], best[static_cast<size_t>(i)])) {
            best[static_cast<size_t>(i)] = row[i];
            ix[i] = r;
          }
      }
      if (vals) std::copy(best.begin(), best.end(), vals + o * inner);
    }
  });
}

// MaxDim/MinDim (values + indices) and ArgMax/ArgMin (indices only; flattened when dims empty).
inline void k_arg(ir::OpKind k, const ir::Attrs& a, const ConstBuffer& in,
                  const std::vector<MutableBuffer>& out) {
  using K = ir::OpKind;
  const char* name = ir::op_name(k);
  const bool is_max = k == K::MaxDim || k == K::ArgMax;
  const bool with_vals = k == K::MaxDim || k == K::MinDim;
  const Shape& s = in.meta.shape;
  IPUML_CHECK(in.meta.numel() > 0, name, ": cannot reduce an empty tensor of shape ", shape_str(s));
  IPUML_CHECK(out.size() == (with_vals ? 2u : 1u), name, ": wrong number of outputs");
  IPUML_CHECK(a.dims.size() <= 1 && (with_vals ? a.dims.size() == 1 : true), name,
              ": expects one dim, got ", ipuml::detail::str(a.dims));
  Split3 sp{1, in.meta.numel(), 1};
  if (!a.dims.empty()) {
    IPUML_CHECK(a.dims[0] >= 0 && a.dims[0] < static_cast<int64_t>(std::max<size_t>(s.size(), 1)),
                name, ": dim ", a.dims[0], " out of range for rank ", s.size());
    sp = split_at(s, a.dims[0]);
  }
  const MutableBuffer& ib = out[with_vals ? 1 : 0];
  IPUML_CHECK(ib.meta.dtype == DType::Int64, name, ": indices must be int64");
  int64_t* ix = out_ptr<int64_t>(ib);
  auto run = [&](auto* x, auto* vals) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
    if (is_max)
      arg_extreme<T, true>(x, sp.outer, sp.mid, sp.inner, vals, ix);
    else
      arg_extreme<T, false>(x, sp.outer, sp.mid, sp.inner, vals, ix);
  };
  auto vptr = [&](auto* tag) -> decltype(tag) {
    return with_vals ? static_cast<decltype(tag)>(out[0].data) : nullptr;
  };
  switch (in.meta.dtype) {
    case DType::Float32:
      return run(in_ptr<float>(in), vptr(static_cast<float*>(nullptr)));
    case DType::Int32:
      return run(in_ptr<int32_t>(in), vptr(static_cast<int32_t*>(nullptr)));
    case DType::Int64:
      return run(in_ptr<int64_t>(in), vptr(static_cast<int64_t*>(nullptr)));
    case DType::Bool:
      return run(in_ptr<uint8_t>(in), vptr(static_cast<uint8_t*>(nullptr)));
    case DType::Float16:
    case DType::BFloat16: {
      std::vector<float> wide(static_cast<size_t>(in.meta.numel()));
      std::vector<float> res(with_vals ? static_cast<size_t>(out[0].meta.numel()) : 0);
      k_cast(in, {wide.data(), {s, DType::Float32}});
      run(static_cast<const float*>(wide.data()), with_vals ? res.data() : nullptr);
      if (with_vals) k_cast({res.data(), {out[0].meta.shape, DType::Float32}}, out[0]);
      return;
    }
  }
}

// ---- softmax --------------------------------------------------------------------------------

// The sum of a row of n floats as k_sum adds a tensor's last dim: blocks of kReduceBlock, each
// pairwise, their partials added in double. The same bits.
inline float row_sum_f32(const float* p, int64_t n) {
  if (n <= kReduceBlock) return pairwise_sum(p, n);
  const int64_t nb = (n + kReduceBlock - 1) / kReduceBlock;
  auto block = [&](int64_t b) {
    return static_cast<double>(
        pairwise_sum(p + b * kReduceBlock, std::min(kReduceBlock, n - b * kReduceBlock)));
  };
  // pairwise_sum_d adds up to 8 partials in order: rows up to 262144 floats (a language model's
  // vocabulary) need no buffer, and no allocation per row.
  if (nb <= 8) {
    double s = 0.0;
    for (int64_t b = 0; b < nb; ++b) s += block(b);
    return static_cast<float>(s);
  }
  std::vector<double> part(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) part[static_cast<size_t>(b)] = block(b);
  return static_cast<float>(pairwise_sum_d(part.data(), nb));
}

// dx = g - exp(y) * sum(g) over the last dim of [rows, cols]: log_softmax's gradient from its
// output y, in one pass over each row where autograd's Sum, Exp, Mul and Sub make four over the
// whole tensor (a language model's head: 512 x 50257 floats, 103 MB each). Each step rounds as
// those ops do (row_sum_f32, exp with xsimd's bits, a product, a difference), so the bits are
// theirs.
inline void log_softmax_backward_rows(const float* y, const float* g, float* dx, int64_t rows,
                                      int64_t cols) {
  parallel_items(rows, cols * 4, [&](int64_t r0, int64_t r1) {
    alignas(64) float e[kMathChunk];
    for (int64_t r = r0; r < r1; ++r) {
      const fbatch s(row_sum_f32(g + r * cols, cols));
      for (int64_t c = 0; c < cols; c += kMathChunk) {
        const int64_t m = std::min(kMathChunk, cols - c);
        const int64_t at = r * cols + c;
        vmath::exp(y + at, e, m);
        map_batch2(e, g + at, dx + at, m, [&](fbatch ev, fbatch gv) { return gv - ev * s; });
      }
    }
  });
}

inline void k_softmax(bool log, const ir::Attrs& a, const ConstBuffer& in, const MutableBuffer& o) {
  const char* name = log ? "log_softmax" : "softmax";
  IPUML_CHECK(in.meta.dtype == DType::Float32, name, ": expected float32, got ",
              dtype_name(in.meta.dtype));
  const Shape& s = in.meta.shape;
  IPUML_CHECK(a.dims.size() == 1 && a.dims[0] >= 0 &&
                  a.dims[0] < static_cast<int64_t>(std::max<size_t>(s.size(), 1)),
              name, ": invalid dim ", ipuml::detail::str(a.dims), " for shape ", shape_str(s));
  const auto sp = split_at(s, a.dims[0]);
  const float* x = in_ptr<float>(in);
  float* y = out_ptr<float>(o);
  const int64_t R = sp.mid, I = sp.inner;
  if (R == 0 || in.meta.numel() == 0) return;
  if (I == 1) {
    parallel_items(sp.outer, R * 4, [&](int64_t o0, int64_t o1) {
      std::vector<float> e(log ? static_cast<size_t>(R) : 0);
      for (int64_t r = o0; r < o1; ++r) {
        const float* xr = x + r * R;
        float* yr = y + r * R;
        const float m = extreme_block_f32<true>(xr, R);
        // An all -inf row would give (-inf) - (-inf) = NaN; shifting by 0 keeps exp(-inf) = 0.
        const float shift = std::isinf(m) ? 0.0f : m;
        // Softmax writes the exponentials straight into y (same values as via a buffer); log
        // softmax needs x afterwards, which y may alias, so it uses the row buffer.
        float* ev = log ? e.data() : yr;
        exp_shifted(xr, shift, ev, R);
        const float sum = pairwise_sum(ev, R);
        if (log) {
          const float ls = std::log(sum) + shift;
          for (int64_t j = 0; j < R; ++j) yr[j] = xr[j] - ls;
        } else {
          const float inv = 1.0f / sum;
          for (int64_t j = 0; j < R; ++j) yr[j] *= inv;
        }
      }
    });
    return;
  }
  // Softmax over a middle dim: vectorise across the inner dim, loop the softmax dim. Softmax
  // keeps the exponentials in y; log softmax only sums them (y may alias x, which it still reads).
  constexpr int64_t kCols = 256;
  const int64_t cblocks = (I + kCols - 1) / kCols;
  parallel_items(sp.outer * cblocks, R * kCols * 4, [&](int64_t t0, int64_t t1) {
    float mx[kCols], shift[kCols], sum[kCols], er[kCols];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ob = t / cblocks, c0 = (t % cblocks) * kCols;
      const int64_t w = std::min(kCols, I - c0);
      const float* xb = x + ob * R * I + c0;
      float* yb = y + ob * R * I + c0;
      std::copy(xb, xb + w, mx);
      for (int64_t r = 1; r < R; ++r)
        for (int64_t i = 0; i < w; ++i) mx[i] = pick<float, true>(mx[i], xb[r * I + i]);
      for (int64_t i = 0; i < w; ++i) {
        shift[i] = std::isinf(mx[i]) ? 0.0f : mx[i];
        sum[i] = 0.0f;
      }
      for (int64_t r = 0; r < R; ++r) {
        float* ev = log ? er : yb + r * I;
        for (int64_t i = 0; i < w; ++i) ev[i] = xb[r * I + i] - shift[i];
        vmath::exp(ev, ev, w);
        for (int64_t i = 0; i < w; ++i) sum[i] += ev[i];
      }
      if (log) {
        for (int64_t i = 0; i < w; ++i) sum[i] = std::log(sum[i]) + shift[i];
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < w; ++i) yb[r * I + i] = xb[r * I + i] - sum[i];
      } else {
        for (int64_t i = 0; i < w; ++i) sum[i] = 1.0f / sum[i];
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < w; ++i) yb[r * I + i] *= sum[i];
      }
    }
  });
}

}  // namespace ipuml::cpu::kdetail
