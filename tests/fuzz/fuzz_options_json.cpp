// libFuzzer harness: IPUML_ENGINE_OPTIONS (JSON). Every input parses or throws ipuml::Error.
#include <ipuml/backends/emu/profile.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ipuml::emu::parse_engine_options(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const ipuml::Error&) {
  }
  return 0;
}
