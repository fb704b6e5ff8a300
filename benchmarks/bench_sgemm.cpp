// Throughput of ipuml::cpu::sgemm on square sizes and on the model zoo's shapes.
// Usage: bench_sgemm [--threads T] [--isa avx512|avx2|generic] [--seconds S] [n | MxNxK ...]
// (no sizes: the square sizes 64-2048 and the zoo's shapes)
#include <ipuml/backends/cpu/gemm.hpp>

#include <tbb/global_control.h>

#include <array>
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

// Repeats the product for at least `seconds` after one warm-up call; returns GFLOP/s.
double time_sgemm(int64_t m, int64_t n, int64_t k, double seconds) {
  std::vector<float> a(size_t(m * k)), b(size_t(k * n)), c(size_t(m * n));
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);
  auto run = [&] {
    ipuml::cpu::sgemm(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
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
  return 2.0 * double(m) * double(n) * double(k) * reps / (t - t0) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  double seconds = 1.0;
  std::vector<std::array<int64_t, 3>> shapes;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--isa") == 0 && i + 1 < argc) {
      ipuml::cpu::set_gemm_isa(argv[++i]);
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      long long m = 0, n = 0, k = 0;
      if (std::sscanf(argv[i], "%lldx%lldx%lld", &m, &n, &k) == 3)
        shapes.push_back({m, n, k});
      else
        shapes.push_back({std::atoll(argv[i]), 0, 0});  // square
    }
  }
  if (threads < 1) threads = 1;
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
  if (shapes.empty())
    shapes = {{64, 0, 0},     {256, 0, 0},     {1024, 0, 0},     {2048, 0, 0},
              {8, 128, 1600}, {64, 128, 1600}, {128, 3072, 768}, {512, 768, 3072}};
  std::printf("# isa=%s\n", ipuml::cpu::gemm_isa_name());
  for (const auto& s : shapes) {
    if (s[1] == 0) {
      std::printf("ipuml sgemm n=%lld threads=%d gflops=%.1f\n", static_cast<long long>(s[0]),
                  threads, time_sgemm(s[0], s[0], s[0], seconds));
    } else {
      std::printf("ipuml sgemm m=%lld n=%lld k=%lld threads=%d gflops=%.1f\n",
                  static_cast<long long>(s[0]), static_cast<long long>(s[1]),
                  static_cast<long long>(s[2]), threads, time_sgemm(s[0], s[1], s[2], seconds));
    }
  }
  return 0;
}
