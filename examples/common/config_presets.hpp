// --config presets: named bundles of flags, as Graphcore's examples read theirs from configs.yml
// (`--config resnet50-pod4`). A flag given on the command line wins over the preset's, wherever
// it stands (--set overrides add to the preset's, a field's last value winning); --config list
// (or --help) names the presets.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "example_support.hpp"

namespace ipuml::examples {

struct ConfigPreset {
  std::string name;
  std::string description;  // one line: what the original runs with it
  // Each entry a flag and its values, e.g. {"--layers-per-ipu", "0", "4", "4", "4"}.
  std::vector<std::vector<std::string>> flags;
};

namespace preset_detail {

inline std::string flags_line(const ConfigPreset& p) {
  std::string s;
  for (auto& f : p.flags)
    for (auto& w : f) s += (s.empty() ? "" : " ") + w;
  return s;
}

inline const ConfigPreset* find(const std::vector<ConfigPreset>& presets, const std::string& name) {
  for (auto& p : presets)
    if (p.name == name) return &p;
  return nullptr;
}

inline std::string names(const std::vector<ConfigPreset>& presets) {
  std::string s;
  for (auto& p : presets) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace preset_detail

// Adds --config NAME to `app`, its help listing every preset with its flags.
inline void add_config_option(CLI::App& app, std::string& chosen,
                              const std::vector<ConfigPreset>& presets) {
  std::string help = "A preset bundle of flags (later flags override it); 'list' prints them:";
  for (auto& p : presets) help += "\n  " + p.name + ": " + p.description;
  app.add_option("--config", chosen, help)->check([presets](const std::string& s) -> std::string {
    if (s == "list" || preset_detail::find(presets, s) != nullptr) return {};
    return "unknown preset '" + s + "' (expected one of " + preset_detail::names(presets) +
           ", or list)";
  });
}

// parse_command_line with --config: when it names a preset, parses again with the preset's
// flags first, leaving out each flag the command line gives itself (under any of its names), so
// the command line wins whatever the order. `--config list` prints the presets and exits 0.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             const std::string& who,
                                             const std::vector<ConfigPreset>& presets,
                                             const std::string& chosen) {
  if (auto rc = parse_command_line(app, argc, argv, who)) return rc;
  if (chosen.empty()) return std::nullopt;
  if (chosen == "list") {
    for (auto& p : presets)
      std::cout << p.name << ": " << p.description << "\n  " << preset_detail::flags_line(p)
                << "\n";
    return 0;
  }
  const ConfigPreset& preset = *preset_detail::find(presets, chosen);
  std::vector<std::string> args{argv[0]};
  for (auto& f : preset.flags) {
    const CLI::Option* opt = app.get_option_no_throw(f.at(0));
    IPUML_CHECK(opt != nullptr, who, ": preset ", preset.name, " names ", f[0],
                ", which is not an option of this program");
    // --set field=value overrides accumulate, a later one of a field winning, so the preset's
    // go first and stay (a preset sizing the emulated system keeps it under the user's --set).
    if (opt->count() == 0 || f[0] == "--set") args.insert(args.end(), f.begin(), f.end());
  }
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  return parse_command_line(app, static_cast<int>(ptrs.size()), ptrs.data(), who);
}

}  // namespace ipuml::examples
