// What ipuml's programs (examples/ and src/tools/) share: the command line's conventions
// (--version, exit status 2 and one line for a usage error, validators that say what they
// want), wall-clock helpers, fixed-point formatting, the terminal progress line, --set overrides.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/runtime/options.hpp>
#include <ipuml/version.hpp>

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

// Sizes the emulated system for the run, as a command-line user asks for a POD of the IPUs the
// run takes (replicas x IPUs per replica; the library's default is one IPU-M2000's four), then
// applies --set field=value overrides of the target, so that a --set num_ipus=N states the system
// itself; `who` names the program in errors.
inline void apply_target_overrides(Options& opts, const std::vector<std::string>& overrides,
                                   const char* who, int64_t ipus_per_replica = 1) {
  const int64_t ipus = opts.replication_factor() * ipus_per_replica;
  if (ipus > 1) opts.setTargetOption("num_ipus", std::to_string(ipus));
  for (auto& o : overrides) {
    const auto eq_at = o.find('=');
    IPUML_CHECK(eq_at != std::string::npos, who, ": --set expects field=value, got '", o, "'");
    opts.setTargetOption(o.substr(0, eq_at), o.substr(eq_at + 1));
  }
}

// Graphcore's per-IPU proportion flags (--available-memory-proportion, --matmul-proportion): value
// i for IPU i, as PopTorch's setAvailableMemoryProportion({"IPU0": p0, "IPU1": p1, ...}).
inline void set_memory_proportion_per_ipu(Options& opts, const std::vector<double>& per_ipu) {
  std::map<std::string, double> keyed;
  for (size_t i = 0; i < per_ipu.size(); ++i) keyed["IPU" + std::to_string(i)] = per_ipu[i];
  opts.setAvailableMemoryProportion(keyed);
}

// --report-dir DIR: the profile reports of every program the run compiles (training, weight
// update, evaluation), one subdirectory each, for ipuml-report.
inline void add_report_dir_option(CLI::App& app, std::string& dir) {
  app.add_option("--report-dir", dir,
                 "Write the profile reports here, one subdirectory per compiled program "
                 "(training, weight_update, evaluation); view them with ipuml-report");
}

// A --report-dir that exists and is not a directory is refused before anything runs.
inline void check_report_dir(const std::string& who, const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  IPUML_CHECK(!std::filesystem::exists(dir, ec) || std::filesystem::is_directory(dir, ec), who,
              ": --report-dir '", dir, "' is not a directory");
}

// --- The command line --------------------------------------------------------------------

// Exit statuses of every ipuml program: 0 done, 1 it failed while running, 2 the command line
// was wrong (as getopt-style tools and Python's argparse; CLI11's own codes are 105-109).
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// The message once, prefixed by the program's name once, on one line.
inline std::string error_line(const std::string& who, std::string what) {
  const std::string prefix = who + ": ";
  while (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
  for (char& c : what)
    if (c == '\n' || c == '\r') c = ' ';
  while (!what.empty() && what.back() == ' ') what.pop_back();
  return prefix + what;
}

// Prints a usage error as one line on stderr (with where to find the options) and returns 2.
inline int usage_error(const std::string& who, const std::string& what) {
  std::cerr << error_line(who, what) << " (see " << who << " --help)" << std::endl;
  return kExitUsage;
}

// Prints a failure while running as one line on stderr and returns 1.
inline int run_error(const std::string& who, const std::string& what) {
  std::cerr << error_line(who, what) << std::endl;
  return kExitFailure;
}

// "--version": prints "<program> (ipuml) <version>" and exits 0.
inline void add_version_flag(CLI::App& app, const std::string& who) {
  app.set_version_flag("--version", who + " (ipuml) " + IPUML_VERSION_STRING,
                       "Print the version and exit");
}

// Parses argv with ipuml's conventions (--version added here): nothing when the program should
// go on; otherwise its exit status, after --help or --version (0) or a usage error (2, one line).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             const std::string& who) {
  if (app.get_option_no_throw("--version") == nullptr) add_version_flag(app, who);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(who, e.what());
  }
  return std::nullopt;
}

namespace cli_detail {

inline bool parse_integer(const std::string& s, int64_t& v) {
  try {
    size_t pos = 0;
    v = std::stoll(s, &pos);
    return pos == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

inline bool parse_number(const std::string& s, double& v) {
  try {
    size_t pos = 0;
    v = std::stod(s, &pos);
    return pos == s.size() && std::isfinite(v);
  } catch (const std::exception&) {
    return false;
  }
}

inline std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace cli_detail

// Validators whose messages say what the option wants ("--epochs: must be an integer >= 1,
// got '0'"), unlike CLI::PositiveNumber's "Value 0 not in range 0.000000 to 1.797e308".
inline CLI::Validator integer_at_least(int64_t lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        int64_t v = 0;
        if (cli_detail::parse_integer(s, v) && v >= lo) return {};
        return "must be an integer >= " + std::to_string(lo) + ", got '" + s + "'";
      },
      "INT >= " + std::to_string(lo));
}

inline CLI::Validator integer_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        int64_t v = 0;
        if (cli_detail::parse_integer(s, v) && v >= lo && v <= hi) return {};
        return "must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) +
               ", got '" + s + "'";
      },
      "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

inline CLI::Validator number_at_least(double lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        double v = 0;
        if (cli_detail::parse_number(s, v) && v >= lo) return {};
        return "must be a number >= " + cli_detail::num(lo) + ", got '" + s + "'";
      },
      "NUMBER >= " + cli_detail::num(lo));
}

inline CLI::Validator number_above(double lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        double v = 0;
        if (cli_detail::parse_number(s, v) && v > lo) return {};
        return "must be a number > " + cli_detail::num(lo) + ", got '" + s + "'";
      },
      "NUMBER > " + cli_detail::num(lo));
}

// lo <= v <= hi, or lo < v <= hi when `open_low` (a rate that must not be 0).
inline CLI::Validator number_in(double lo, double hi, bool open_low = false) {
  return CLI::Validator(
      [lo, hi, open_low](std::string& s) -> std::string {
        double v = 0;
        if (cli_detail::parse_number(s, v) && (open_low ? v > lo : v >= lo) && v <= hi) return {};
        return std::string("must be a number in ") + (open_low ? "(" : "[") + cli_detail::num(lo) +
               ", " + cli_detail::num(hi) + "], got '" + s + "'";
      },
      std::string("NUMBER in ") + (open_low ? "(" : "[") + cli_detail::num(lo) + ", " +
          cli_detail::num(hi) + "]");
}

// Checks --set field=value overrides against `target` (a preset name) before anything runs;
// throws ipuml::Error naming the field or value that is wrong.
inline void check_target_overrides(const std::string& target,
                                   const std::vector<std::string>& overrides) {
  ipu::Target t = ipu::target_preset(target);
  for (const auto& o : overrides) {
    IPUML_CHECK(o.find('=') != std::string::npos, "--set expects field=value, got '", o, "'");
    ipu::apply_override(t, o);
  }
}

// A PopTorch example's boolean flag value ("True" / "False", as Graphcore's argparse takes
// them; also true/false and 1/0); anything else is a usage error naming the flag.
inline bool parse_bool(const std::string& who, const std::string& flag, const std::string& v) {
  if (v == "True" || v == "true" || v == "1") return true;
  if (v == "False" || v == "false" || v == "0") return false;
  fail(who, ": ", flag, " expects True or False, got '", v, "'");
}

// --layers-per-ipu against --ipus-per-replica: one entry per IPU, or none on one IPU.
inline void check_layers_per_ipu(const std::string& who, const std::vector<int64_t>& layers_per_ipu,
                                 int64_t ipus_per_replica) {
  if (!layers_per_ipu.empty())
    IPUML_CHECK(static_cast<int64_t>(layers_per_ipu.size()) == ipus_per_replica, who,
                ": --layers-per-ipu has ", layers_per_ipu.size(),
                " entries but --ipus-per-replica is ", ipus_per_replica,
                " (one entry per IPU, e.g. --layers-per-ipu 0 4 4 4 --ipus-per-replica 4)");
  else
    IPUML_CHECK(ipus_per_replica == 1, who, ": --ipus-per-replica ", ipus_per_replica,
                " needs --layers-per-ipu to say which layers each IPU runs");
}

// A transformer example's learning-rate schedule and dropout flags.
inline void check_schedule(const std::string& who, double learning_rate, double lr_warmup,
                           int64_t training_steps, double dropout) {
  IPUML_CHECK(std::isfinite(learning_rate) && learning_rate >= 0, who,
              ": --learning-rate must be a finite number >= 0, got ", learning_rate);
  IPUML_CHECK(lr_warmup >= 0 && lr_warmup < 1, who, ": --lr-warmup ", lr_warmup,
              " is a fraction of the training steps in [0, 1)");
  IPUML_CHECK(training_steps >= 0, who, ": --training-steps must be >= 0");
  IPUML_CHECK(dropout >= 0 && dropout < 1, who, ": --dropout must be in [0, 1)");
}

// "Throughput: N samples/s wall-clock[, M samples/s simulated on R x target (the whole
// configuration)]", one line; nothing when no sample was trained. `simulated` is the emulated
// seconds of every program the run called (0: not emulated), as opposed to the profile
// summary's throughput of one program on one replica.
inline void print_throughput(int64_t samples, double wall, double simulated, int64_t ipus,
                             const std::string& target) {
  if (samples <= 0) return;
  std::cout << "Throughput: " << fixed(double(samples) / std::max(wall, 1e-9), 2)
            << " samples/s wall-clock";
  if (simulated > 0)
    std::cout << ", " << fixed(double(samples) / simulated, 1) << " samples/s simulated on " << ipus
              << " x " << target << " (the whole configuration)";
  std::cout << "\n";
}

}  // namespace ipuml::examples
