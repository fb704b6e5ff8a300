// Throughput of ipuml::cpu::sgemm on square sizes and on the model zoo's shapes.
// Usage: bench_sgemm [--threads T] [--isa avx512|avx2|generic] [--seconds S] [n | SHAPE ...]
// SHAPE is [B*]MxNxK[:ab]: C[m,n] = op(A)[m,k] op(B)[k,n], `a`/`b` each n (as stored) or t
// (transposed: a backward pass's dX = dY W^T is :nt, dW = X^T dY is :tn), B independent
// products of that shape (sgemm_batched; attention's per-head products).
// (no sizes: the square sizes 64-2048 and the zoo's shapes)
#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/backends/cpu/gemm.hpp>

#include <tbb/global_control.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;  // n == 0: square m
  bool ta = false, tb = false;
};

// Repeats the product for at least `seconds` after one warm-up call; returns GFLOP/s.
double time_sgemm(const GemmShape& s, double seconds) {
  const int64_t m = s.m, n = s.n, k = s.k, batch = s.batch;
  std::vector<float> a(size_t(batch * m * k)), b(size_t(batch * k * n)), c(size_t(batch * m * n));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);
  const int64_t lda = s.ta ? m : k, ldb = s.tb ? k : n;
  auto run = [&] {
    if (batch == 1)
      ipuml::cpu::sgemm(s.ta, s.tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), n);
    else
      ipuml::cpu::sgemm_batched(s.ta, s.tb, batch, m, n, k, 1.0f, a.data(), lda, m * k, b.data(),
                                ldb, k * n, 0.0f, c.data(), n, m * n);
  };
  run();
  int reps = 0;
  const double t0 = now();
  double t = t0;
  do {
    run();
    ++reps;
    t = now();
  } while (t - t0 < seconds);
  return 2.0 * double(batch) * double(m) * double(n) * double(k) * reps / (t - t0) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double seconds = 1.0;
  std::vector<GemmShape> shapes;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      ipuml::cpu::set_gemm_isa(argv[++i]);
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      GemmShape s;
      const char* spec = argv[i];
      if (const char* star = std::strchr(spec, '*')) {
        s.batch = std::atoll(spec);
        spec = star + 1;
      }
      long long m = 0, n = 0, k = 0;
      char a = 'n', b = 'n';
      int used = 0;
      const int got =
          std::sscanf(spec, "%lldx%lldx%lld%n:%c%c%n", &m, &n, &k, &used, &a, &b, &used);
      long long side = 0;
      int side_used = 0;
      const bool square =
          std::sscanf(spec, "%lld%n", &side, &side_used) == 1 && spec[side_used] == '\0';
      const bool ok = square ? side > 0 && s.batch == 1
                             : (got == 3 || got == 5) && spec[used] == '\0' && m > 0 && n > 0 &&
                                   k > 0 && s.batch > 0 && (a == 'n' || a == 't') &&
                                   (b == 'n' || b == 't');
      if (!ok) {
        std::fprintf(stderr, "bench_sgemm: expected n or [B*]MxNxK[:ab] (a, b: n or t), got '%s'\n",
                     argv[i]);
        return 2;
      }
      if (square) {
        s.m = side;
      } else {
        s.m = m, s.n = n, s.k = k, s.ta = a == 't', s.tb = b == 't';
      }
      shapes.push_back(s);
    }
  }
  if (threads < 1) threads = 1;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
  if (shapes.empty())
    shapes = {{1, 64, 0, 0},     {1, 256, 0, 0},     {1, 1024, 0, 0},     {1, 2048, 0, 0},
              {1, 8, 128, 1600}, {1, 64, 128, 1600}, {1, 128, 3072, 768}, {1, 512, 768, 3072}};
  const auto caches = ipuml::cpu::detected_caches();
  const auto blocking = ipuml::cpu::gemm_blocking();
  std::printf("# isa=%s caches l1d=%lldK l2=%lldK l3=%lldK tile=%dx%d kc=%lld mc=%lld nc=%lld\n",
              ipuml::cpu::gemm_isa_name(), static_cast<long long>(caches.l1d >> 10),
              static_cast<long long>(caches.l2 >> 10), static_cast<long long>(caches.l3 >> 10),
              blocking.mr, blocking.nr, static_cast<long long>(blocking.kc),
              static_cast<long long>(blocking.mc), static_cast<long long>(blocking.nc));
  for (auto s : shapes) {
    if (s.n == 0) {
      s.n = s.k = s.m;
      std::printf("ipuml sgemm n=%lld threads=%d gflops=%.1f\n", static_cast<long long>(s.m),
                  threads, time_sgemm(s, seconds));
      continue;
    }
    std::string extra;
    if (s.ta || s.tb) extra += std::string(" op=") + (s.ta ? 't' : 'n') + (s.tb ? 't' : 'n');
    if (s.batch > 1) extra += " batch=" + std::to_string(s.batch);
    std::printf("ipuml sgemm m=%lld n=%lld k=%lld%s threads=%d gflops=%.1f\n",
                static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k), extra.c_str(), threads, time_sgemm(s, seconds));
  }
  return 0;
}
