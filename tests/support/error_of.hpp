// Test support: the message of the ipuml::Error that f throws, or "(no error)".
#pragma once

#include <functional>
#include <string>

#include <ipuml/core/error.hpp>

namespace ipuml::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace ipuml::testing
