// Internal to the CPU backend: register-tiled SGEMM micro-kernels per ISA and the packed,
// cache-blocked driver that gemm and conv (implicit im2col) both run on. Not a public API.
#pragma once

#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/core/denormals.hpp>
#include <ipuml/core/parallel.hpp>

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IPUML_CPU_X86 1
#endif

namespace ipuml::cpu::detail {

// C[0:mr, 0:nr] = alpha * (packed A panel x packed B panel) + beta * C; beta == 0 never reads C,
// so garbage (NaN) in C cannot leak into the result. A panel: kc x mr, mr values per k.
// B panel: kc x width, width values per k, zero-padded past nr.
using MicroKernel = void (*)(int64_t kc, const float* pa, const float* pb, float* c, int64_t ldc,
                             int nr, float alpha, float beta);
// The same product with B row p read in place at base + taps[p] (full-width panels only): the
// stride-1 convolution's input rows, unpacked.
using TapKernel = void (*)(int64_t kc, const float* pa, const float* base, const int64_t* taps,
                           float* c, int64_t ldc, int nr, float alpha, float beta);
// The same product with A read in place from a row-major matrix (row i at a + i * lda, no packed
// panel) and B row p at b + p * ldb (a packed panel, ldb = its width, or a row-major B in place).
using DirectKernel = void (*)(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb,
                              float* c, int64_t ldc, int nr, float alpha, float beta);

// Where a micro-kernel finds row p of its B panel.
struct PackedRows {
  const float* pb;
  int64_t width;
  const float* row(int64_t p) const { return pb + p * width; }
  const float* ahead(int64_t p) const { return pb + (p + 8) * width; }  // to prefetch
  static constexpr bool kPrefetchC = true;
};
struct TapRows {
  const float* base;
  const int64_t* taps;
  const float* row(int64_t p) const { return base + taps[p]; }
  const float* ahead(int64_t) const { return nullptr; }  // rows are already in cache
  static constexpr bool kPrefetchC = false;  // (measured: it slowed the 1x1 convolutions)
};
struct StridedRows {
  const float* b;
  int64_t ldb;
  const float* row(int64_t p) const { return b + p * ldb; }
  const float* ahead(int64_t) const { return nullptr; }
  static constexpr bool kPrefetchC = true;
};

// Where a micro-kernel finds A(i, p), row i of its tile at depth p.
template <int MR>
struct PackedA {  // a packed panel: MR values per k
  const float* pa;
  const float* at(int i, int64_t p) const { return pa + p * MR + i; }
};
struct DirectA {  // a row-major matrix, read in place
  const float* a;
  int64_t lda;
  const float* at(int i, int64_t p) const { return a + i * lda + p; }
};

constexpr int kMaxMr = 14;
constexpr int kMaxNv = 2;

// Blocking of one ISA path. The k blocking is part of the numerical result (it fixes where
// partial sums are rounded into C), so it depends on the ISA and k only (kc caps it; see
// block_depth), never on the thread count or the problem split.
struct GemmConfig {
  int mr;  // rows of a full micro-tile
  int vw;  // floats per vector; B panels are padded to a multiple of it
  int nv;  // vectors per micro-tile row (nr = vw * nv)
  int64_t kc, mc, nc;
  MicroKernel kern[kMaxMr + 1][kMaxNv + 1];          // [rows][vectors]
  TapKernel kern_taps[kMaxMr + 1][kMaxNv + 1];       // [rows][vectors]
  DirectKernel kern_direct[kMaxMr + 1][kMaxNv + 1];  // [rows][vectors]; null: none for this ISA
  int nr() const { return vw * nv; }
};

// ---------------------------------------------------------------- portable micro-kernel
// GCC/Clang vector extensions: 4-float vectors map to SSE2/NEON on any target without -m flags.
// (Plain scalar loops here got vectorised across k with shuffles and ran 10x slower.)
typedef float GenericVec __attribute__((vector_size(16)));

template <int MR, class Rows>
void kernel_generic_rows(int64_t kc, const float* pa, const Rows& rows, float* c, int64_t ldc,
                         int nr, float alpha, float beta) {
  constexpr int NR = 16, NV = NR / 4;
  GenericVec acc[MR][NV] = {};
  for (int64_t p = 0; p < kc; ++p) {
    GenericVec b[NV];
    std::memcpy(b, rows.row(p), sizeof(b));
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const float a = pa[p * MR + i];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] += a * b[v];
    }
  }
  for (int i = 0; i < MR; ++i) {
    float tile[NR];
    std::memcpy(tile, acc[i], sizeof(tile));
    float* cr = c + i * ldc;
    if (beta == 0.0f) {
      for (int j = 0; j < nr; ++j) cr[j] = alpha * tile[j];
    } else {
      for (int j = 0; j < nr; ++j) cr[j] = alpha * tile[j] + beta * cr[j];
    }
  }
}
template <int MR>
void kernel_generic(int64_t kc, const float* pa, const float* pb, float* c, int64_t ldc, int nr,
                    float alpha, float beta) {
  kernel_generic_rows<MR>(kc, pa, PackedRows{pb, 16}, c, ldc, nr, alpha, beta);
}
template <int MR>
void kernel_generic_taps(int64_t kc, const float* pa, const float* base, const int64_t* taps,
                         float* c, int64_t ldc, int nr, float alpha, float beta) {
  kernel_generic_rows<MR>(kc, pa, TapRows{base, taps}, c, ldc, nr, alpha, beta);
}

#ifdef IPUML_CPU_X86
// ---------------------------------------------------------------- AVX2 + FMA micro-kernel
// 6 x 16 tile: 12 accumulators + 2 B vectors + 1 broadcast fit the 16 ymm registers.
template <int MR, int NV, class Rows, class A = PackedA<MR>>
__attribute__((target("avx2,fma,prfchw"), always_inline)) inline void kernel_avx2_rows(
    int64_t kc, const A& a_tile, const Rows& rows, float* c, int64_t ldc, int nr, float alpha,
    float beta) {
  constexpr int W = 8 * NV;
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  // C is written at the end, and read too when beta != 0: fetch its lines for writing now, or
  // each call stalls on a cache miss per row of its tile.
  if (Rows::kPrefetchC) {
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      __builtin_prefetch(c + i * ldc, 1, 3);
      __builtin_prefetch(c + i * ldc + W - 1, 1, 3);
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m256 b[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) b[v] = _mm256_loadu_ps(rows.row(p) + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(a_tile.at(i, p));
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(a, b[v], acc[i][v]);
    }
  }
  // Opaque to the optimiser, as in the AVX-512 kernel: the C row pointers are not computed
  // before the loop, where they would take registers that the accumulators need.
  asm("" : "+r"(c), "+r"(ldc));
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i mask[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8 * v), iota);
  const bool full = nr == W;
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* cr = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m256 r = _mm256_mul_ps(acc[i][v], va);
      if (full) {
        if (beta != 0.0f) r = _mm256_fmadd_ps(_mm256_loadu_ps(cr + 8 * v), vb, r);
        _mm256_storeu_ps(cr + 8 * v, r);
      } else {
        if (beta != 0.0f) r = _mm256_fmadd_ps(_mm256_maskload_ps(cr + 8 * v, mask[v]), vb, r);
        _mm256_maskstore_ps(cr + 8 * v, mask[v], r);
      }
    }
  }
}

template <int MR, int NV>
__attribute__((target("avx2,fma,prfchw"))) void kernel_avx2(int64_t kc, const float* pa,
                                                            const float* pb, float* c, int64_t ldc,
                                                            int nr, float alpha, float beta) {
  kernel_avx2_rows<MR, NV>(kc, PackedA<MR>{pa}, PackedRows{pb, 8 * NV}, c, ldc, nr, alpha, beta);
}
template <int MR, int NV>
__attribute__((target("avx2,fma,prfchw"))) void kernel_avx2_taps(int64_t kc, const float* pa,
                                                                 const float* base,
                                                                 const int64_t* taps, float* c,
                                                                 int64_t ldc, int nr, float alpha,
                                                                 float beta) {
  kernel_avx2_rows<MR, NV>(kc, PackedA<MR>{pa}, TapRows{base, taps}, c, ldc, nr, alpha, beta);
}
template <int MR, int NV>
__attribute__((target("avx2,fma,prfchw"))) void kernel_avx2_direct(int64_t kc, const float* a,
                                                                   int64_t lda, const float* b,
                                                                   int64_t ldb, float* c,
                                                                   int64_t ldc, int nr, float alpha,
                                                                   float beta) {
  kernel_avx2_rows<MR, NV>(kc, DirectA{a, lda}, StridedRows{b, ldb}, c, ldc, nr, alpha, beta);
}

// ---------------------------------------------------------------- AVX-512 micro-kernel
// 14 x 32 tile: 28 accumulators + 2 B vectors + 1 broadcast of the 32 zmm registers; the
// broadcasts fold into the FMAs as memory operands, so loads stay under the two-per-cycle limit.
template <int MR, int NV, class Rows, class A = PackedA<MR>>
__attribute__((target("avx512f"), always_inline)) inline void kernel_avx512_rows(
    int64_t kc, const A& a_tile, const Rows& rows, float* c, int64_t ldc, int nr, float alpha,
    float beta) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  // C is read at the end when beta != 0 (every k block after the first): fetch it now.
  if (Rows::kPrefetchC && beta != 0.0f) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * NV - 1), _MM_HINT_T0);
    }
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 b[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(rows.row(p) + 16 * v);
    if (const float* next = rows.ahead(p)) {
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(next + 16 * v), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(*a_tile.at(i, p));
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
    }
  }
  // Opaque to the optimiser: otherwise GCC computes the C row pointers before the loop and parks
  // them in vector registers, spilling a B vector to the stack every iteration (13-row tiles).
  asm("" : "+r"(c), "+r"(ldc));
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  __mmask16 mask[NV];
#pragma GCC unroll 2
  for (int v = 0; v < NV; ++v) {
    const int left = nr - 16 * v;
    mask[v] = left >= 16  ? __mmask16(0xFFFF)
              : left <= 0 ? __mmask16(0)
                          : __mmask16((1u << left) - 1u);
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* cr = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m512 r = _mm512_mul_ps(acc[i][v], va);
      if (beta != 0.0f) r = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask[v], cr + 16 * v), vb, r);
      _mm512_mask_storeu_ps(cr + 16 * v, mask[v], r);
    }
  }
}
template <int MR, int NV>
__attribute__((target("avx512f"))) void kernel_avx512(int64_t kc, const float* pa, const float* pb,
                                                      float* c, int64_t ldc, int nr, float alpha,
                                                      float beta) {
  kernel_avx512_rows<MR, NV>(kc, PackedA<MR>{pa}, PackedRows{pb, 16 * NV}, c, ldc, nr, alpha, beta);
}
template <int MR, int NV>
__attribute__((target("avx512f"))) void kernel_avx512_taps(int64_t kc, const float* pa,
                                                           const float* base, const int64_t* taps,
                                                           float* c, int64_t ldc, int nr,
                                                           float alpha, float beta) {
  kernel_avx512_rows<MR, NV>(kc, PackedA<MR>{pa}, TapRows{base, taps}, c, ldc, nr, alpha, beta);
}
template <int MR, int NV>
__attribute__((target("avx512f"))) void kernel_avx512_direct(int64_t kc, const float* a,
                                                             int64_t lda, const float* b,
                                                             int64_t ldb, float* c, int64_t ldc,
                                                             int nr, float alpha, float beta) {
  kernel_avx512_rows<MR, NV>(kc, DirectA{a, lda}, StridedRows{b, ldb}, c, ldc, nr, alpha, beta);
}
#endif  // IPUML_CPU_X86

// The row and column blocks fitted to the caches: a packed A block (mc x kc) in at most half of
// L2 and a packed B block (kc x nc) in at most half of L3, lowering the tuned mc and nc (measured
// on a Xeon with 2 MiB of L2 and an EPYC Zen 3 with 512 KiB: neither changes there) on cores
// with less cache, never raising them; unknown sizes (0) leave them. kc stays the ISA's: the k
// blocks fix where partial sums are rounded, so a machine's caches would otherwise change the
// bits of every product on it. mc and nc only split the work, never the arithmetic.
inline GemmConfig fit_to_caches(GemmConfig g, const CacheSizes& caches) {
  const int64_t row_bytes = g.kc * int64_t(sizeof(float));
  if (caches.l2 > 0) {
    const int64_t mc = caches.l2 / 2 / row_bytes / g.mr * g.mr;
    g.mc = std::clamp<int64_t>(mc, 2 * g.mr, g.mc);
  }
  if (caches.l3 > 0) {
    const int64_t nc = caches.l3 / 2 / row_bytes / g.nr() * g.nr();
    g.nc = std::clamp<int64_t>(nc, 4 * g.nr(), g.nc);
  }
  return g;
}

// The blocking and micro-kernels of `isa`, fitted to the detected caches. Defined in gemm_impl.hpp:
// the tables take the address of every ISA's micro-kernels, which are then compiled in the one
// unit that defines them (src/lib/cpu_gemm.cpp) instead of in every unit that runs a product.
IPUML_INLINE const GemmConfig& config_for(Isa isa);

// ---------------------------------------------------------------- scratch memory
struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using AlignedPtr = std::unique_ptr<float[], AlignedFree>;

inline AlignedPtr aligned_floats(size_t n) {
  return AlignedPtr(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64})));
}

// Scratch allocations made so far (a slot growing, or a private buffer for a busy slot): a
// training step whose shapes were all seen before makes none.
inline std::atomic<size_t>& scratch_allocation_count() {
  static std::atomic<size_t> count{0};
  return count;
}

// A per-thread buffer that is reused across calls (page faults on fresh allocations would cost
// more than small GEMMs). A thread can re-enter while its buffer is lent out (TBB lets a thread
// that waits in parallel_for run another task that also calls sgemm), so a busy slot hands out a
// private allocation instead.
class ScratchLease {
 public:
  static constexpr int kSlots = 9;
  ScratchLease(int slot, size_t n) {
    Slot& s = slots()[slot];
    if (!s.busy) {
      if (s.size < n) {
        s.data.reset();
        s.data = aligned_floats(n);
        s.size = n;
        ++scratch_allocation_count();
      }
      s.busy = true;
      slot_ = &s;
      ptr_ = s.data.get();
    } else {
      own_ = aligned_floats(n);
      ptr_ = own_.get();
      ++scratch_allocation_count();
    }
  }
  ~ScratchLease() {
    if (slot_) slot_->busy = false;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  float* get() const { return ptr_; }

 private:
  struct Slot {
    AlignedPtr data;
    size_t size = 0;
    bool busy = false;
  };
  static Slot* slots() {
    thread_local Slot s[kSlots];
    return s;
  }
  Slot* slot_ = nullptr;
  AlignedPtr own_;
  float* ptr_ = nullptr;
};

// Slots of ScratchLease: one per buffer that can be alive at the same time on one thread.
enum ScratchSlot {
  kScratchA = 0,        // run_gemm: a task's packed A block
  kScratchB = 1,        // run_gemm: the packed B panels of one kc block
  kScratchConv = 2,     // conv: a column matrix or one padded image
  kScratchConvOut = 3,  // conv: one image's wide output
  kScratchPrepack = 4,  // conv: the prepacked weights of one call
  kScratchWide = 5,     // conv: the batch's wide gradient / padded input for dW
  kScratchPhases = 6,   // conv: a strided convolution's space-to-depth input
  kScratchPhaseW = 7,   // conv: its split kernel, or that kernel's gradient
  kScratchImage = 8,    // conv: one image's output for a ConvImageSink
};

// Parallelism visible to this call: the arena's size capped by any tbb::global_control. Only the
// work split depends on it, never the arithmetic.
inline int available_threads() {
  const int arena = tbb::this_task_arena::max_concurrency();
  const int global = static_cast<int>(
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  return std::max(1, std::min(arena, global));
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Runs body(i) for i in [0, count): in parallel when `parallel`, otherwise in order.
template <class F>
void for_each_index(bool parallel, int64_t count, const F& body) {
  if (!parallel || count <= 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  const ipuml::detail::LoopAccount account(count);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, count, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        const ipuml::detail::InLoopBody inside;
        ipuml::detail::apply_denormal_mode();
        for (int64_t i = r.begin(); i != r.end(); ++i) body(i);
      },
      tbb::simple_partitioner());
}

// Rows of the micro-tiles for an m-row product: the config's mr, lowered so the tiles come out
// even (m = 32 as 11 + 11 + 10, not 14 + 14 + 4, whose last tile wastes most of its FMAs). Each C
// element's arithmetic does not depend on the tile it falls in, so neither do the results.
inline int tile_rows(const GemmConfig& cfg, int64_t m) {
  const int64_t tiles = ceil_div(std::max<int64_t>(m, 1), cfg.mr);
  return int(ceil_div(std::max<int64_t>(m, 1), tiles));
}

// Depth of the k blocks for a k-deep product: at most the config's kc, in blocks of equal depth
// (k = 288 as 144 + 144, not 256 + 32, whose short block pays a full C round trip for little).
// It depends on k and the ISA only, never on the thread count, so it fixes the rounding.
inline int64_t block_depth(const GemmConfig& cfg, int64_t k) {
  const int64_t blocks = ceil_div(std::max<int64_t>(k, 1), cfg.kc);
  return round_up(ceil_div(std::max<int64_t>(k, 1), blocks), 4);
}

// Below this many flops a call runs on the calling thread: spawning would cost more than it saves.
constexpr double kParallelFlops = 2.0e6;
// Caps of run_gemm's column_chunks path: floats of the packed A it packs up front (4 MiB), floats
// of packed B panels that one of its tasks packs per k block (4 MiB).
constexpr int64_t kColumnChunkA = int64_t(1) << 20;
constexpr int64_t kColumnChunkFloats = int64_t(1) << 20;

// dst holds `count` panels of nr_full columns, each kc x nr_full, one after another; row p of
// all of them is the run of count * nr_full floats at row(p). Row by row: each run is read once,
// the run 4 rows ahead prefetched (rows a B row or a channel plane apart, which the hardware
// prefetchers do not follow), in fixed-size copies for the ISAs' panel widths.
template <class Row>
void copy_panels_by_rows(float* dst, int64_t count, int nr_full, int64_t kc, const Row& row) {
  const auto by_rows = [&](auto width) {
    constexpr int64_t W = decltype(width)::value;
    const int64_t w = W > 0 ? W : nr_full;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = row(p);
      if (p + 4 < kc) {
        const float* ahead = row(p + 4);
        for (int64_t f = 0; f < count * w; f += 16) __builtin_prefetch(ahead + f);
      }
      for (int64_t f = 0; f < count; ++f)
        std::memcpy(dst + (f * kc + p) * w, src + f * w, sizeof(float) * size_t(W > 0 ? W : w));
    }
  };
  if (nr_full == 16) return by_rows(std::integral_constant<int64_t, 16>{});
  if (nr_full == 32) return by_rows(std::integral_constant<int64_t, 32>{});
  by_rows(std::integral_constant<int64_t, 0>{});
}

// A B packer seen from column `shift` on (run_gemm's column blocks of nc).
template <class PackB>
struct PackShiftedB {
  const PackB& inner;
  int64_t shift;
  void operator()(float* dst, int64_t j0, int nr, int w, int64_t p0, int64_t kc) const {
    inner(dst, shift + j0, nr, w, p0, kc);
  }
  void pack_full_panels(float* dst, int64_t j0, int64_t count, int nr_full, int64_t p0,
                        int64_t kc) const requires requires(const PackB& b, float* d, int64_t i) {
    b.pack_full_panels(d, i, i, 16, i, i);
  }
  { inner.pack_full_panels(dst, shift + j0, count, nr_full, p0, kc); }
};

// Panels [jp0, jp1) of B (each nr_full columns, the last one ending at column n), one after
// another nr_full * kc floats apart at dst. A packer that can copy a run of whole panels row by
// row (pack_full_panels: plain row-major B) does so: each of the kc rows is then one run of
// memory, read once, rather than one cache line per row per panel, rows a whole B row apart
// whose lines and pages the hardware prefetchers do not follow (7-8 % of a 512 x 3072 x 768
// product on AVX2, whose panels are 16 wide). Either way each panel holds the same values.
template <class PackB>
void pack_b_panels(const PackB& pack_b, float* dst, int64_t jp0, int64_t jp1, int64_t n,
                   int nr_full, int vw, int64_t p0, int64_t kc) {
  int64_t jp = jp0;
  if constexpr (requires { pack_b.pack_full_panels(dst, 0, 0, 16, 0, 0); }) {
    const int64_t full = std::min(jp1, n / nr_full) - jp0;
    if (full > 1) {
      pack_b.pack_full_panels(dst, jp0 * nr_full, full, nr_full, p0, kc);
      jp += full;
    }
  }
  for (; jp < jp1; ++jp) {
    const int64_t j0 = jp * nr_full;
    const int nr = int(std::min<int64_t>(nr_full, n - j0));
    pack_b(dst + (jp - jp0) * nr_full * kc, j0, nr, int(round_up(nr, vw)), p0, kc);
  }
}
// Panels packed at once by pack_b_panels where a task packs as it goes: 8 x 16 columns (a
// 512-byte run per row) on AVX2, 4 x 32 on AVX-512.
inline int64_t panels_per_pack(int nr_full) { return std::max<int64_t>(1, 128 / nr_full); }

// One product as run_gemm runs it: its operands, and the split every path derives from them
// (micro-tile rows, panel width, threads, k blocks). Each path is a member of its own.
struct PackRowMajorA;
struct PackRowMajorB;
// The deepest k block one_row_block reads B in place for (every ISA's kc is at most this).
constexpr int64_t kMaxInPlaceKc = 512;
// one_row_block's small products: at most this many panels of B read a row-major A in place (the
// direct kernels), and a B of at most kSmallB floats (1 MiB) is packed one panel at a time.
constexpr int64_t kMaxDirectPanels = 8;
constexpr int64_t kSmallB = int64_t(1) << 18;

template <class PackA, class PackB>
struct GemmRun {
  const GemmConfig& cfg;
  int64_t m, n, k;
  float alpha;
  const PackA& pack_a;
  const PackB& pack_b;
  float beta;
  float* c;
  int64_t ldc;
  int mr, nr_full, threads;
  bool parallel;
  int64_t kc_blk;

  // Whether B is a plain row-major matrix that one_row_block reads in place, and where.
  bool b_in_place() const {
    if constexpr (std::is_same_v<PackB, PackRowMajorB>) return true;
    return false;
  }
  int64_t b_stride() const {
    if constexpr (std::is_same_v<PackB, PackRowMajorB>) return pack_b.ldb;
    return 0;
  }
  // A plain row-major A, which the direct kernels read in place (null: A must be packed).
  const float* a_matrix() const {
    if constexpr (std::is_same_v<PackA, PackRowMajorA>) return pack_a.a;
    return nullptr;
  }
  int64_t a_stride() const {
    if constexpr (std::is_same_v<PackA, PackRowMajorA>) return pack_a.lda;
    return 0;
  }
  const float* b_row(int64_t p) const {
    if constexpr (std::is_same_v<PackB, PackRowMajorB>) return pack_b.b + p * pack_b.ldb;
    (void)p;
    return nullptr;
  }

  // All of A packed at pa, k block after k block, each tile after tile of kc x mr (m_pad = the
  // rows rounded up to whole tiles), over the threads when `parallel`; tiles of `rows` rows for
  // which skip(rows) holds are left unpacked. one_row_block, deep_k and column_chunks share it.
  template <class Skip>
  void pack_whole_a(float* pa, bool parallel, const Skip& skip) const {
    const int64_t tiles = ceil_div(m, mr), m_pad = tiles * mr;
    for_each_index(parallel, tiles * ceil_div(k, kc_blk), [&](int64_t i) {
      const int64_t t = i % tiles, pc = (i / tiles) * kc_blk, kc = std::min(kc_blk, k - pc);
      const int rows = int(std::min<int64_t>(mr, m - t * mr));
      if (!skip(rows)) pack_a(pa + pc * m_pad + t * mr * kc, t * mr, rows, pc, kc);
    });
  }
  void pack_whole_a(float* pa, bool parallel) const {
    pack_whole_a(pa, parallel, [](int) { return false; });
  }

  // A deep reduction under a small C (a weight gradient: m x n of a layer's weights, k over the
  // batch's pixels) gives every k block too little work to fork and join for. Each task then
  // owns a piece of C and runs all k blocks itself, packing what it needs; every C element still
  // sees the same k blocks in the same order through the same micro-kernel.
  void deep_k() const {
    const int64_t panels = ceil_div(n, nr_full), tiles = ceil_div(m, mr), want = 2 * threads;
    const int64_t n_chunks = std::min(panels, want);
    const int64_t m_chunks = std::min(tiles, ceil_div(want, n_chunks));
    const int64_t chunk_panels = ceil_div(panels, n_chunks),
                  chunk_tiles = ceil_div(tiles, m_chunks);
    // With AVX2, when every task takes all the rows, A is packed once, all its k blocks, and
    // shared (as in one_row_block) while it stays within kColumnChunkA: each task packing it again
    // cost 6-20 % on 2 threads of a Zen 5 (a ResNet-50 3x3 on 7x7 maps at batch 1, 49 x 512 x
    // 4608: 114-119 -> 127-132 GFLOP/s in one noisy run, 136 -> 165 in another; 128 x 768 x 3072:
    // 132-142 -> 140-153, 158 -> 181). With AVX-512 the same sharing ran 1-4 % slower there (six
    // alternating runs; why, not found), so each task packs its own.
    const int64_t m_pad = tiles * mr;
    std::optional<ScratchLease> shared_a;
    if (cfg.vw == 8 && m_chunks == 1 && m_pad * k <= kColumnChunkA) {
      shared_a.emplace(kScratchA, size_t(m_pad * k));
      pack_whole_a(shared_a->get(), true);
    }
    for_each_index(true, m_chunks * n_chunks, [&](int64_t task) {
      const int64_t i0 = (task / n_chunks) * chunk_tiles * mr;
      const int64_t jp0 = (task % n_chunks) * chunk_panels;
      const int64_t jp1 = std::min(panels, jp0 + chunk_panels);
      if (i0 >= m || jp0 >= jp1) return;
      const int64_t mcur = std::min(chunk_tiles * mr, m - i0);
      std::optional<ScratchLease> a_lease;
      if (!shared_a) a_lease.emplace(kScratchA, size_t(round_up(mcur, mr) * kc_blk));
      ScratchLease b_lease(kScratchB, size_t((jp1 - jp0) * nr_full * kc_blk));
      float* pb_all = b_lease.get();
      for (int64_t pc = 0; pc < k; pc += kc_blk) {
        const int64_t kc = std::min(kc_blk, k - pc);
        const float beta_eff = pc == 0 ? beta : 1.0f;
        const float* pa = shared_a ? shared_a->get() + pc * m_pad : a_lease->get();
        if (!shared_a)
          for (int64_t ir = 0; ir < mcur; ir += mr)
            pack_a(a_lease->get() + ir * kc, i0 + ir, int(std::min<int64_t>(mr, mcur - ir)), pc,
                   kc);
        pack_b_panels(pack_b, pb_all, jp0, jp1, n, nr_full, cfg.vw, pc, kc);
        for (int64_t jp = jp0; jp < jp1; ++jp) {
          const int64_t j0 = jp * nr_full;
          const int nr = int(std::min<int64_t>(nr_full, n - j0));
          const int nv = int(ceil_div(nr, cfg.vw));
          const float* pb = pb_all + (jp - jp0) * nr_full * kc;
          for (int64_t ir = 0; ir < mcur; ir += mr) {
            const int rows = int(std::min<int64_t>(mr, mcur - ir));
            cfg.kern[rows][nv](kc, pa + ir * kc, pb, c + (i0 + ir) * ldc + j0, ldc, nr, alpha,
                               beta_eff);
          }
        }
      }
    });
  }

  // One row block (m <= mc): A is packed once, every k block of it, and shared; then one
  // parallel loop over chunks of B panels, each task running all k blocks of its panels and
  // packing each panel just before using it, while it is hot in cache. (Packing a whole kc x nc
  // block of B first would write and re-read it through L3, 4.7 MB per k block for a 128 x 3072
  // x 768 product, for reuse that a single row block does not have; and one fork per k block
  // costs too much for the small products of a training step.) Deeper products (a weight
  // gradient's k runs over a batch's pixels) would make the packed A too big: they take row_blocks.
  void one_row_block() const {
    const int64_t k_blocks = ceil_div(k, kc_blk);
    const int64_t tiles = ceil_div(m, mr), m_pad = tiles * mr;
    // A small product (at most kMaxDirectPanels panels of B, so few reads of each A tile) with a
    // plain row-major A skips A's packing: its tiles of 5 or more rows run the direct kernels,
    // which broadcast A(i, p) from the matrix itself (packing was 16 % of a 64^3 product on AVX2;
    // with more panels the packed A pays, and 4-row direct tiles ran 2-4 % slower). The kernels
    // read the same values in the same order, so the bits are the packed path's.
    const float* a_rows = a_matrix();
    const bool direct_a = a_rows != nullptr && cfg.kern_direct[mr][1] != nullptr &&
                          ceil_div(n, nr_full) <= kMaxDirectPanels;
    const auto direct = [&](int rows) { return direct_a && rows >= 5; };
    std::optional<ScratchLease> a_lease;
    float* pa = nullptr;  // k block after k block, each tile after tile of kc x mr
    if (!direct(int(std::min<int64_t>(mr, m - (tiles - 1) * mr))) || !direct(mr)) {
      a_lease.emplace(kScratchA, size_t(m_pad * k));
      pa = a_lease->get();
      pack_whole_a(pa, parallel && tiles * k_blocks >= 4, direct);
    }
    const int64_t lda = a_stride();
    for (int64_t jc = 0; jc < n; jc += cfg.nc) {
      const int64_t nc = std::min(cfg.nc, n - jc);
      const int64_t panels = ceil_div(nc, nr_full);
      // Four chunks per thread, but none under a quarter of the flops that pay for a fork.
      const double flops = 2.0 * double(m) * double(nc) * double(k);
      const int64_t want =
          parallel ? std::clamp<int64_t>(int64_t(4 * flops / kParallelFlops), 1, 4 * threads) : 1;
      // Even runs of panels (50 panels as 7 x 6 + 8, not 7 x 7 + 1).
      const int64_t chunks = std::min(panels, want);
      // (A small B, read from cache rather than memory, packs one panel at a time: each is
      // then still in L1 for its row tiles, where 8 panels of a 1600-deep B, 160 KiB, are not.)
      const int64_t batch = direct_a && n * k <= kSmallB ? 1 : panels_per_pack(nr_full);
      // Under one row tile a plain row-major B is read in place by its full panels (the tap
      // kernels, whose arithmetic is the packed kernels'): a panel copied first would be read
      // once. Under two, only while B's rows are at most 1 KiB apart, so that the second tile
      // still finds most of them in L1 (rows 12 KiB apart all fall in one L1 set). 8 x 128 x 1600
      // (MNIST's linear layer at batch 8): 57 -> 73 GFLOP/s on AVX2, 73 -> 127 on AVX-512;
      // 4 x 768 x 3072: 22 -> 25, 31 -> 41. (With more tiles the copy pays: read in place by
      // every tile, 128 x 3072 x 768 ran at half speed.)
      // (Row offsets on the stack, not a heap allocation per call: kc is at most kMaxInPlaceKc.)
      const bool in_place = b_in_place() && kc_blk <= kMaxInPlaceKc &&
                            (tiles == 1 || (tiles == 2 && b_stride() <= 256));
      std::array<int64_t, kMaxInPlaceKc> taps;
      if (in_place)
        for (int64_t p = 0; p < std::min(kc_blk, k); ++p) taps[size_t(p)] = p * b_stride();
      for_each_index(parallel, chunks, [&](int64_t chunk) {
        ScratchLease b_lease(kScratchB, size_t(batch * nr_full * std::min(kc_blk, k)));
        float* pb_batch = b_lease.get();
        const int64_t jp_begin = chunk * panels / chunks, jp_end = (chunk + 1) * panels / chunks;
        // Groups of panels whose C fits in L2 (256 KiB) run k block by k block: one k block of
        // the packed A serves the whole group before the next, so A stays in L2 too (all of it,
        // 1.5 MB at m = 128, k = 3072, would not), and C is not re-read from L3.
        const int64_t group = std::max<int64_t>(1, (int64_t(1) << 16) / (m * nr_full));
        for (int64_t g0 = jp_begin; g0 < jp_end; g0 += group)
          for (int64_t pc = 0; pc < k; pc += kc_blk) {
            const int64_t kc = std::min(kc_blk, k - pc);
            const int64_t g1 = std::min(jp_end, g0 + group);
            for (int64_t jp = g0; jp < g1; ++jp) {
              const int64_t j0 = jp * nr_full;
              const int nr = int(std::min<int64_t>(nr_full, nc - j0));
              const int nv = int(ceil_div(nr, cfg.vw));
              if (in_place && nr == nr_full) {
                const float* base = b_row(pc) + jc + j0;
                for (int64_t t = 0; t < tiles; ++t) {
                  const int rows = int(std::min<int64_t>(mr, m - t * mr));
                  float* ct = c + t * mr * ldc + jc + j0;
                  if (direct(rows))
                    cfg.kern_direct[rows][nv](kc, a_rows + t * mr * lda + pc, lda, base, b_stride(),
                                              ct, ldc, nr, alpha, pc == 0 ? beta : 1.0f);
                  else
                    cfg.kern_taps[rows][nv](kc, pa + pc * m_pad + t * mr * kc, base, taps.data(),
                                            ct, ldc, nr, alpha, pc == 0 ? beta : 1.0f);
                }
                continue;
              }
              // Packed `batch` panels at a time, just before their turn (only the last, partial
              // one when B is read in place).
              const int64_t b0 = in_place ? jp : g0 + (jp - g0) / batch * batch;
              if (jp == b0)
                pack_b_panels(PackShiftedB<PackB>{pack_b, jc}, pb_batch, jp,
                              std::min(g1, b0 + (in_place ? 1 : batch)), nc, nr_full, cfg.vw, pc,
                              kc);
              const float* pb = pb_batch + (jp - b0) * nr_full * kc;
              for (int64_t t = 0; t < tiles; ++t) {
                const int rows = int(std::min<int64_t>(mr, m - t * mr));
                float* ct = c + t * mr * ldc + jc + j0;
                if (direct(rows))
                  cfg.kern_direct[rows][nv](kc, a_rows + t * mr * lda + pc, lda, pb, cfg.vw * nv,
                                            ct, ldc, nr, alpha, pc == 0 ? beta : 1.0f);
                else
                  cfg.kern[rows][nv](kc, pa + pc * m_pad + t * mr * kc, pb, ct, ldc, nr, alpha,
                                     pc == 0 ? beta : 1.0f);
              }
            }
          }
      });
    }
  }

  // Chunks of B panels, each run through all k blocks by one task: A is packed up front, every
  // k block of it (as in one_row_block), and shared; then one parallel loop over
  // the chunks, each task packing its own panels k block by k block and running them against the
  // packed A in row blocks of mc. B is packed once, A once, and the threads fork and join once for
  // the packing and once for the product, where row_blocks does both per k block (16 joins for
  // k = 3072 on AVX2, each waiting for the slower thread). Every C element still sees the same k
  // blocks in the same order through the same micro-kernel.
  void column_chunks() const {
    const int64_t tiles = ceil_div(m, mr), m_pad = tiles * mr;
    ScratchLease a_lease(kScratchA, size_t(m_pad * k));
    float* pa = a_lease.get();  // k block after k block, each tile after tile of kc x mr
    pack_whole_a(pa, true);
    const int64_t mc = round_up(ceil_div(m, ceil_div(m, cfg.mc)), mr);
    const int64_t panels = ceil_div(n, nr_full);
    // Several chunks per thread, so that the faster thread takes more of them; none whose packed
    // panels outgrow 4 MiB.
    const int64_t max_panels = std::max<int64_t>(1, kColumnChunkFloats / (nr_full * kc_blk));
    const int64_t chunks =
        std::min(panels, std::max<int64_t>(4 * threads, ceil_div(panels, max_panels)));
    for_each_index(true, chunks, [&](int64_t chunk) {
      const int64_t jp0 = chunk * panels / chunks, jp1 = (chunk + 1) * panels / chunks;
      ScratchLease b_lease(kScratchB, size_t((jp1 - jp0) * nr_full * std::min(kc_blk, k)));
      float* pb_all = b_lease.get();
      for (int64_t pc = 0; pc < k; pc += kc_blk) {
        const int64_t kc = std::min(kc_blk, k - pc);
        const float beta_eff = pc == 0 ? beta : 1.0f;
        pack_b_panels(pack_b, pb_all, jp0, jp1, n, nr_full, cfg.vw, pc, kc);
        for (int64_t i0 = 0; i0 < m; i0 += mc) {
          const int64_t mcur = std::min(mc, m - i0);
          for (int64_t jp = jp0; jp < jp1; ++jp) {
            const int64_t j0 = jp * nr_full;
            const int nr = int(std::min<int64_t>(nr_full, n - j0));
            const int nv = int(ceil_div(nr, cfg.vw));
            const float* pb = pb_all + (jp - jp0) * nr_full * kc;
            for (int64_t ir = i0; ir < i0 + mcur; ir += mr) {
              const int rows = int(std::min<int64_t>(mr, m - ir));
              cfg.kern[rows][nv](kc, pa + pc * m_pad + ir * kc, pb, c + ir * ldc + j0, ldc, nr,
                                 alpha, beta_eff);
            }
          }
        }
      }
    });
  }

  // Row blocks of mc (and chunks of panels), each k block of B packed once and shared.
  void row_blocks() const {
    const int64_t m_tiles = ceil_div(m, mr);
    int64_t m_blocks = ceil_div(m, cfg.mc);
    // Several row blocks per thread let the scheduler even out blocks of unequal size.
    if (parallel) m_blocks = std::max(m_blocks, std::min(m_tiles, int64_t(2) * threads));
    // Row block ib holds tiles [ib * m_tiles / m_blocks, (ib + 1) * m_tiles / m_blocks): the
    // blocks differ by one tile at most (512 rows as 10 + 9 + 9 + 9 tiles of 14, not 140 + 140 +
    // 140 + 92 rows, whose short block left a thread idle at every k block's join).
    auto block_start = [&](int64_t ib) { return std::min(m, ib * m_tiles / m_blocks * mr); };

    for (int64_t jc = 0; jc < n; jc += cfg.nc) {
      const int64_t nc = std::min(cfg.nc, n - jc);
      const int64_t panels = ceil_div(nc, nr_full);
      // Enough tasks to balance the threads (13 row blocks on 2 threads would leave one idle for
      // a twelfth of the time); splitting n makes each task re-pack its A block, so keep chunks
      // wide.
      int64_t n_chunks = 1;
      if (parallel) {
        const int64_t want = 8 * threads;
        if (m_blocks < want)
          n_chunks = std::min<int64_t>(ceil_div(want, m_blocks), std::max<int64_t>(1, panels / 4));
      }
      const int64_t chunk_panels = ceil_div(panels, n_chunks);
      n_chunks = ceil_div(panels, chunk_panels);
      const int64_t kc_max = std::min(kc_blk, k);
      ScratchLease b_lease(kScratchB, size_t(panels * nr_full * kc_max));
      float* pb_all = b_lease.get();
      // With several column chunks per row block, each chunk's task would pack its rows of A
      // again (4 times per k block for GPT-2's 512 x 768 x 50257 LM-head gradient, 14 % of its
      // time): then all of A is packed once per k block beside B, tile after tile, and shared.
      const bool share_a = n_chunks > 1;
      std::optional<ScratchLease> shared_a;
      if (share_a) shared_a.emplace(kScratchA, size_t(m_tiles * mr * kc_max));

      for (int64_t pc = 0; pc < k; pc += kc_blk) {
        const int64_t kc = std::min(kc_blk, k - pc);
        const float beta_eff = pc == 0 ? beta : 1.0f;
        const int64_t batch = panels_per_pack(nr_full);
        const int64_t b_jobs = ceil_div(panels, batch);
        const int64_t tiles_per_job = std::max<int64_t>(1, batch * nr_full / mr);
        const int64_t a_jobs = share_a ? ceil_div(m_tiles, tiles_per_job) : 0;
        for_each_index(parallel && (panels >= 8 || share_a), b_jobs + a_jobs, [&](int64_t i) {
          if (i < b_jobs) {
            const int64_t jp0 = i * batch;
            return pack_b_panels(PackShiftedB<PackB>{pack_b, jc}, pb_all + jp0 * nr_full * kc, jp0,
                                 std::min(panels, jp0 + batch), nc, nr_full, cfg.vw, pc, kc);
          }
          const int64_t t1 = std::min(m_tiles, (i - b_jobs + 1) * tiles_per_job);
          for (int64_t t = (i - b_jobs) * tiles_per_job; t < t1; ++t)
            pack_a(shared_a->get() + t * mr * kc, t * mr, int(std::min<int64_t>(mr, m - t * mr)),
                   pc, kc);
        });
        for_each_index(parallel, m_blocks * n_chunks, [&](int64_t task) {
          const int64_t ib = task / n_chunks, jb = task % n_chunks;
          const int64_t i0 = block_start(ib), mcur = block_start(ib + 1) - i0;
          if (mcur <= 0) return;
          std::optional<ScratchLease> a_lease;
          const float* pa = nullptr;
          if (share_a) {
            pa = shared_a->get() + i0 * kc;  // i0 starts a tile
          } else {
            a_lease.emplace(kScratchA, size_t(round_up(mcur, mr) * kc));
            for (int64_t ir = 0; ir < mcur; ir += mr) {
              const int rows = int(std::min<int64_t>(mr, mcur - ir));
              pack_a(a_lease->get() + ir * kc, i0 + ir, rows, pc, kc);
            }
            pa = a_lease->get();
          }
          const int64_t jp_end = std::min(panels, (jb + 1) * chunk_panels);
          for (int64_t jp = jb * chunk_panels; jp < jp_end; ++jp) {
            const int64_t j0 = jp * nr_full;
            const int nr = int(std::min<int64_t>(nr_full, nc - j0));
            const int nv = int(ceil_div(nr, cfg.vw));
            const float* pb = pb_all + jp * nr_full * kc;
            for (int64_t ir = 0; ir < mcur; ir += mr) {
              const int rows = int(std::min<int64_t>(mr, mcur - ir));
              cfg.kern[rows][nv](kc, pa + ir * kc, pb, c + (i0 + ir) * ldc + jc + j0, ldc, nr,
                                 alpha, beta_eff);
            }
          }
        });
      }
    }
  }
};

// The blocked GEMM. C (m x n, row stride ldc) = alpha * A B + beta * C where A and B are only
// seen through their packers:
//   pack_a(dst, i0, mr, p0, kc):     dst[p * mr + i] = A(i0 + i, p0 + p)
//   pack_b(dst, j0, nr, w, p0, kc):  dst[p * w + j]  = B(p0 + p, j0 + j), zero for nr <= j < w
// Tasks split m and n only; every C element sees the same kc blocks in the same order through
// the same micro-kernel shape whatever the split, so results do not depend on the thread count.
template <class PackA, class PackB>
void run_gemm(const GemmConfig& cfg, int64_t m, int64_t n, int64_t k, float alpha,
              const PackA& pack_a, const PackB& pack_b, float beta, float* c, int64_t ldc,
              bool allow_parallel = true) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    for (int64_t i = 0; i < m; ++i) {
      float* cr = c + i * ldc;
      if (beta == 0.0f)
        std::fill(cr, cr + n, 0.0f);
      else
        for (int64_t j = 0; j < n; ++j) cr[j] *= beta;
    }
    return;
  }
  const int mr = tile_rows(cfg, m), nr_full = cfg.nr();
  const int threads = allow_parallel ? available_threads() : 1;
  const bool parallel = threads > 1 && 2.0 * double(m) * double(n) * double(k) >= kParallelFlops;

  const int64_t kc_blk = block_depth(cfg, k);
  const GemmRun<PackA, PackB> run{cfg, m,   n,  k,       alpha,   pack_a,   pack_b, beta,
                                  c,   ldc, mr, nr_full, threads, parallel, kc_blk};
  if (parallel && n <= cfg.nc && k >= 8 * kc_blk && m <= cfg.mc) return run.deep_k();
  const int64_t k_blocks = ceil_div(k, kc_blk);
  if (m <= cfg.mc && k_blocks < 8) return run.one_row_block();
  // In parallel, with enough columns for every thread and a packed A of at most 4 MiB:
  // column_chunks. A bigger A, packed whole before any product and read from L3 by every chunk,
  // costs more than row_blocks' joins, which pack it k block by k block while it is hot: on 2
  // threads of a Zen 5, 512 x 768 x 3072 (6 MiB of A) ran 3-7 % faster in row_blocks on AVX2 and
  // AVX-512, 1024 x 1024 x 1536 6 %, 1024^3 (4 MiB) and 640 x 1536 x 2048 the same either way,
  // and products with up to 3 MiB of A (256 x 512 x 2048, 200 x 300 x 4000, 300 x 2048 x 1024)
  // 6-15 % faster in column_chunks.
  if (parallel && ceil_div(n, nr_full) >= 2 * threads && round_up(m, mr) * k <= kColumnChunkA)
    return run.column_chunks();
  run.row_blocks();
}

// C (m x n) = A B + beta C with A a row-major matrix (row stride lda) that the direct kernels
// read in place and B seen through pack_b: run_gemm's k blocks and micro-kernel arithmetic, so
// the same bits as run_gemm with PackRowMajorA. For a deep product with a narrow B (at most
// kDirectDeepB floats a k block) whose A would cost more to pack than to read: a 1x1
// convolution's weight gradient, where both operands are rows of pixels and packing A meant
// transposing it. Tasks take runs of row tiles through every k block, each packing all of B's
// panels per k block for itself and running every panel against each A tile in turn (the tile
// stays in L1, B in L2).
constexpr int64_t kDirectDeepB = int64_t(1) << 16;
template <class PackB>
void run_gemm_direct_a(const GemmConfig& cfg, int64_t m, int64_t n, int64_t k, const float* a,
                       int64_t lda, const PackB& pack_b, float beta, float* c, int64_t ldc,
                       bool allow_parallel) {
  if (m <= 0 || n <= 0) return;
  const int mr = tile_rows(cfg, m), nr_full = cfg.nr();
  const int64_t kc_blk = block_depth(cfg, k), tiles = ceil_div(m, mr);
  const int64_t panels = ceil_div(n, nr_full);
  const int threads = allow_parallel ? available_threads() : 1;
  const bool parallel = threads > 1 && 2.0 * double(m) * double(n) * double(k) >= kParallelFlops;
  const int64_t tasks = parallel ? std::min<int64_t>(tiles, 2 * threads) : 1;
  for_each_index(parallel, tasks, [&](int64_t task) {
    const int64_t t0 = task * tiles / tasks, t1 = (task + 1) * tiles / tasks;
    ScratchLease b_lease(kScratchB, size_t(panels * nr_full * std::min(kc_blk, k)));
    for (int64_t pc = 0; pc < k; pc += kc_blk) {
      const int64_t kc = std::min(kc_blk, k - pc);
      pack_b_panels(pack_b, b_lease.get(), 0, panels, n, nr_full, cfg.vw, pc, kc);
      for (int64_t t = t0; t < t1; ++t) {
        const int rows = int(std::min<int64_t>(mr, m - t * mr));
        for (int64_t jp = 0; jp < panels; ++jp) {
          const int64_t j0 = jp * nr_full;
          const int nr = int(std::min<int64_t>(nr_full, n - j0));
          const int nv = int(ceil_div(nr, cfg.vw));
          cfg.kern_direct[rows][nv](kc, a + t * mr * lda + pc, lda, b_lease.get() + j0 * kc,
                                    cfg.vw * nv, c + t * mr * ldc + j0, ldc, nr, 1.0f,
                                    pc == 0 ? beta : 1.0f);
        }
      }
    }
  });
}

// dst[p * dst_stride + i] = src[i * src_stride + p] for i < rows (<= kMaxTransposeRows),
// p < cols: the transposing copy behind row-major A and transposed B packing.
void transpose_rows(float* dst, int64_t width, const float* const* rows, int nrows, int64_t len);
constexpr int kMaxTransposeRows = 64;
inline void transpose_copy(float* dst, int64_t dst_stride, const float* src, int64_t src_stride,
                           int rows, int64_t cols) {
  const float* ptr[kMaxTransposeRows];
  for (int i = 0; i < rows; ++i) ptr[i] = src + i * src_stride;
  transpose_rows(dst, dst_stride, ptr, rows, cols);
}

// dst[p * W + j] = src[p * stride + j] for p < kc, j < W: fixed-size copies (a few vector moves,
// not a memcpy call per row), the rows 8 ahead prefetched. Rows a whole matrix row apart, often
// a page or more, are a stride the hardware prefetchers do not follow.
template <int W>
void copy_strided_rows(float* dst, const float* src, int64_t stride, int64_t kc) {
  for (int64_t p = 0; p < kc; ++p) {
    __builtin_prefetch(src + (p + 8) * stride);
    __builtin_prefetch(src + (p + 8) * stride + W - 1);
    std::memcpy(dst + p * W, src + p * stride, sizeof(float) * W);
  }
}

// Packers for plain strided matrices, shared by sgemm and conv.
struct PackRowMajorA {  // A(i, p) = a[i * lda + p]
  const float* a;
  int64_t lda;
  void operator()(float* dst, int64_t i0, int mr, int64_t p0, int64_t kc) const {
    transpose_copy(dst, mr, a + i0 * lda + p0, lda, mr, kc);
  }
};
struct PackColMajorA {  // A(i, p) = a[p * lda + i]
  const float* a;
  int64_t lda;
  void operator()(float* dst, int64_t i0, int mr, int64_t p0, int64_t kc) const {
    const float* src = a + p0 * lda + i0;
    // Tiles of up to 16 rows copy with a fixed size (a few vector moves, not a memcpy call per
    // row: 11 % of a 50257 x 768 x 512 tn product) and prefetch the rows ahead.
    if (copy_fixed(dst, src, mr, kc, std::make_integer_sequence<int, 16>{})) return;
    for (int64_t p = 0; p < kc; ++p)
      std::memcpy(dst + p * mr, src + p * lda, sizeof(float) * size_t(mr));
  }
  template <int... R>
  bool copy_fixed(float* dst, const float* src, int mr, int64_t kc,
                  std::integer_sequence<int, R...>) const {
    return ((mr == R + 1 && (copy_strided_rows<R + 1>(dst, src, lda, kc), true)) || ...);
  }
};
struct PackRowMajorB {  // B(p, j) = b[p * ldb + j]
  const float* b;
  int64_t ldb;
  void operator()(float* dst, int64_t j0, int nr, int w, int64_t p0, int64_t kc) const {
    const float* src = b + p0 * ldb + j0;
    // Full panels of the widths the ISAs use copy with a fixed size (a few vector moves, not a
    // memcpy call per row) and prefetch the rows ahead.
    if (nr == w && w == 32) return copy_strided_rows<32>(dst, src, ldb, kc);
    if (nr == w && w == 16) return copy_strided_rows<16>(dst, src, ldb, kc);
    for (int64_t p = 0; p < kc; ++p) {
      std::memcpy(dst + p * w, src + p * ldb, sizeof(float) * size_t(nr));
      for (int j = nr; j < w; ++j) dst[p * w + j] = 0.0f;
    }
  }
  // `count` whole panels of nr_full columns from column j0, row by row (see pack_b_panels).
  void pack_full_panels(float* dst, int64_t j0, int64_t count, int nr_full, int64_t p0,
                        int64_t kc) const {
    copy_panels_by_rows(dst, count, nr_full, kc,
                        [&](int64_t p) { return b + (p0 + p) * ldb + j0; });
  }
};
struct PackColMajorB {  // B(p, j) = b[j * ldb + p]
  const float* b;
  int64_t ldb;
  void operator()(float* dst, int64_t j0, int nr, int w, int64_t p0, int64_t kc) const {
    transpose_copy(dst, w, b + j0 * ldb + p0, ldb, nr, kc);
    for (int64_t p = 0; p < kc; ++p)
      for (int j = nr; j < w; ++j) dst[p * w + j] = 0.0f;
  }
};

// A packed once for every block of a product: an A operand shared by many products of one call
// (a convolution's weights, used by every image in run_wide_gemm) is packed once, not per image.
// Layout: kc block after kc block; inside one, row tile after row tile, each kc x rows.
struct PrepackedA {
  const float* data;
  int64_t m_pad, k, kc_full;  // m rounded up to the micro-tile rows; k; the config's kc
  const float* block(int64_t i0, int64_t pc) const {
    return data + pc * m_pad + i0 * std::min(kc_full, k - pc);
  }
};

template <class PackA>
PrepackedA prepack_a(const GemmConfig& cfg, int64_t m, int64_t k, const PackA& pack_a, float* buf) {
  const int mr = tile_rows(cfg, m);
  const int64_t m_pad = round_up(m, mr);
  const int64_t kc_blk = block_depth(cfg, k);
  // Tile by tile, in parallel once the operand is big (a layer's weights: 4 MiB for ResNet-50's
  // 512 -> 2048 convolution, which one thread packing alone left the other idle for).
  const int64_t tiles = m_pad / mr, k_blocks = ceil_div(k, kc_blk);
  const bool parallel = available_threads() > 1 && m * k >= (int64_t(1) << 16);
  for_each_index(parallel, tiles * k_blocks, [&](int64_t i) {
    const int64_t pc = (i / tiles) * kc_blk, i0 = (i % tiles) * mr, kc = std::min(kc_blk, k - pc);
    pack_a(buf + pc * m_pad + i0 * kc, i0, int(std::min<int64_t>(mr, m - i0)), pc, kc);
  });
  return PrepackedA{buf, m_pad, k, kc_blk};
}
inline size_t prepacked_a_size(const GemmConfig& cfg, int64_t m, int64_t k) {
  return size_t(round_up(m, tile_rows(cfg, m)) * k);
}

// dst[p * width + i] = rows[i][p] for i < nrows, p < len: the transposing copy behind every
// packer, whose rows need not be evenly strided (convolution taps). 4 x 4 SSE blocks (baseline
// on x86-64) run several times faster than the scalar loop, which packing-bound products feel.
#ifdef IPUML_CPU_X86
// out[k][j] = r[j][k]: the 8 x 8 matrix whose rows are r[0..7], transposed in registers.
__attribute__((target("avx2"), always_inline)) inline void transpose8x8_regs(const __m256* r,
                                                                             __m256* out) {
  __m256 t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Immediates spelled out: a computed one does not compile without optimisation.
  for (int k = 0; k < 4; ++k) {
    out[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
    out[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
  }
}

// The 8 x 8 block at column p of 8 rows, transposed: out[k][j] = rows[j][p + k].
__attribute__((target("avx2"), always_inline)) inline void transpose8x8_avx(
    const float* const* rows, int64_t p, __m256* out) {
  __m256 r[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(rows[k] + p);
  transpose8x8_regs(r, out);
}

// 8 x 8 blocks with AVX: a third fewer instructions per float than the SSE path. Returns the
// number of rows it did (a multiple of 8); the caller finishes the rest.
__attribute__((target("avx2"))) inline int transpose_rows_avx(float* dst, int64_t width,
                                                              const float* const* rows, int nrows,
                                                              int64_t len) {
  int i = 0;
  for (; i + 8 <= nrows; i += 8) {
    int64_t p = 0;
    for (; p + 8 <= len; p += 8) {
      __m256 out[8];
      transpose8x8_avx(rows + i, p, out);
      float* d = dst + p * width + i;
      for (int k = 0; k < 8; ++k) _mm256_storeu_ps(d + k * width, out[k]);
    }
    for (; p < len; ++p)
      for (int k = 0; k < 8; ++k) dst[p * width + i + k] = rows[i + k][p];
  }
  return i;
}

// The last 2-7 rows in the same 8 x 8 blocks: rows past the end repeat the last one, and only the
// first `nrows` floats of each transposed row are stored (4 + 2 + 1). The rest of a 6- or 14-row
// micro-tile (GEMM A packing) went 2 rows at a time through scalar copies: 6 % of a 512 x 768 x
// 50257 product on AVX2.
__attribute__((target("avx2"))) inline void transpose_tail_avx(float* dst, int64_t width,
                                                               const float* const* rows, int nrows,
                                                               int64_t len) {
  const float* src[8];
  for (int k = 0; k < 8; ++k) src[k] = rows[std::min(k, nrows - 1)];
  int64_t p = 0;
  for (; p + 8 <= len; p += 8) {
    __m256 out[8];
    transpose8x8_avx(src, p, out);
    for (int k = 0; k < 8; ++k) {
      const __m256 row = out[k];
      float* d = dst + (p + k) * width;
      __m128 part = _mm256_castps256_ps128(row);
      int left = nrows;
      if (left >= 4) {
        _mm_storeu_ps(d, part);
        part = _mm256_extractf128_ps(row, 1);
        d += 4, left -= 4;
      }
      if (left >= 2) {
        _mm_storel_pi(reinterpret_cast<__m64*>(d), part);
        part = _mm_movehl_ps(part, part);
        d += 2, left -= 2;
      }
      if (left) _mm_store_ss(d, part);
    }
  }
  for (; p < len; ++p)
    for (int k = 0; k < nrows; ++k) dst[p * width + k] = rows[k][p];
}
#endif

inline void transpose_rows(float* dst, int64_t width, const float* const* rows, int nrows,
                           int64_t len) {
  int i = 0;
#ifdef IPUML_CPU_X86
  if (active_isa() != Isa::generic) {
    if (nrows >= 8) i = transpose_rows_avx(dst, width, rows, nrows, len);
    if (nrows - i >= 2 && len >= 8)
      return transpose_tail_avx(dst + i, width, rows + i, nrows - i, len);
  }
  for (; i + 4 <= nrows; i += 4) {
    const float *s0 = rows[i], *s1 = rows[i + 1], *s2 = rows[i + 2], *s3 = rows[i + 3];
    int64_t p = 0;
    for (; p + 4 <= len; p += 4) {
      __m128 r0 = _mm_loadu_ps(s0 + p), r1 = _mm_loadu_ps(s1 + p);
      __m128 r2 = _mm_loadu_ps(s2 + p), r3 = _mm_loadu_ps(s3 + p);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      float* d = dst + p * width + i;
      _mm_storeu_ps(d, r0);
      _mm_storeu_ps(d + width, r1);
      _mm_storeu_ps(d + 2 * width, r2);
      _mm_storeu_ps(d + 3 * width, r3);
    }
    for (; p < len; ++p) {
      float* d = dst + p * width + i;
      d[0] = s0[p], d[1] = s1[p], d[2] = s2[p], d[3] = s3[p];
    }
  }
#endif
  for (; i < nrows; ++i)
    for (int64_t p = 0; p < len; ++p) dst[p * width + i] = rows[i][p];
}

#if defined(IPUML_COMPILED_LIB)
// The library compiles sgemm's four products once (src/lib/cpu_gemm.cpp); a unit that runs one of
// them links to it instead of instantiating every ISA's micro-kernels again (the GEMM's own test:
// 90 s less CPU under the sanitizers).
#define IPUML_RUN_GEMM(PackA, PackB)                                                             \
  void run_gemm<PackA, PackB>(const GemmConfig&, int64_t, int64_t, int64_t, float, const PackA&, \
                              const PackB&, float, float*, int64_t, bool)
extern template IPUML_RUN_GEMM(PackRowMajorA, PackRowMajorB);
extern template IPUML_RUN_GEMM(PackRowMajorA, PackColMajorB);
extern template IPUML_RUN_GEMM(PackColMajorA, PackRowMajorB);
extern template IPUML_RUN_GEMM(PackColMajorA, PackColMajorB);
#endif

}  // namespace ipuml::cpu::detail
