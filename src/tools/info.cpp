// ipuml-info: lists the emulated IPU devices and their targets, in the manner of `gc-info -l`.
// Usage: ipuml-info [--target ipu2] [--set num_ipus=4 ...] [--json] [--fields]
#include <iomanip>
#include <sstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/core/error.hpp>

#include "example_support.hpp"

int main(int argc, char** argv) {
  CLI::App app{"List the emulated IPU devices (ipuml's IPU emulator targets)."};
  std::string target_name = "ipu2";
  std::vector<std::string> overrides;
  bool as_json = false, all_presets = false, fields = false, list = true;
  app.add_option("-t,--target", target_name, "target preset: ipu1, ipu2, bow, tiny")
      ->capture_default_str();
  app.add_option("-s,--set", overrides,
                 "override a target field, e.g. --set num_ipus=4 (repeatable)");
  app.add_flag("-j,--json", as_json, "print JSON instead of text");
  app.add_flag("-a,--all", all_presets, "list every preset instead of one target");
  app.add_flag("--fields", fields, "list the fields --set accepts");
  app.add_flag("-l,--list", list, "list devices (the default; accepted for gc-info compatibility)");
  if (auto rc = ipuml::examples::parse_command_line(app, argc, argv, "ipuml-info")) return *rc;

  // A wrong preset or field is a usage error, found before anything is printed.
  try {
    for (auto& n :
         all_presets ? ipuml::ipu::target_preset_names() : std::vector<std::string>{target_name})
      ipuml::examples::check_target_overrides(n, overrides);
  } catch (const std::exception& e) {
    return ipuml::examples::usage_error("ipuml-info", e.what());
  }
  try {
    if (fields) {
      for (auto& f : ipuml::ipu::target_field_names()) std::cout << f << "\n";
      return 0;
    }
    std::vector<ipuml::ipu::Target> targets;
    if (all_presets) {
      for (auto& n : ipuml::ipu::target_preset_names())
        targets.push_back(ipuml::ipu::target_preset(n));
    } else {
      targets.push_back(ipuml::ipu::target_preset(target_name));
    }
    for (auto& t : targets)
      for (auto& o : overrides) ipuml::ipu::apply_override(t, o);

    if (as_json) {
      nlohmann::json out = nlohmann::json::array();
      for (auto& t : targets) {
        nlohmann::json devices = nlohmann::json::array();
        for (int64_t i = 0; i < t.num_ipus; ++i)
          devices.push_back({{"id", i},
                             {"type", "emulated"},
                             {"target", t.name},
                             {"tiles", t.tiles_per_ipu},
                             {"memory_bytes", t.ipu_bytes()},
                             {"clock_hz", t.clock_hz}});
        out.push_back(
            {{"target", nlohmann::json::parse(ipuml::ipu::to_json(t))}, {"devices", devices}});
      }
      std::cout << (all_presets ? out : out[0]).dump(2) << "\n";
      return 0;
    }
    for (auto& t : targets) {
      std::cout << "Target " << ipuml::ipu::to_string(t) << "\n";
      std::cout << std::left << std::setw(5) << "Id" << std::setw(12) << "Type" << std::setw(10)
                << "Target" << std::setw(8) << "Tiles" << std::setw(14) << "Memory"
                << "Clock\n";
      for (int64_t i = 0; i < t.num_ipus; ++i) {
        std::ostringstream mem, clk;
        mem << std::fixed << std::setprecision(1) << t.ipu_bytes() / (1024.0 * 1024.0)
            << " MB";  // 2^20, as gc-info
        clk << std::fixed << std::setprecision(2) << t.clock_hz / 1e9 << " GHz";
        std::cout << std::left << std::setw(5) << i << std::setw(12) << "emulated" << std::setw(10)
                  << t.name << std::setw(8) << t.tiles_per_ipu << std::setw(14) << mem.str()
                  << clk.str() << "\n";
      }
      std::cout << "  " << t.worker_contexts << " worker contexts per tile, " << t.bytes_per_tile
                << " bytes per tile, " << std::setprecision(4) << t.flops_per_cycle_fp32 << " / "
                << t.flops_per_cycle_fp16 << " FLOP/cycle/tile (fp32/fp16)\n";
    }
  } catch (const std::exception& e) {
    return ipuml::examples::run_error("ipuml-info", e.what());
  }
  return 0;
}
