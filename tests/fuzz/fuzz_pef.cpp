// libFuzzer harness: the SambaNova PEF reader (backends/sambanova/pef.hpp). An input that starts
// with "IPUML-PEF" is the file as read_pef meets it on disk (its first line and integrity record
// must stop anything damaged); any other input is a body, sealed with a correct integrity record
// first as a forger would, so that the JSON and field checks see arbitrary text. Every input is
// read or refused with an ipuml::Error naming the file; a PEF it accepts keeps the reader's
// promises, matches itself, and written again with write_pef reads back the same.
#include <ipuml/backends/sambanova/pef.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/core/sha256.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"

namespace {

bool keeps_promises(const ipuml::sambanova::Pef& p) {
  using namespace ipuml::sambanova;
  return !p.app.empty() && p.app.size() <= 64 && p.model_config.is_object() && p.batch_size >= 1 &&
         p.batch_size <= kPefMaxBatchSize && p.target.is_object() && p.num_tiles >= 1 &&
         p.num_tiles <= kPefMaxTiles && (p.optimization == "o0" || p.optimization == "o1") &&
         p.world_size >= 1 && p.world_size <= kPefMaxWorldSize && p.graph_sha256.size() == 64 &&
         p.sections.is_array() && !p.ipuml_version.empty() && p.ipuml_version.size() <= 64;
}

bool same(const ipuml::sambanova::Pef& a, const ipuml::sambanova::Pef& b) {
  return a.app == b.app && a.model_config == b.model_config && a.batch_size == b.batch_size &&
         a.target == b.target && a.num_tiles == b.num_tiles && a.optimization == b.optimization &&
         a.world_size == b.world_size && a.graph_sha256 == b.graph_sha256 &&
         a.sections == b.sections && a.ipuml_version == b.ipuml_version;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ipuml;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.rfind(sambanova::kPefMagic, 0) != 0)
    bytes = "IPUML-PEF 1\nbody-bytes " + std::to_string(bytes.size()) + "\nbody-sha256 " +
            to_hex(sha256(bytes)) + "\n" + bytes;
  const std::string path =
      fuzz::write_file("in.pef", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  sambanova::Pef p;
  try {
    p = sambanova::read_pef(path);
  } catch (const Error& e) {
    if (std::string(e.what()).rfind("read_pef '" + path + "': ", 0) != 0) __builtin_trap();
    return 0;
  }
  if (!keeps_promises(p) || !sambanova::pef_mismatch(path, p, p).empty()) __builtin_trap();
  const std::string again = (fuzz::scratch() / "again.pef").string();
  try {
    sambanova::write_pef(again, p);
    if (!same(sambanova::read_pef(again), p)) __builtin_trap();
  } catch (const Error&) {
    __builtin_trap();  // what was read must write and read back
  }
  return 0;
}
