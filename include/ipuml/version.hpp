// The version of ipuml, for programs' --version and for code that must know which release it
// builds against. CMakeLists.txt refuses to configure when project(VERSION) says otherwise.
#pragma once

#define IPUML_VERSION_MAJOR 0
#define IPUML_VERSION_MINOR 1
#define IPUML_VERSION_PATCH 0
#define IPUML_VERSION_STRING "0.1.0"
// One number for preprocessor comparisons: MAJOR * 10000 + MINOR * 100 + PATCH.
#define IPUML_VERSION \
  (IPUML_VERSION_MAJOR * 10000 + IPUML_VERSION_MINOR * 100 + IPUML_VERSION_PATCH)

namespace ipuml {

struct Version {
  int major, minor, patch;
};
inline constexpr Version version{IPUML_VERSION_MAJOR, IPUML_VERSION_MINOR, IPUML_VERSION_PATCH};
inline constexpr const char* version_string = IPUML_VERSION_STRING;

}  // namespace ipuml
