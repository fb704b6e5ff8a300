// Training checkpoints in HDF5: a module's parameters and buffers, an optimizer's state and the
// step, saved atomically and loaded with every key, shape and dtype checked before anything
// changes.
#pragma once

#include <ipuml/core/config.hpp>

#if IPUML_WITH_HDF5

#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/nn/module.hpp>

namespace ipuml::io {

// Layout (h5py-readable):
//   user block (512 bytes)  the integrity record: "ipuml checkpoint integrity v1", the size and
//                           SHA-256 of every byte after the user block
//   /                 attrs ipuml_checkpoint = kCheckpointFormat, step
//   /model/<a>/<b>/c  one dataset per state-dict entry "a.b.c" (parameters, then buffers)
//   /optimizer/...    the optimizer's state dict, laid out the same way; when the writer said
//                     whose state it is, the group carries the attributes type (the
//                     optimizer's name, "SGD") and group_sizes (parameters per group)
//   /training/...     other training state (RNG positions, counters), laid out the same way
// Every dataset carries the attributes dtype (ipuml's name for it), order (its position in the
// state dict, which HDF5's name-sorted listing would otherwise lose) and sha256 (of its bytes).
inline constexpr int64_t kCheckpointFormat = 2;
inline constexpr size_t kCheckpointUserBlock = 512;

struct CheckpointReadOptions {
  // Read files without ipuml's integrity record (written by other tools such as h5py, or by
  // ipuml before format 2). Such files reach libhdf5's parser unchecked, so only use it for
  // files you trust; every shape, dtype, size and value is still checked.
  bool allow_unverified = false;
};

// Whose optimizer state a checkpoint holds: recorded beside it, so that a load can check the
// state fits before anything changes (ipuml::load(optimizer, path) does). Empty type: none.
struct OptimizerRecord {
  std::string type;                  // Optimizer::name(): "SGD", "Adam", ...
  std::vector<int64_t> group_sizes;  // parameters in each parameter group
};

// Writes through io::atomic_write: until the new file is complete and on disk, `path` keeps
// its previous contents, so a crash or exception mid-save loses nothing. Temporaries left by
// writers that died mid-save are removed.
void save_checkpoint(const std::string& path, const nn::Module& module,
                     const nn::StateDict& optimizer_state = {}, int64_t step = 0,
                     const nn::StateDict& training_state = {},
                     const OptimizerRecord& optimizer_record = {});

// Restores `module` in place (load_state_dict, so optimizers and traced graphs keep their
// tensors) and, if asked, fills `optimizer_state` and `training_state` (in saved order) for the
// caller; returns the saved step. Everything is validated before the module changes and before
// libhdf5 parses the file: the integrity record (size and SHA-256 of the file), that only plain
// groups and datasets are linked, each tensor's checksum, key, shape and dtype (against the
// module, before anything is allocated), sizes against the file's, every float finite, the
// optimizer's lr and step counts >= 0 and the step in [0, 2^53]. Failures throw ipuml::Error
// naming the file and the key, and leave the module as it was.
int64_t load_checkpoint(const std::string& path, nn::Module& module,
                        nn::StateDict* optimizer_state = nullptr,
                        nn::StateDict* training_state = nullptr,
                        const CheckpointReadOptions& options = {});

// The state dicts and step of a checkpoint, without a module to load them into (validated as
// above, except against a module).
struct Checkpoint {
  nn::StateDict model;
  nn::StateDict optimizer;
  OptimizerRecord optimizer_record;  // empty type when the file has none
  nn::StateDict training;
  int64_t step = 0;
  bool verified = false;  // the file carried a matching integrity record
};
Checkpoint read_checkpoint(const std::string& path, const CheckpointReadOptions& options = {});

}  // namespace ipuml::io

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/io/checkpoint_impl.hpp>
#endif

#endif  // IPUML_WITH_HDF5
