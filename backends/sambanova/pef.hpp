// A PEF: what `compile` writes for the emulated SambaNova RDU and `run`, `test` and
// `measure-performance` load. SambaNova's tools call their compiled program a PEF; ipuml's is its
// own file: the app and hyper-parameters it was compiled for, the batch size, the target, the
// compiler's section plan and the SHA-256 of the traced step's graph, so that a run rebuilds the
// model the PEF names, traces its step and refuses to go on when the graph is not the one the PEF
// was compiled for.
//
// The file is integrity-checked like a checkpoint: a magic line, a record of the body's size and
// SHA-256, then the body as JSON text:
//
//   IPUML-PEF 1
//   body-bytes 1234
//   body-sha256 <64 lowercase hex digits>
//   {"app":"lenet","batch_size":32,...}
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include <ipuml/core/config.hpp>
#include <ipuml/version.hpp>

namespace ipuml::sambanova {

// The first line of every PEF, and the format this ipuml writes and reads.
inline constexpr const char* kPefMagic = "IPUML-PEF";
inline constexpr int kPefFormat = 1;
// The largest body read_pef reads, and the most JSON values and nesting levels it accepts in it
// (checked before the body is turned into JSON values).
inline constexpr uint64_t kPefMaxBodyBytes = uint64_t{64} << 20;
inline constexpr int64_t kPefMaxJsonValues = int64_t{1} << 22;
inline constexpr int kPefMaxJsonDepth = 64;
inline constexpr int64_t kPefMaxBatchSize = int64_t{1} << 31;
inline constexpr int64_t kPefMaxTiles = 64;
inline constexpr int64_t kPefMaxWorldSize = 4096;

struct Pef {
  std::string app;              // the model's name, e.g. "lenet": [A-Za-z0-9_.-], 1-64 chars
  nlohmann::json model_config;  // the model's hyper-parameters as the app recorded them (object)
  int64_t batch_size = 1;       // 1..2^31
  nlohmann::json target;        // the target preset and overrides (an object; opaque here)
  int64_t num_tiles = 0;        // tiles the program may use, 1..64
  std::string optimization = "o1";  // "o0" or "o1"
  int64_t world_size = 1;           // data-parallel instances it was compiled for (-ws N), 1..4096
  std::string graph_sha256;  // 64 lowercase hex digits: SHA-256 of the step's Graph::signature()
  nlohmann::json sections;   // the compiler's section plan (an array; opaque here)
  std::string ipuml_version = IPUML_VERSION_STRING;  // the ipuml that wrote it
};

// Writes `pef` to `path`: creates the parent directories, writes a temporary beside it and
// renames it over `path` once it is on disk (a reader never sees half a PEF). Throws ipuml::Error
// naming the path when a field is out of range (the same checks read_pef makes) or the file
// cannot be written.
void write_pef(const std::string& path, const Pef& pef);

// Reads and checks a PEF. Throws ipuml::Error naming the file and what is wrong with it (not a
// regular file, not a PEF, another format version, truncated, extended, corrupt, not JSON, a
// missing or unknown key, a wrong type, a value out of range) and what was expected.
Pef read_pef(const std::string& path);

// Empty when what this run has (`now`: app, model_config, batch_size, ipuml_version and
// graph_sha256) is what the PEF at `path` was compiled for (`compiled`); otherwise one sentence
// naming the first field that differs, both values, and how to compile again, e.g.
// "pef/lenet/lenet.pef was compiled for batch size 1; this run has batch size 32: compile again
// with -b 32".
std::string pef_mismatch(const std::string& path, const Pef& compiled, const Pef& now);

}  // namespace ipuml::sambanova

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/backends/sambanova/pef_impl.hpp>
#endif
