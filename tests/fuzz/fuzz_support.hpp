// Shared by the libFuzzer harnesses: a private scratch directory per process and a way to put
// the fuzzer's bytes into a file there (the readers under test take paths).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <ipuml/io/isolated.hpp>

namespace ipuml::fuzz {

// The readers that parse a file in a child process first (io::run_isolated: checkpoints,
// cellSpike files) stop a looping parse after 5 s, before libFuzzer's -timeout=10 would call
// the input a hang. IPUML_ISOLATE_PARSERS=0 in the environment fuzzes libhdf5 itself instead, in
// this process, where its coverage counts.
inline void short_isolation_timeout() {
  static const bool once = [] {
    io::set_parser_isolation(io::parser_isolation(), 5.0);
    return true;
  }();
  (void)once;
}

inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto p = std::filesystem::temp_directory_path() / ("ipuml_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(p);
    return p;
  }();
  return dir;
}

inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch() / name).string();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace ipuml::fuzz
