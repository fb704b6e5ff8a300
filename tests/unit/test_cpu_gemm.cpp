// Tests of the CPU SGEMM kernels against the naive reference, on every ISA path the CPU has,
// and of their determinism across thread counts.
#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/gemm_kernels.hpp>
#include <ipuml/core/error.hpp>

#include <catch2/catch.hpp>

#include "../support/cpu_isa.hpp"
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using ipuml::testing::IsaGuard;
using ipuml::testing::random_floats;
using ipuml::testing::supported_isas;

using ipuml::cpu::Isa;

struct Case {
  bool ta, tb;
  int64_t m, n, k;
  float alpha, beta;
  int64_t pad;  // extra row stride on every matrix
};

// Runs one case through sgemm and the reference; returns the worst error over the tolerance.
double check_case(const Case& cs, std::mt19937& rng) {
  const int64_t a_rows = cs.ta ? cs.k : cs.m, a_cols = cs.ta ? cs.m : cs.k;
  const int64_t b_rows = cs.tb ? cs.n : cs.k, b_cols = cs.tb ? cs.k : cs.n;
  const int64_t lda = a_cols + cs.pad, ldb = b_cols + cs.pad, ldc = cs.n + cs.pad;
  auto a = random_floats(size_t(a_rows * lda), rng);
  auto b = random_floats(size_t(b_rows * ldb), rng);
  auto c = random_floats(size_t(cs.m * ldc), rng);
  // With beta == 0, C may hold garbage that must not reach the result.
  if (cs.beta == 0.0f)
    for (auto& x : c) x = std::numeric_limits<float>::quiet_NaN();
  auto ref = c;
  ipuml::cpu::sgemm(cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, a.data(), lda, b.data(), ldb, cs.beta,
                    c.data(), ldc);
  ipuml::cpu::sgemm_reference(cs.ta, cs.tb, cs.m, cs.n, cs.k, cs.alpha, a.data(), lda, b.data(),
                              ldb, cs.beta, ref.data(), ldc);
  const double tol =
      1e-6 * (4.0 + std::sqrt(double(cs.k))) * (std::abs(cs.alpha) + std::abs(cs.beta));
  double worst = 0.0;
  for (int64_t i = 0; i < cs.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[size_t(i * ldc + j)], want = ref[size_t(i * ldc + j)];
      if (j >= cs.n) {
        // Padding columns must be left alone (NaN stays NaN).
        if (!(std::isnan(got) && std::isnan(want)) && got != want) return 1e30;
        continue;
      }
      if (!std::isfinite(got)) return 1e30;
      const double err = std::abs(double(got) - double(want)) / (tol * (1.0 + std::abs(want)));
      worst = std::max(worst, err);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("sgemm matches the reference on every ISA, transpose and odd shape", "[gemm]") {
  IsaGuard guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  ipuml::cpu::set_gemm_isa(isa);
  INFO("isa=" << ipuml::cpu::gemm_isa_name());
  std::mt19937 rng(1234);
  const int64_t dims[] = {1, 2, 3, 5, 7, 13, 14, 15, 16, 17, 29, 31, 32, 33, 47, 64, 97, 129};
  std::uniform_int_distribution<size_t> pick(0, std::size(dims) - 1);
  const float alphas[] = {1.0f, -0.5f, 2.5f};
  const float betas[] = {0.0f, 1.0f, 0.3f};
  std::vector<Case> cases;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      for (int r = 0; r < 24; ++r)
        cases.push_back({ta == 1, tb == 1, dims[pick(rng)], dims[pick(rng)], dims[pick(rng)],
                         alphas[r % 3], betas[(r / 3) % 3], int64_t(r % 2 ? 3 : 0)});
      // Several kc blocks, several row blocks, wide n, vectors.
      cases.push_back({ta == 1, tb == 1, 301, 517, 601, 1.0f, 0.0f, 0});
      cases.push_back({ta == 1, tb == 1, 1, 1000, 300, 1.5f, 1.0f, 1});
      cases.push_back({ta == 1, tb == 1, 700, 1, 257, 1.0f, 0.5f, 0});
      cases.push_back({ta == 1, tb == 1, 37, 45, 1, -1.0f, 0.0f, 2});
      cases.push_back({ta == 1, tb == 1, 8, 128, 1600, 1.0f, 0.0f, 0});
      cases.push_back({ta == 1, tb == 1, 40, 70, 3000, 1.0f, 0.5f, 0});  // deep k
    }
  for (const Case& cs : cases) {
    INFO("ta=" << cs.ta << " tb=" << cs.tb << " m=" << cs.m << " n=" << cs.n << " k=" << cs.k
               << " alpha=" << cs.alpha << " beta=" << cs.beta << " pad=" << cs.pad);
    CHECK(check_case(cs, rng) <= 1.0);
  }
}

TEST_CASE("sgemm handles empty sizes, k = 0 and alpha = 0", "[gemm]") {
  std::vector<float> a(16, 1.0f), b(16, 1.0f), c(16, std::numeric_limits<float>::quiet_NaN());
  ipuml::cpu::sgemm(false, false, 0, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4);
  CHECK(std::isnan(c[0]));
  ipuml::cpu::sgemm(false, false, 4, 4, 0, 1.0f, a.data(), 1, b.data(), 4, 0.0f, c.data(), 4);
  for (float x : c) CHECK(x == 0.0f);
  std::fill(c.begin(), c.end(), 2.0f);
  ipuml::cpu::sgemm(false, false, 4, 4, 4, 0.0f, a.data(), 4, b.data(), 4, 0.5f, c.data(), 4);
  for (float x : c) CHECK(x == 1.0f);
}

TEST_CASE("sgemm rejects bad arguments with ipuml::Error", "[gemm]") {
  std::vector<float> a(16), b(16), c(16);
  CHECK_THROWS_AS(
      ipuml::cpu::sgemm(false, false, -1, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4),
      ipuml::Error);
  CHECK_THROWS_AS(
      ipuml::cpu::sgemm(false, false, 4, 4, 4, 1.0f, a.data(), 3, b.data(), 4, 0.0f, c.data(), 4),
      ipuml::Error);
  CHECK_THROWS_AS(
      ipuml::cpu::sgemm(false, true, 4, 4, 5, 1.0f, a.data(), 5, b.data(), 4, 0.0f, c.data(), 4),
      ipuml::Error);
  CHECK_THROWS_AS(ipuml::cpu::set_gemm_isa("sse9"), ipuml::Error);
}

TEST_CASE("IPUML_CPU_ISA selects the path and rejects unknown names", "[gemm]") {
  const char* old = std::getenv("IPUML_CPU_ISA");
  const std::string saved = old ? old : "";
  setenv("IPUML_CPU_ISA", "generic", 1);
  CHECK(ipuml::cpu::isa_from_environment() == Isa::generic);
  setenv("IPUML_CPU_ISA", "avx512", 1);
  CHECK(static_cast<int>(ipuml::cpu::isa_from_environment()) <=
        static_cast<int>(ipuml::cpu::detected_isa()));
  setenv("IPUML_CPU_ISA", "neon", 1);
  CHECK_THROWS_AS(ipuml::cpu::isa_from_environment(), ipuml::Error);
  if (old)
    setenv("IPUML_CPU_ISA", saved.c_str(), 1);
  else
    unsetenv("IPUML_CPU_ISA");
  const bool default_is_best =
      old != nullptr || ipuml::cpu::isa_from_environment() == ipuml::cpu::detected_isa();
  CHECK(default_is_best);
}

TEST_CASE("sgemm gives the same bits with 1 and 2 threads", "[gemm]") {
  IsaGuard guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  ipuml::cpu::set_gemm_isa(isa);
  std::mt19937 rng(99);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{333, 290, 700},
                         {8, 128, 1600},
                         {1200, 40, 300},
                         {50, 5000, 64},
                         {45, 300, 4000}}) {  // deep k under a small C: tasks own C pieces
    auto a = random_floats(size_t(m * k), rng), b = random_floats(size_t(k * n), rng);
    std::vector<float> c1(size_t(m * n)), c2(size_t(m * n));
    {
      tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
      ipuml::cpu::sgemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c1.data(), n);
    }
    {
      tbb::global_control two(tbb::global_control::max_allowed_parallelism, 2);
      ipuml::cpu::sgemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c2.data(), n);
    }
    INFO("m=" << m << " n=" << n << " k=" << k);
    CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("the GEMM's row and column blocks fit the caches and never change the bits", "[gemm]") {
  using ipuml::cpu::CacheSizes;
  using ipuml::cpu::detail::fit_to_caches;
  using ipuml::cpu::detail::GemmConfig;
  const GemmConfig avx2{6, 8, 2, 384, 144, 4096, {}, {}, {}};
  // The machines the constants were tuned on keep them (Xeon 48K / 2M / 480M; EPYC Zen 3 32K /
  // 512K / 32M), as do unknown sizes.
  for (const CacheSizes c :
       {CacheSizes{49152, 2097152, 503316480}, CacheSizes{32768, 524288, 33554432}, CacheSizes{}}) {
    const GemmConfig f = fit_to_caches(avx2, c);
    CHECK(f.mc == 144);
    CHECK(f.nc == 4096);
    CHECK(f.kc == 384);
  }
  // A 256 KiB L2 and 6 MiB L3: A blocks of half of L2 (85 rows of 1536 bytes, down to whole
  // 6-row tiles), B blocks of half of L3 (2048 columns, whole 16-column panels); kc unchanged.
  const GemmConfig small = fit_to_caches(avx2, CacheSizes{32768, 262144, 6291456});
  CHECK(small.mc == 84);
  CHECK(small.nc == 2048);
  CHECK(small.kc == 384);
  // Never under two tiles of rows or four panels of columns.
  const GemmConfig tiny = fit_to_caches(avx2, CacheSizes{0, 4096, 4096});
  CHECK(tiny.mc == 12);
  CHECK(tiny.nc == 64);

  IsaGuard guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  ipuml::cpu::set_gemm_isa(isa);
  const GemmConfig& base = ipuml::cpu::detail::config_for(isa);
  const GemmConfig fitted = fit_to_caches(base, CacheSizes{0, 64 * 1024, 1 << 20});
  REQUIRE(fitted.mc < base.mc);
  REQUIRE(fitted.nc < base.nc);
  std::mt19937 rng(3);
  for (auto [m, n, k] :
       {std::tuple<int64_t, int64_t, int64_t>{333, 290, 700}, {700, 2500, 64}, {50, 5000, 1200}}) {
    auto a = random_floats(size_t(m * k), rng), b = random_floats(size_t(k * n), rng);
    std::vector<float> c1(size_t(m * n)), c2(size_t(m * n));
    const ipuml::cpu::detail::PackRowMajorA pa{a.data(), k};
    const ipuml::cpu::detail::PackRowMajorB pb{b.data(), n};
    ipuml::cpu::detail::run_gemm(base, m, n, k, 1.0f, pa, pb, 0.0f, c1.data(), n);
    ipuml::cpu::detail::run_gemm(fitted, m, n, k, 1.0f, pa, pb, 0.0f, c2.data(), n);
    INFO("isa=" << ipuml::cpu::isa_name(isa) << " m=" << m << " n=" << n << " k=" << k);
    CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)) == 0);
  }
}

// A product of one or two row tiles reads a row-major B in place, a taller one packs it first:
// each C row's bits must not depend on which, nor on the rows that come with it.
TEST_CASE("sgemm rows have the same bits alone as inside a taller product", "[gemm]") {
  IsaGuard guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  ipuml::cpu::set_gemm_isa(isa);
  std::mt19937 rng(7);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{128, 1600}, {100, 77}, {768, 3072}, {64, 9}}) {
    const int64_t tall = 64;
    auto a = random_floats(size_t(tall * k), rng), b = random_floats(size_t(k * n), rng);
    auto c0 = random_floats(size_t(tall * n), rng);
    for (float beta : {0.0f, 0.5f}) {
      std::vector<float> big = c0;
      ipuml::cpu::sgemm(false, false, tall, n, k, 1.5f, a.data(), k, b.data(), n, beta, big.data(),
                        n);
      for (int64_t m : {1, 3, 8, 12}) {
        std::vector<float> small(c0.begin(), c0.begin() + m * n);
        ipuml::cpu::sgemm(false, false, m, n, k, 1.5f, a.data(), k, b.data(), n, beta, small.data(),
                          n);
        INFO("isa=" << ipuml::cpu::isa_name(isa) << " m=" << m << " n=" << n << " k=" << k
                    << " beta=" << beta);
        CHECK(std::memcmp(small.data(), big.data(), small.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("sgemm gives the same bits on 1, 2 and 16 threads at the transformers' 512-row shapes",
          "[gemm][slow]") {
  // In parallel, 512-row products run column_chunks (row_blocks on 1 thread); 2100 x 600 x 2100,
  // whose packed A would pass 8 MiB, row_blocks; 16 threads oversubscribe a 2-core machine.
  IsaGuard guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  ipuml::cpu::set_gemm_isa(isa);
  struct Shape {
    bool ta, tb;
    int64_t m, n, k;
  };
  std::vector<Shape> shapes{{false, false, 300, 600, 1000}};
  if (isa != Isa::generic)  // (the portable kernel is too slow for the full shapes)
    shapes.insert(shapes.end(), {{false, false, 512, 3072, 768},
                                 {false, false, 512, 768, 3072},
                                 {false, false, 512, 2304, 768},
                                 {false, true, 512, 768, 3072},
                                 {true, false, 768, 3072, 512},
                                 {false, false, 2100, 600, 2100}});
  std::mt19937 rng(512);
  for (const Shape& s : shapes) {
    const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    auto a = random_floats(size_t(s.m * s.k), rng), b = random_floats(size_t(s.k * s.n), rng);
    const auto c0 = random_floats(size_t(s.m * s.n), rng);
    for (float beta : {0.0f, 0.5f}) {
      std::vector<std::vector<float>> out;
      for (int threads : {1, 2, 16}) {
        tbb::global_control cap(tbb::global_control::max_allowed_parallelism, size_t(threads));
        tbb::task_arena arena(threads);
        auto c = c0;
        arena.execute([&] {
          ipuml::cpu::sgemm(s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(), ldb, beta,
                            c.data(), s.n);
        });
        out.push_back(std::move(c));
      }
      INFO(ipuml::cpu::isa_name(isa) << " m=" << s.m << " n=" << s.n << " k=" << s.k
                                     << " ta=" << s.ta << " tb=" << s.tb << " beta=" << beta);
      CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
      CHECK(std::memcmp(out[0].data(), out[2].data(), out[0].size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("sgemm_batched matches per-matrix products, with broadcast operands", "[gemm]") {
  std::mt19937 rng(7);
  const int64_t batch = 5, m = 19, n = 23, k = 31;
  auto a = random_floats(size_t(batch * m * k), rng), b = random_floats(size_t(k * n), rng);
  std::vector<float> c(size_t(batch * m * n), std::numeric_limits<float>::quiet_NaN());
  // B broadcast (stride 0), A transposed and strided.
  ipuml::cpu::sgemm_batched(true, false, batch, m, n, k, 2.0f, a.data(), m, m * k, b.data(), n, 0,
                            0.0f, c.data(), n, m * n);
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<float> ref(size_t(m * n));
    ipuml::cpu::sgemm_reference(true, false, m, n, k, 2.0f, a.data() + i * m * k, m, b.data(), n,
                                0.0f, ref.data(), n);
    for (int64_t j = 0; j < m * n; ++j)
      CHECK(c[size_t(i * m * n + j)] == Approx(ref[size_t(j)]).margin(1e-4));
  }
  // Shared C: the products accumulate one after another.
  std::vector<float> acc(size_t(m * n), 0.0f), ref(size_t(m * n), 0.0f);
  ipuml::cpu::sgemm_batched(true, false, batch, m, n, k, 1.0f, a.data(), m, m * k, b.data(), n, 0,
                            1.0f, acc.data(), n, 0);
  for (int64_t i = 0; i < batch; ++i)
    ipuml::cpu::sgemm_reference(true, false, m, n, k, 1.0f, a.data() + i * m * k, m, b.data(), n,
                                1.0f, ref.data(), n);
  for (int64_t j = 0; j < m * n; ++j) CHECK(acc[size_t(j)] == Approx(ref[size_t(j)]).margin(1e-4));
  // Many small products go parallel across the batch: still the same bits as one thread.
  const int64_t big_batch = 64, s = 24;
  auto x = random_floats(size_t(big_batch * s * s), rng),
       y = random_floats(size_t(big_batch * s * s), rng);
  std::vector<float> z1(x.size()), z2(x.size());
  {
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    ipuml::cpu::sgemm_batched(false, false, big_batch, s, s, s, 1.0f, x.data(), s, s * s, y.data(),
                              s, s * s, 0.0f, z1.data(), s, s * s);
  }
  {
    tbb::global_control two(tbb::global_control::max_allowed_parallelism, 2);
    ipuml::cpu::sgemm_batched(false, false, big_batch, s, s, s, 1.0f, x.data(), s, s * s, y.data(),
                              s, s * s, 0.0f, z2.data(), s, s * s);
  }
  CHECK(std::memcmp(z1.data(), z2.data(), z1.size() * sizeof(float)) == 0);
}

// Small products with a row-major A broadcast it straight from the matrix (kern_direct, no packed
// panel): the bits must be those of the packed path (the same config without its direct
// kernels), and of the same product through a transposed copy of A (always packed), with B
// row-major (read in place or packed) or transposed, odd sizes, tails, padded strides, 1 and 2
// threads.
TEST_CASE("sgemm with A read in place gives the bits of the packed A", "[gemm]") {
  IsaGuard guard;
  const Isa isa = GENERATE(from_range(supported_isas()));
  ipuml::cpu::set_gemm_isa(isa);
  using ipuml::cpu::detail::GemmConfig;
  const GemmConfig& cfg = ipuml::cpu::detail::config_for(isa);
  GemmConfig packed = cfg;
  for (auto& row : packed.kern_direct)
    for (auto& kern : row) kern = nullptr;
  struct Shape {
    int64_t m, n, k, pad;
  };
  std::mt19937 rng(2024);
  for (const Shape s : {Shape{64, 64, 64, 0}, Shape{64, 128, 1600, 0}, Shape{6, 128, 1600, 0},
                        Shape{12, 128, 1600, 3}, Shape{8, 128, 1600, 0}, Shape{1, 16, 7, 0},
                        Shape{5, 17, 9, 2}, Shape{13, 100, 385, 1}, Shape{37, 33, 77, 5},
                        Shape{64, 15, 800, 0}, Shape{32, 32, 32, 0}, Shape{100, 96, 1000, 7}}) {
    const int64_t lda = s.k + s.pad, ldb = s.n + s.pad, ldc = s.n + s.pad, ldbt = s.k + s.pad;
    auto a = random_floats(size_t(s.m * lda), rng), b = random_floats(size_t(s.k * ldb), rng);
    std::vector<float> at(size_t(s.k * s.m)), bt(size_t(s.n * ldbt));
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t p = 0; p < s.k; ++p) at[size_t(p * s.m + i)] = a[size_t(i * lda + p)];
    for (int64_t p = 0; p < s.k; ++p)
      for (int64_t j = 0; j < s.n; ++j) bt[size_t(j * ldbt + p)] = b[size_t(p * ldb + j)];
    const auto c0 = random_floats(size_t(s.m * ldc), rng);
    for (float beta : {0.0f, 0.5f})
      for (int threads : {1, 2}) {
        tbb::global_control cap(tbb::global_control::max_allowed_parallelism, size_t(threads));
        const ipuml::cpu::detail::PackRowMajorA pa{a.data(), lda};
        auto direct = c0, plain = c0, direct_t = c0, plain_t = c0, via_at = c0;
        ipuml::cpu::detail::run_gemm(cfg, s.m, s.n, s.k, 1.5f, pa,
                                     ipuml::cpu::detail::PackRowMajorB{b.data(), ldb}, beta,
                                     direct.data(), ldc);
        ipuml::cpu::detail::run_gemm(packed, s.m, s.n, s.k, 1.5f, pa,
                                     ipuml::cpu::detail::PackRowMajorB{b.data(), ldb}, beta,
                                     plain.data(), ldc);
        ipuml::cpu::detail::run_gemm(cfg, s.m, s.n, s.k, 1.5f, pa,
                                     ipuml::cpu::detail::PackColMajorB{bt.data(), ldbt}, beta,
                                     direct_t.data(), ldc);
        ipuml::cpu::detail::run_gemm(packed, s.m, s.n, s.k, 1.5f, pa,
                                     ipuml::cpu::detail::PackColMajorB{bt.data(), ldbt}, beta,
                                     plain_t.data(), ldc);
        ipuml::cpu::sgemm(true, false, s.m, s.n, s.k, 1.5f, at.data(), s.m, b.data(), ldb, beta,
                          via_at.data(), ldc);
        INFO("isa=" << ipuml::cpu::isa_name(isa) << " m=" << s.m << " n=" << s.n << " k=" << s.k
                    << " pad=" << s.pad << " beta=" << beta << " threads=" << threads);
        const size_t bytes = direct.size() * sizeof(float);
        CHECK(std::memcmp(direct.data(), plain.data(), bytes) == 0);
        CHECK(std::memcmp(direct_t.data(), plain_t.data(), bytes) == 0);
        CHECK(std::memcmp(direct.data(), direct_t.data(), bytes) == 0);
        CHECK(std::memcmp(direct.data(), via_at.data(), bytes) == 0);
      }
  }
}
