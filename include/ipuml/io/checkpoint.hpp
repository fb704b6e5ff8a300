// Training checkpoints in HDF5: a module's parameters and buffers, an optimizer's state and the
// step, saved atomically and loaded with every key, shape and dtype checked before anything
// changes.
#pragma once

#include <ipuml/core/config.hpp>

#ifdef IPUML_WITH_HDF5

#include <cstdint>
#include <string>

#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/nn/module.hpp>

namespace ipuml::io {

// Layout (h5py-readable):
//   /                 attrs ipuml_checkpoint = kCheckpointFormat, step
//   /model/<a>/<b>/c  one dataset per state-dict entry "a.b.c" (parameters, then buffers)
//   /optimizer/...    the optimizer's state dict, laid out the same way
// Every dataset carries the attributes dtype (ipuml's name for it) and order (its position in
// the state dict, which HDF5's name-sorted listing would otherwise lose).
inline constexpr int64_t kCheckpointFormat = 1;

// Writes through io::atomic_write: until the new file is complete and on disk, `path` keeps
// its previous contents, so a crash or exception mid-save loses nothing.
void save_checkpoint(const std::string& path, const nn::Module& module,
                     const nn::StateDict& optimizer_state = {}, int64_t step = 0);

// Restores `module` in place (load_state_dict, so optimizers and traced graphs keep their
// tensors) and, if asked, fills `optimizer_state` (in saved order) for the optimizer's
// load_state_dict; returns the saved step. Everything is validated before the module changes:
// a missing or non-checkpoint file, a missing or unexpected key, a shape or dtype mismatch
// throw ipuml::Error naming the file and the key, and leave the module as it was.
int64_t load_checkpoint(const std::string& path, nn::Module& module,
                        nn::StateDict* optimizer_state = nullptr);

// The state dicts and step of a checkpoint, without a module to load them into.
struct Checkpoint {
  nn::StateDict model;
  nn::StateDict optimizer;
  int64_t step = 0;
};
Checkpoint read_checkpoint(const std::string& path);

}  // namespace ipuml::io

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/io/checkpoint_impl.hpp>
#endif

#endif  // IPUML_WITH_HDF5
