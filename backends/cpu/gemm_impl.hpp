// Bodies of the SGEMM entry points declared in gemm.hpp.
// Header-only mode includes this from gemm.hpp; compiled mode compiles it once in src/lib.
#pragma once

#include <ipuml/backends/cpu/cpu_features_impl.hpp>
#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/gemm_kernels.hpp>
#include <ipuml/core/error.hpp>

#include <algorithm>

namespace ipuml::cpu {

namespace detail {

// Each ISA's blocking and micro-kernel tables (declared in gemm_kernels.hpp).
inline const GemmConfig& generic_config() {
  static const GemmConfig cfg = [] {
    GemmConfig g{4, 16, 1, 256, 128, 4096, {}, {}, {}};
    g.kern[1][1] = kernel_generic<1>;
    g.kern[2][1] = kernel_generic<2>;
    g.kern[3][1] = kernel_generic<3>;
    g.kern[4][1] = kernel_generic<4>;
    g.kern_taps[1][1] = kernel_generic_taps<1>;
    g.kern_taps[2][1] = kernel_generic_taps<2>;
    g.kern_taps[3][1] = kernel_generic_taps<3>;
    g.kern_taps[4][1] = kernel_generic_taps<4>;
    return g;
  }();
  return cfg;
}

#ifdef IPUML_CPU_X86
template <int MR>
void fill_avx2(GemmConfig& g) {
  if constexpr (MR > 0) {
    g.kern[MR][1] = kernel_avx2<MR, 1>;
    g.kern[MR][2] = kernel_avx2<MR, 2>;
    g.kern_taps[MR][1] = kernel_avx2_taps<MR, 1>;
    g.kern_taps[MR][2] = kernel_avx2_taps<MR, 2>;
    g.kern_direct[MR][1] = kernel_avx2_direct<MR, 1>;
    g.kern_direct[MR][2] = kernel_avx2_direct<MR, 2>;
    fill_avx2<MR - 1>(g);
  }
}
template <int MR>
void fill_avx512(GemmConfig& g) {
  if constexpr (MR > 0) {
    g.kern[MR][1] = kernel_avx512<MR, 1>;
    g.kern[MR][2] = kernel_avx512<MR, 2>;
    g.kern_taps[MR][1] = kernel_avx512_taps<MR, 1>;
    g.kern_taps[MR][2] = kernel_avx512_taps<MR, 2>;
    g.kern_direct[MR][1] = kernel_avx512_direct<MR, 1>;
    g.kern_direct[MR][2] = kernel_avx512_direct<MR, 2>;
    fill_avx512<MR - 1>(g);
  }
}
inline const GemmConfig& avx2_config() {
  static const GemmConfig cfg = [] {
    GemmConfig g{6, 8, 2, 384, 144, 4096, {}, {}, {}};
    fill_avx2<6>(g);
    return fit_to_caches(g, detected_caches());
  }();
  return cfg;
}
inline const GemmConfig& avx512_config() {
  static const GemmConfig cfg = [] {
    GemmConfig g{14, 16, 2, 512, 168, 4096, {}, {}, {}};
    fill_avx512<14>(g);
    return fit_to_caches(g, detected_caches());
  }();
  return cfg;
}
#endif

IPUML_INLINE const GemmConfig& config_for(Isa isa) {
#ifdef IPUML_CPU_X86
  if (isa == Isa::avx512) return avx512_config();
  if (isa == Isa::avx2) return avx2_config();
#else
  (void)isa;
#endif
  return generic_config();
}

IPUML_INLINE void check_gemm_args(const char* op, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                  int64_t k, const float* a, int64_t lda, const float* b,
                                  int64_t ldb, const float* c, int64_t ldc) {
  IPUML_CHECK(m >= 0 && n >= 0 && k >= 0, op, ": sizes must be non-negative, got m=", m, " n=", n,
              " k=", k);
  const int64_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  IPUML_CHECK(lda >= std::max<int64_t>(1, a_cols), op, ": lda=", lda, " is smaller than the ",
              a_cols, " columns of the stored A");
  IPUML_CHECK(ldb >= std::max<int64_t>(1, b_cols), op, ": ldb=", ldb, " is smaller than the ",
              b_cols, " columns of the stored B");
  IPUML_CHECK(ldc >= std::max<int64_t>(1, n), op, ": ldc=", ldc, " is smaller than n=", n);
  IPUML_CHECK(m * n == 0 || c != nullptr, op, ": C is null");
  IPUML_CHECK(m * n * k == 0 || (a != nullptr && b != nullptr), op, ": A or B is null");
}

IPUML_INLINE void sgemm_unchecked(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                  float alpha, const float* a, int64_t lda, const float* b,
                                  int64_t ldb, float beta, float* c, int64_t ldc,
                                  bool allow_parallel) {
  const GemmConfig& cfg = config_for(active_isa());
  // Each transpose combination gets its own instantiation so the packers inline.
  if (!trans_a && !trans_b)
    run_gemm(cfg, m, n, k, alpha, PackRowMajorA{a, lda}, PackRowMajorB{b, ldb}, beta, c, ldc,
             allow_parallel);
  else if (!trans_a && trans_b)
    run_gemm(cfg, m, n, k, alpha, PackRowMajorA{a, lda}, PackColMajorB{b, ldb}, beta, c, ldc,
             allow_parallel);
  else if (trans_a && !trans_b)
    run_gemm(cfg, m, n, k, alpha, PackColMajorA{a, lda}, PackRowMajorB{b, ldb}, beta, c, ldc,
             allow_parallel);
  else
    run_gemm(cfg, m, n, k, alpha, PackColMajorA{a, lda}, PackColMajorB{b, ldb}, beta, c, ldc,
             allow_parallel);
}

}  // namespace detail

IPUML_INLINE void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                        const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                        float* c, int64_t ldc) {
  detail::check_gemm_args("sgemm", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  detail::sgemm_unchecked(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, true);
}

IPUML_INLINE void sgemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n,
                                int64_t k, float alpha, const float* a, int64_t lda,
                                int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                                float beta, float* c, int64_t ldc, int64_t stride_c) {
  IPUML_CHECK(batch >= 0, "sgemm_batched: batch must be non-negative, got ", batch);
  IPUML_CHECK(stride_a >= 0 && stride_b >= 0 && stride_c >= 0,
              "sgemm_batched: strides must be non-negative, got ", stride_a, ", ", stride_b, ", ",
              stride_c);
  detail::check_gemm_args("sgemm_batched", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  if (batch == 0) return;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  const int threads = detail::available_threads();
  // Many small products: one task per product, each run serially. Big ones: one after another,
  // each parallel inside. A shared C must be updated in batch order, so it never goes parallel
  // across the batch.
  const bool across = stride_c != 0 && threads > 1 && batch > 1 &&
                      flops * double(batch) >= detail::kParallelFlops &&
                      flops < 8.0 * detail::kParallelFlops * threads;
  detail::for_each_index(across, batch, [&](int64_t i) {
    detail::sgemm_unchecked(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda,
                            b + i * stride_b, ldb, beta, c + i * stride_c, ldc, !across);
  });
}

IPUML_INLINE GemmBlocking gemm_blocking() {
  const detail::GemmConfig& cfg = detail::config_for(active_isa());
  return GemmBlocking{cfg.mr, cfg.nr(), cfg.kc, cfg.mc, cfg.nc};
}

IPUML_INLINE void sgemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                  float alpha, const float* a, int64_t lda, const float* b,
                                  int64_t ldb, float beta, float* c, int64_t ldc) {
  detail::check_gemm_args("sgemm_reference", trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = trans_a ? a[p * lda + i] : a[i * lda + p];
        const double y = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        acc += x * y;
      }
      double r = double(alpha) * acc;
      if (beta != 0.0f) r += double(beta) * c[i * ldc + j];
      c[i * ldc + j] = float(r);
    }
}

}  // namespace ipuml::cpu
