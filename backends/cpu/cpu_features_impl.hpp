// Bodies of the ISA detection and selection declared in cpu_features.hpp.
// Header-only mode includes this from cpu_features.hpp; compiled mode compiles it in src/lib.
#pragma once

#include <ipuml/backends/cpu/cpu_features.hpp>
#include <ipuml/core/error.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

namespace ipuml::cpu {

namespace detail {

IPUML_INLINE bool isa_from_name(const char* name, Isa& out) {
  if (std::strcmp(name, "avx512") == 0) return out = Isa::avx512, true;
  if (std::strcmp(name, "avx2") == 0) return out = Isa::avx2, true;
  if (std::strcmp(name, "generic") == 0) return out = Isa::generic, true;
  return false;
}

}  // namespace detail

IPUML_INLINE Isa isa_from_environment() {
  Isa best = detected_isa();
  const char* env = std::getenv("IPUML_CPU_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa wanted{};
  IPUML_CHECK(detail::isa_from_name(env, wanted), "IPUML_CPU_ISA: unknown instruction set '", env,
              "', expected avx512, avx2 or generic");
  return static_cast<int>(wanted) <= static_cast<int>(best) ? wanted : best;
}

namespace detail {

// -1 until first use, so that reading the environment happens lazily and exactly once.
IPUML_INLINE std::atomic<int>& isa_state() {
  static std::atomic<int> state{-1};
  return state;
}

}  // namespace detail

IPUML_INLINE Isa detected_isa() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  static const Isa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
    return Isa::generic;
  }();
  return best;
#else
  return Isa::generic;
#endif
}

IPUML_INLINE CacheSizes detected_caches() {
  static const CacheSizes sizes = [] {
    CacheSizes c;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE) && \
    defined(_SC_LEVEL3_CACHE_SIZE)
    auto get = [](int name) {
      const long v = sysconf(name);
      return v > 0 ? static_cast<int64_t>(v) : int64_t{0};
    };
    c.l1d = get(_SC_LEVEL1_DCACHE_SIZE);
    c.l2 = get(_SC_LEVEL2_CACHE_SIZE);
    c.l3 = get(_SC_LEVEL3_CACHE_SIZE);
#endif
    return c;
  }();
  return sizes;
}

IPUML_INLINE Isa active_isa() {
  int v = detail::isa_state().load(std::memory_order_relaxed);
  if (v < 0) {
    v = static_cast<int>(isa_from_environment());
    int expected = -1;
    // A concurrent set_gemm_isa wins over the lazily computed default.
    if (!detail::isa_state().compare_exchange_strong(expected, v)) v = expected;
  }
  return static_cast<Isa>(v);
}

IPUML_INLINE void set_gemm_isa(Isa isa) {
  IPUML_CHECK(static_cast<int>(isa) <= static_cast<int>(detected_isa()),
              "set_gemm_isa: this CPU cannot run '", isa_name(isa), "' (best supported: '",
              isa_name(detected_isa()), "')");
  detail::isa_state().store(static_cast<int>(isa));
}

IPUML_INLINE void set_gemm_isa(const char* name) {
  Isa isa{};
  IPUML_CHECK(name != nullptr && detail::isa_from_name(name, isa),
              "set_gemm_isa: unknown instruction set '", name ? name : "(null)",
              "', expected avx512, avx2 or generic");
  set_gemm_isa(isa);
}

IPUML_INLINE const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    case Isa::generic:
      return "generic";
  }
  return "generic";
}

IPUML_INLINE const char* gemm_isa_name() { return isa_name(active_isa()); }

}  // namespace ipuml::cpu
