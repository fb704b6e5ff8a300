// What every emulated target's backend does with the runtime's request before it plans: takes its
// own string options one by one (what is left is unknown to it), applies "field=value;..."
// target overrides, and copies the program's settings into the core's CompileOptions.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/emu/compiler.hpp>

namespace ipuml::emu {

// A backend's string options, each taken once; `rest()` is what no take() asked for.
class OptionTaker {
 public:
  explicit OptionTaker(backend::CompileOptions options) : o_(std::move(options)) {}
  std::string take(const char* key, const std::string& fallback) {
    auto it = o_.find(key);
    if (it == o_.end()) return fallback;
    std::string v = it->second;
    o_.erase(it);
    return v;
  }
  const backend::CompileOptions& rest() const { return o_; }

 private:
  backend::CompileOptions o_;
};

// Calls apply(item) for every non-empty item of "field=value;field=value".
template <typename Apply>
void for_each_override(const std::string& overrides, Apply apply) {
  std::stringstream s(overrides);
  for (std::string item; std::getline(s, item, ';');)
    if (!item.empty()) apply(item);
}

// The core's options for a program the runtime asks for, on `replicas` replicas.
inline CompileOptions compile_options_for(const backend::ProgramOptions& program,
                                          int64_t replicas) {
  CompileOptions co;
  co.partials_type = program.partials_type;
  co.stochastic_rounding = program.stochastic_rounding;
  co.rounding_seed = program.seed;
  co.allow_out_of_memory = program.allow_out_of_memory;
  co.replication_factor = replicas;
  co.cache_dir = program.cache_dir;
  co.progress = program.progress;
  co.report_dir = program.report_dir;
  co.program_name = program.name;
  return co;
}

}  // namespace ipuml::emu
