// libFuzzer harness: the checkpoint loader.
//   fuzz_checkpoint:        the input is the file, as load_checkpoint meets it on disk (its
//                           integrity record must stop anything damaged before libhdf5 parses it);
//   fuzz_checkpoint_sealed: (IPUML_FUZZ_SEALED) the input is a checkpoint's body, sealed with a
//                           correct integrity record first, as a forger would: ipuml's own checks
//                           (links, shapes, sizes, dtypes, values) and libhdf5's parser see
//                           arbitrary HDF5 (libhdf5 first in the loader's child process, where
//                           its crashes and loops become errors; IPUML_ISOLATE_PARSERS=0 fuzzes
//                           libhdf5 itself, in this process).
// Either way every input must load or throw ipuml::Error.
#include <ipuml/core/sha256.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/ipuml.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.hpp"

namespace {

// The module the checkpoints of the seed corpus were saved from (scripts/fuzz.sh --seeds).
struct Small : ipuml::nn::Module {
  ipuml::Tensor w, b, steps;
  Small() : ipuml::nn::Module("Small") {
    w = register_parameter("w", ipuml::zeros({4, 3}));
    b = register_parameter("b", ipuml::zeros({4}));
    steps = register_buffer("steps", ipuml::zeros({}, ipuml::kInt64));
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ipuml;
  fuzz::short_isolation_timeout();
#ifdef IPUML_FUZZ_SEALED
  constexpr bool sealed = true;
#else
  constexpr bool sealed = false;
#endif
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (sealed) {
    std::string block = "ipuml checkpoint integrity v1\nbody-bytes " +
                        std::to_string(bytes.size()) + "\nbody-sha256 " + to_hex(sha256(bytes)) +
                        "\n";
    block.resize(io::kCheckpointUserBlock, '\0');
    bytes = block + bytes;
  }
  const std::string path =
      fuzz::write_file("ck.h5", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  try {
    io::read_checkpoint(path);
  } catch (const Error&) {
  }
  try {
    Small m;
    nn::StateDict opt, training;
    io::load_checkpoint(path, m, &opt, &training);
  } catch (const Error&) {
  }
  return 0;
}
