// Single-precision matrix multiply on raw row-major buffers: the CPU backend's hot path.
// Packed, cache-blocked and register-tiled per ISA (see cpu_features.hpp); deterministic under
// oneTBB.
#pragma once

#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/core/config.hpp>

#include <cstdint>

namespace ipuml::cpu {

// C[m,n] = alpha * sum_k op(A)[m,k] * op(B)[k,n] + beta * C[m,n]; row-major, lda/ldb/ldc are row
// strides of the stored (untransposed) matrices. beta == 0 never reads C. Results are identical
// bit for bit whatever the number of TBB threads.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// `batch` independent products; stride_* are element distances between consecutive matrices
// (0 broadcasts one matrix to the whole batch; with stride_c == 0 the products are applied to
// the same C one after another, in batch order).
void sgemm_batched(bool trans_a, bool trans_b, int64_t batch, int64_t m, int64_t n, int64_t k,
                   float alpha, const float* a, int64_t lda, int64_t stride_a, const float* b,
                   int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                   int64_t stride_c);

// The blocking the active ISA's GEMM runs with: micro-tile rows and columns, the depth of its k
// blocks, and its row and column blocks as fitted to this CPU's caches (benchmarks print it).
struct GemmBlocking {
  int mr = 0, nr = 0;
  int64_t kc = 0, mc = 0, nc = 0;
};
GemmBlocking gemm_blocking();

// Naive triple loop with double accumulation: the test oracle.
void sgemm_reference(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                     int64_t ldc);

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/gemm_impl.hpp>
#endif
