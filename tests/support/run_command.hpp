// Test support: runs a shell command (an example program), returning its stdout and stderr
// together and its exit status (128 + signal number when a signal ended it).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

namespace ipuml::testing {

inline std::string run_command(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = ::pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

}  // namespace ipuml::testing
