// ipuml-report: turns profile reports (profile.json, trace.json per compiled program) into one
// self-contained HTML page, PopVision's views in a browser without a network.
// Usage: ipuml-report ./report [-o report.html] [--title "MNIST on ipu2"]
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <ipuml/backends/emu/report_html.hpp>
#include <ipuml/core/error.hpp>

#include "example_support.hpp"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const std::string who = "ipuml-report";
  CLI::App app{
      "Write an HTML page of ipuml profile reports: memory per tile, memory by category, "
      "liveness, busiest tiles and the execution timeline of each compiled program"};
  std::vector<std::string> inputs;
  std::string output, title = "ipuml profile";
  app.add_option("reports", inputs,
                 "Report directories (autoReport.directory: one subdirectory per program), "
                 "program directories or profile.json files")
      ->required();
  app.add_option("-o,--output", output,
                 "The HTML file to write (default: report.html in the first report directory)");
  app.add_option("--title", title, "The page's title")->capture_default_str();
  if (auto rc = ipuml::examples::parse_command_line(app, argc, argv, who)) return *rc;

  std::vector<ipuml::emu::ReportProgram> programs;
  try {
    for (auto& in : inputs) {
      auto found = ipuml::emu::load_report_programs(in);
      programs.insert(programs.end(), found.begin(), found.end());
    }
  } catch (const std::exception& e) {
    // A path that holds no report is a wrong argument.
    return ipuml::examples::usage_error(who, e.what());
  }
  try {
    if (output.empty()) {
      const fs::path first(inputs.front());
      std::error_code ec;
      output =
          ((fs::is_directory(first, ec) ? first : first.parent_path()) / "report.html").string();
    }
    const std::string html = ipuml::emu::make_report_html(programs, title);
    const fs::path tmp = output + ".tmp";
    {
      std::ofstream f(tmp, std::ios::trunc | std::ios::binary);
      IPUML_CHECK(static_cast<bool>(f), "cannot write '", tmp.string(), "'");
      f << html;
      IPUML_CHECK(static_cast<bool>(f), "writing '", tmp.string(), "' failed");
    }
    std::error_code ec;
    fs::rename(tmp, output, ec);
    IPUML_CHECK(!ec, "cannot rename '", tmp.string(), "' to '", output, "': ", ec.message());
    std::cout << who << ": wrote " << output << " (" << programs.size() << " program"
              << (programs.size() == 1 ? "" : "s") << ":";
    for (auto& p : programs) std::cout << " " << p.name;
    std::cout << ")\n";
  } catch (const std::exception& e) {
    return ipuml::examples::run_error(who, e.what());
  }
  return 0;
}
