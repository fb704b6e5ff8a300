// ipuml-report's page: the profile reports of one or more compiled programs as one
// self-contained HTML file (inline canvas, SVG and script; nothing is fetched over a network).
#pragma once

#include <string>
#include <vector>

#include <ipuml/core/config.hpp>

namespace ipuml::emu {

// One compiled program's reports as written by Executable::write_profile.
struct ReportProgram {
  std::string name;
  std::string profile_json;  // required: schema ipuml.profile/2 (or /1)
  std::string trace_json;    // optional: trace.json (backends/emu/trace.hpp); empty if absent
};

// The programs under `path`: a profile.json file, a directory holding one, or a report
// directory of program subdirectories (autoReport.directory). Throws ipuml::Error naming the
// path when it holds none or a file is not a profile.
std::vector<ReportProgram> load_report_programs(const std::string& path);

// The page (docs/profile-report.md, "ipuml-report"): per program, memory per unit as a heat map,
// memory by category, liveness over program steps, the busiest units and the execution
// timeline. Throws ipuml::Error when a profile is not valid ipuml.profile JSON (version 2, or 1).
std::string make_report_html(const std::vector<ReportProgram>& programs,
                             const std::string& title = "ipuml profile");

}  // namespace ipuml::emu

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/emu/report_html_impl.hpp>
#endif
