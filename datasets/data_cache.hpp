// Where scripts/fetch-data.sh keeps downloaded data sets, computed as the script computes it:
// $IPUML_DATA_DIR, else $XDG_CACHE_HOME/ipuml, else ~/.cache/ipuml.
#pragma once

#include <cstdlib>
#include <string>

namespace ipuml::datasets {

inline std::string data_cache_dir() {
  const char* data = std::getenv("IPUML_DATA_DIR");
  if (data && *data) return data;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && *xdg) return std::string(xdg) + "/ipuml";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/ipuml";
  return "~/.cache/ipuml";
}

}  // namespace ipuml::datasets
