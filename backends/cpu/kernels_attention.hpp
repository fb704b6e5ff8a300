// Fused scaled dot-product attention on 64 x 64 blocks whose products run on the GEMM. The
// forward walks each query block over the key blocks with an online softmax (running max and
// sum), so the [L, S] scores never exist in memory; it also returns each row's log-sum-exp. The
// backward recomputes each block's probabilities from it once, for dq, dk and dv together, all
// summed in a fixed order (same bits on any thread count). Causal masks skip the key blocks a
// query block cannot see.
#pragma once

#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/kernels_common.hpp>

namespace ipuml::cpu::kdetail {

// Query and key rows per block.
inline constexpr int64_t kAttnQ = 64;
inline constexpr int64_t kAttnK = 64;

struct AttnGeometry {
  int64_t batch = 1, l = 0, s = 0, e = 0, ev = 0;
  std::vector<int64_t> bias_base;      // per batch index: offset of its [L', S'] bias block
  int64_t bias_row = 0, bias_col = 0;  // bias strides along L and S (0 when broadcast)
};

inline AttnGeometry attn_geometry(const char* name, const Shape& q, const Shape& k, const Shape& v,
                                  const Shape* bias) {
  IPUML_CHECK(q.size() >= 2 && k.size() == q.size() && v.size() == q.size(), name,
              ": expected q, k and v of one rank >= 2, got ", shape_str(q), ", ", shape_str(k),
              " and ", shape_str(v));
  const size_t r = q.size();
  AttnGeometry g;
  g.l = q[r - 2];
  g.e = q[r - 1];
  g.s = k[r - 2];
  g.ev = v[r - 1];
  for (size_t i = 0; i + 2 < r; ++i) {
    IPUML_CHECK(k[i] == q[i] && v[i] == q[i], name, ": batch dims of q ", shape_str(q), ", k ",
                shape_str(k), " and v ", shape_str(v), " differ");
    g.batch *= q[i];
  }
  IPUML_CHECK(k[r - 1] == g.e && v[r - 2] == g.s, name, ": k ", shape_str(k), " and v ",
              shape_str(v), " do not fit q ", shape_str(q));
  g.bias_base.assign(static_cast<size_t>(g.batch), 0);
  if (bias) {
    const Shape& b = *bias;
    IPUML_CHECK(b.size() == r, name, ": bias of shape ", shape_str(b), " must have rank ", r);
    const Strides st = contiguous_strides(b);
    for (int64_t n = 0; n < g.batch; ++n) {
      int64_t rem = n, off = 0;
      for (size_t i = r - 2; i-- > 0;) {
        const int64_t idx = rem % q[i];
        rem /= q[i];
        IPUML_CHECK(b[i] == 1 || b[i] == q[i], name, ": bias of shape ", shape_str(b),
                    " does not broadcast to the batch dims of ", shape_str(q));
        if (b[i] != 1) off += idx * st[i];
      }
      g.bias_base[static_cast<size_t>(n)] = off;
    }
    IPUML_CHECK((b[r - 2] == 1 || b[r - 2] == g.l) && (b[r - 1] == 1 || b[r - 1] == g.s), name,
                ": bias of shape ", shape_str(b), " does not broadcast to [", g.l, ", ", g.s, "]");
    g.bias_row = b[r - 2] == 1 ? 0 : st[r - 2];
    g.bias_col = b[r - 1] == 1 ? 0 : 1;
  }
  return g;
}

inline float attn_dot(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
  float s = 0.0f;
  if (n >= kLanes) {
    fbatch acc(0.0f);
    for (; i + kLanes <= n; i += kLanes)
      acc = xsimd::fma(fbatch::load_unaligned(a + i), fbatch::load_unaligned(b + i), acc);
    s = xsimd::hadd(acc);
  }
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Per-thread block buffers (reused, so steady-state calls allocate nothing).
inline float* attn_scratch(int slot, int64_t n) {
  thread_local std::vector<float> buf[3];
  auto& b = buf[slot];
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

// Scores of query rows [i0, i1) against keys [j0, j1) of batch n, one GEMM:
// sc[(i - i0) * kAttnK + (j - j0)] = scale * q_i . k_j + bias, -inf where masked.
inline void attn_scores(const AttnGeometry& g, const float* q, const float* k, const float* bias,
                        float scale, bool causal, int64_t n, int64_t i0, int64_t i1, int64_t j0,
                        int64_t j1, float* sc) {
  const float ninf = -std::numeric_limits<float>::infinity();
  sgemm(false, true, i1 - i0, j1 - j0, g.e, scale, q + (n * g.l + i0) * g.e, g.e,
        k + (n * g.s + j0) * g.e, g.e, 0.0f, sc, kAttnK);
  for (int64_t i = i0; i < i1; ++i) {
    float* row = sc + (i - i0) * kAttnK;
    if (bias) {
      const float* bi = bias + g.bias_base[static_cast<size_t>(n)] + i * g.bias_row;
      for (int64_t j = j0; j < j1; ++j) row[j - j0] += bi[j * g.bias_col];
    }
    if (causal)
      for (int64_t j = std::max(j0, i + 1); j < j1; ++j) row[j - j0] = ninf;
  }
}

// P = exp(s - m) in place over one row of n scores (-inf scores give 0).
inline void attn_exp_row(float* row, int64_t n, float m) { exp_shifted(row, m, row, n); }

// in: q, k, v, [bias]; out: o [.., L, Ev], lse [.., L] (float32).
inline void k_attention(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                        const std::vector<MutableBuffer>& out) {
  const char* name = "attention";
  IPUML_CHECK(in.size() == (a.flag2 ? 4u : 3u), name, ": expected ", a.flag2 ? 4 : 3,
              " inputs, got ", in.size());
  const auto g = attn_geometry(name, in[0].meta.shape, in[1].meta.shape, in[2].meta.shape,
                               a.flag2 ? &in[3].meta.shape : nullptr);
  const float* q = in_ptr<float>(in[0]);
  const float* k = in_ptr<float>(in[1]);
  const float* v = in_ptr<float>(in[2]);
  const float* bias = a.flag2 ? in_ptr<float>(in[3]) : nullptr;
  float* o = out_ptr<float>(out[0]);
  float* lse = out_ptr<float>(out[1]);
  const float scale = static_cast<float>(a.scalar);
  const bool causal = a.flag;
  const int64_t qblocks = (g.l + kAttnQ - 1) / kAttnQ;
  const float ninf = -std::numeric_limits<float>::infinity();
  parallel_items(g.batch * qblocks, kAttnQ * g.s * (g.e + g.ev), [&](int64_t t0, int64_t t1) {
    float* sc = attn_scratch(0, kAttnQ * kAttnK);
    float m[kAttnQ], l[kAttnQ];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / qblocks, i0 = (t % qblocks) * kAttnQ;
      const int64_t i1 = std::min(g.l, i0 + kAttnQ), rows = i1 - i0;
      float* acc = o + (n * g.l + i0) * g.ev;  // the output rows accumulate in place
      std::fill_n(acc, rows * g.ev, 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        m[r] = ninf;
        l[r] = 0.0f;
      }
      const int64_t s_end = causal ? std::min(g.s, i1) : g.s;  // keys any row may see
      for (int64_t j0 = 0; j0 < s_end; j0 += kAttnK) {
        const int64_t j1 = std::min(s_end, j0 + kAttnK), cols = j1 - j0;
        attn_scores(g, q, k, bias, scale, causal, n, i0, i1, j0, j1, sc);
        for (int64_t r = 0; r < rows; ++r) {
          float* row = sc + r * kAttnK;
          float bm = ninf;
          for (int64_t c = 0; c < cols; ++c) bm = std::max(bm, row[c]);
          if (bm == ninf) {  // every key of this block is masked for this row
            std::fill_n(row, cols, 0.0f);
            continue;
          }
          const float nm = std::max(m[r], bm);
          const float corr = std::exp(m[r] - nm);  // 0 on the first visible block
          if (corr != 1.0f)
            for (int64_t d = 0; d < g.ev; ++d) acc[r * g.ev + d] *= corr;
          attn_exp_row(row, cols, nm);
          l[r] = l[r] * corr + pairwise_sum(row, cols);
          m[r] = nm;
        }
        sgemm(false, false, rows, g.ev, cols, 1.0f, sc, kAttnK, v + (n * g.s + j0) * g.ev, g.ev,
              1.0f, acc, g.ev);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const float inv = 1.0f / l[r];  // a row with every key masked gives NaN, as PyTorch
        for (int64_t d = 0; d < g.ev; ++d) acc[r * g.ev + d] *= inv;
        lse[n * g.l + i0 + r] = m[r] + std::log(l[r]);
      }
    }
  });
}

// in: dout, q, k, v, out, lse, [bias]; out: dq, dk, dv.
inline void k_attention_backward(const ir::Attrs& a, const std::vector<ConstBuffer>& in,
                                 const std::vector<MutableBuffer>& out) {
  const char* name = "attention_backward";
  IPUML_CHECK(in.size() == (a.flag2 ? 7u : 6u), name, ": expected ", a.flag2 ? 7 : 6,
              " inputs, got ", in.size());
  const auto g = attn_geometry(name, in[1].meta.shape, in[2].meta.shape, in[3].meta.shape,
                               a.flag2 ? &in[6].meta.shape : nullptr);
  const float* dout = in_ptr<float>(in[0]);
  const float* q = in_ptr<float>(in[1]);
  const float* k = in_ptr<float>(in[2]);
  const float* v = in_ptr<float>(in[3]);
  const float* o = in_ptr<float>(in[4]);
  const float* lse = in_ptr<float>(in[5]);
  const float* bias = a.flag2 ? in_ptr<float>(in[6]) : nullptr;
  float* dq = out_ptr<float>(out[0]);
  float* dk = out_ptr<float>(out[1]);
  float* dv = out_ptr<float>(out[2]);
  const float scale = static_cast<float>(a.scalar);
  const bool causal = a.flag;
  const float ninf = -std::numeric_limits<float>::infinity();
  // D_i = dout_i . out_i
  std::vector<float> dsum(static_cast<size_t>(g.batch * g.l));
  parallel_items(g.batch * g.l, g.ev, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      dsum[static_cast<size_t>(r)] = attn_dot(dout + r * g.ev, o + r * g.ev, g.ev);
  });
  // For one block: sc becomes P, dp becomes dS = P (dP - D) (both [rows x kAttnK]).
  auto block = [&](int64_t n, int64_t i0, int64_t i1, int64_t j0, int64_t j1, float* sc,
                   float* dp) {
    const int64_t cols = j1 - j0;
    attn_scores(g, q, k, bias, scale, causal, n, i0, i1, j0, j1, sc);
    sgemm(false, true, i1 - i0, cols, g.ev, 1.0f, dout + (n * g.l + i0) * g.ev, g.ev,
          v + (n * g.s + j0) * g.ev, g.ev, 0.0f, dp, kAttnK);
    for (int64_t i = i0; i < i1; ++i) {
      float* row = sc + (i - i0) * kAttnK;
      float* drow = dp + (i - i0) * kAttnK;
      const float m = lse[n * g.l + i];
      if (m == ninf)  // the row saw no key: no gradient flows through it
        std::fill_n(row, cols, 0.0f);
      else
        attn_exp_row(row, cols, m);
      const float di = dsum[static_cast<size_t>(n * g.l + i)];
      for (int64_t c = 0; c < cols; ++c) drow[c] = row[c] * (drow[c] - di);
    }
  };
  // One task per batch index walks key blocks in order and, for each, the query blocks in
  // order: every block pair's probabilities are computed once and feed dv, dk and dq, and all
  // three sums run in a fixed order. (The GEMMs inside split further over threads.)
  parallel_items(g.batch, g.l * g.s * (g.e + g.ev), [&](int64_t n0, int64_t n1) {
    float* sc = attn_scratch(0, kAttnQ * kAttnK);
    float* dp = attn_scratch(1, kAttnQ * kAttnK);
    for (int64_t n = n0; n < n1; ++n) {
      std::fill_n(dq + n * g.l * g.e, g.l * g.e, 0.0f);
      for (int64_t j0 = 0; j0 < g.s; j0 += kAttnK) {
        const int64_t j1 = std::min(g.s, j0 + kAttnK), cols = j1 - j0;
        float* dkb = dk + (n * g.s + j0) * g.e;
        float* dvb = dv + (n * g.s + j0) * g.ev;
        std::fill_n(dkb, cols * g.e, 0.0f);
        std::fill_n(dvb, cols * g.ev, 0.0f);
        // Under a causal mask, queries before j0 see none of these keys.
        for (int64_t i0 = causal ? j0 - j0 % kAttnQ : 0; i0 < g.l; i0 += kAttnQ) {
          const int64_t i1 = std::min(g.l, i0 + kAttnQ), rows = i1 - i0;
          block(n, i0, i1, j0, j1, sc, dp);
          sgemm(true, false, cols, g.ev, rows, 1.0f, sc, kAttnK, dout + (n * g.l + i0) * g.ev, g.ev,
                1.0f, dvb, g.ev);
          sgemm(true, false, cols, g.e, rows, scale, dp, kAttnK, q + (n * g.l + i0) * g.e, g.e,
                1.0f, dkb, g.e);
          sgemm(false, false, rows, g.e, cols, scale, dp, kAttnK, k + (n * g.s + j0) * g.e, g.e,
                1.0f, dq + (n * g.l + i0) * g.e, g.e);
        }
      }
    }
  });
}

}  // namespace ipuml::cpu::kdetail
