// libFuzzer harness: IPU target overrides ("field=value" lines, as --set takes them) and target
// JSON. Every input applies or throws ipuml::Error, and an accepted target validates and prints.
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ipuml;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ipu::Target t = ipu::target_preset("ipu2");
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) ipu::apply_override(t, line);
    ipu::validate(t);
    (void)ipu::to_string(t);
    (void)ipu::target_from_json(ipu::to_json(t));
  } catch (const Error&) {
  }
  try {
    const ipu::Target t = ipu::target_from_json(text);
    ipu::validate(t);
    (void)ipu::to_string(t);
  } catch (const Error&) {
  }
  return 0;
}
