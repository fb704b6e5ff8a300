// The profile report of a compiled and run program (schema in docs/profile-report.md): target,
// graph size, memory per unit and category, liveness per step, execution trace, per-op cycles.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/ir/graph.hpp>

namespace ipuml::emu {

struct RunRecord;

// IPUML_ENGINE_OPTIONS, modelled on POPLAR_ENGINE_OPTIONS:
// '{"autoReport.all":"true","autoReport.directory":"./report"}'.
struct EngineOptions {
  bool auto_report = false;
  std::string directory = "./report";
  bool check_exchange = false;  // "debug.checkExchange": see ExecOptions::check_exchange
};
// Throws ipuml::Error on invalid JSON, a non-object, or a value of the wrong kind.
EngineOptions parse_engine_options(const std::string& json);
EngineOptions engine_options_from_env();

std::string make_profile_json(const ir::Graph& g, const Plan& p, const std::vector<RunRecord>& runs,
                              double samples_per_step = 0);
// Writes <directory>/profile.json (creating the directory); throws ipuml::Error if it cannot.
void write_profile_file(const std::string& directory, const std::string& json);
// Writes <directory>/<file_name> atomically (a temporary file renamed), creating the directory.
void write_report_file(const std::string& directory, const std::string& file_name,
                       const std::string& text);
// <directory>/<name> for one program's reports, unique among the programs of this process so
// that no program's report overwrites another's: a name already claimed in that directory gets
// _2, _3, ... Characters other than letters, digits, '-', '_' and '.' become '_'.
std::string claim_report_directory(const std::string& directory, const std::string& name);
void print_profile_summary(std::ostream& os, const ir::Graph& g, const Plan& p,
                           const std::vector<RunRecord>& runs, double samples_per_step = 0);

}  // namespace ipuml::emu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/emu/profile_impl.hpp>
#endif
