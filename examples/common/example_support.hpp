// What the example programs share: wall-clock helpers, fixed-point formatting, the terminal
// progress line, and --set field=value target overrides.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <ipuml/core/error.hpp>
#include <ipuml/runtime/options.hpp>

namespace ipuml::examples {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A `\r` progress line when stdout is a terminal; silent otherwise (the caller prints one
// summary line per epoch instead), so logs stay readable. `enabled` false silences it (the
// ranks other than 0 of a multi-instance run).
class Progress {
 public:
  explicit Progress(bool enabled = true) : tty_(enabled && ::isatty(::fileno(stdout)) != 0) {}
  bool tty() const { return tty_; }
  template <typename... Args>
  void update(const Args&... args) {
    if (!tty_) return;
    std::string line = ipuml::detail::str(args...);
    const size_t width = line.size();
    if (line.size() < last_) line.append(last_ - line.size(), ' ');
    last_ = width;
    std::cout << '\r' << line << std::flush;
  }
  void done() {
    if (tty_ && last_) std::cout << '\r' << std::string(last_, ' ') << '\r' << std::flush;
    last_ = 0;
  }

 private:
  bool tty_;
  size_t last_ = 0;
};

// Applies --set field=value overrides of the emulated target; `who` names the program in errors.
inline void apply_target_overrides(Options& opts, const std::vector<std::string>& overrides,
                                   const char* who) {
  for (auto& o : overrides) {
    const auto eq_at = o.find('=');
    IPUML_CHECK(eq_at != std::string::npos, who, ": --set expects field=value, got '", o, "'");
    opts.setTargetOption(o.substr(0, eq_at), o.substr(eq_at + 1));
  }
}

}  // namespace ipuml::examples
