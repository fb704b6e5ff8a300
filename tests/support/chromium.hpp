// Test support: headless Chromium for the report pages (scripts/install-deps.sh --browser
// installs Debian's chromium; tests that need it skip with a warning where it is missing).
#pragma once

#include <algorithm>
#include <string>

#include "run_command.hpp"

namespace ipuml::testing {

// Chromium's path on PATH, or "" when there is none.
inline std::string find_chromium() {
  int status = -1;
  std::string browser = run_command(
      "command -v chromium || command -v chromium-browser || command -v chromium-headless-shell",
      &status);
  browser.erase(std::remove(browser.begin(), browser.end(), '\n'), browser.end());
  return status == 0 ? browser : std::string();
}

// Renders `html` (a file) at width x height into the PNG `shot`; returns Chromium's output.
// --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
inline std::string screenshot(const std::string& browser, const std::string& html,
                              const std::string& shot, const std::string& profile_dir, int width,
                              int height) {
  int status = -1;
  return run_command("timeout 60 '" + browser +
                         "' --headless --no-sandbox --disable-gpu --hide-scrollbars "
                         "--user-data-dir='" +
                         profile_dir + "' --window-size=" + std::to_string(width) + "," +
                         std::to_string(height) + " --screenshot='" + shot + "' 'file://" + html +
                         "'",
                     &status);
}

}  // namespace ipuml::testing
