// Run-time choice of the SIMD instruction set used by the CPU GEMM and convolution kernels.
// One binary carries AVX-512, AVX2+FMA and portable paths; the best the CPU supports is used.
#pragma once

#include <ipuml/core/config.hpp>

#include <cstdint>

namespace ipuml::cpu {

enum class Isa { generic = 0, avx2 = 1, avx512 = 2 };

// The best instruction set this CPU (and OS) supports.
Isa detected_isa();

// The instruction set the kernels use now. On first use it is the detected one, unless the
// environment variable IPUML_CPU_ISA=avx512|avx2|generic asks for another: a request for a set
// the CPU lacks falls back to the best it has, an unknown name throws ipuml::Error.
Isa active_isa();

// What IPUML_CPU_ISA asks for (clamped to detected_isa()), or detected_isa() when it is unset.
// Read once, on first use of active_isa(); exposed so the variable's parsing can be tested.
Isa isa_from_environment();

// Forces a path (tests, benchmarks); throws ipuml::Error if the CPU cannot run it.
void set_gemm_isa(Isa isa);
// Same by name ("avx512", "avx2", "generic").
void set_gemm_isa(const char* name);

// Data cache sizes in bytes as the OS reports them (sysconf), 0 where it does not say; read once.
// The GEMM fits its row and column blocks to them (gemm_kernels.hpp: fit_to_caches).
struct CacheSizes {
  int64_t l1d = 0, l2 = 0, l3 = 0;
};
CacheSizes detected_caches();

const char* isa_name(Isa isa);
// Name of the active path: "avx512", "avx2" or "generic".
const char* gemm_isa_name();

}  // namespace ipuml::cpu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/cpu/cpu_features_impl.hpp>
#endif
