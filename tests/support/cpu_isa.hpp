// Test support for the CPU kernels: the ISA paths this CPU can run, a guard restoring the
// active one, and seeded random buffers.
#pragma once

#include <random>
#include <vector>

#include <ipuml/backends/cpu/cpu_features.hpp>

namespace ipuml::testing {

// Restores the ISA that was active before a test forced another.
struct IsaGuard {
  cpu::Isa saved = cpu::active_isa();
  ~IsaGuard() { cpu::set_gemm_isa(saved); }
};

inline std::vector<cpu::Isa> supported_isas() {
  std::vector<cpu::Isa> out;
  for (cpu::Isa isa : {cpu::Isa::generic, cpu::Isa::avx2, cpu::Isa::avx512})
    if (static_cast<int>(isa) <= static_cast<int>(cpu::detected_isa())) out.push_back(isa);
  return out;
}

inline std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace ipuml::testing
