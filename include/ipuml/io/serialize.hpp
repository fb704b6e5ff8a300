// LibTorch's torch::save / torch::load as ipuml::save / ipuml::load: modules, tensors, vectors
// of tensors and optimizers to HDF5 files in the checkpoint format (atomic writes, integrity
// checks).
#pragma once

#include <ipuml/core/config.hpp>

#if IPUML_WITH_HDF5

#include <concepts>
#include <memory>
#include <string>
#include <vector>

#include <ipuml/io/checkpoint.hpp>
#include <ipuml/nn/module.hpp>
#include <ipuml/optim/optimizer.hpp>

namespace ipuml {

namespace serialize_detail {
inline constexpr const char* kTensorKey = "tensor";

// A module whose buffers are the tensors, so tensors travel through the checkpoint code.
inline void save_tensors(const std::vector<Tensor>& ts, const std::string& path, bool single) {
  nn::Module holder("Tensors");
  for (size_t i = 0; i < ts.size(); ++i) {
    IPUML_CHECK(ts[i].defined(), "ipuml::save '", path, "': tensor ", i, " is undefined");
    holder.register_buffer(single ? kTensorKey : std::to_string(i), ts[i]);
  }
  io::save_checkpoint(path, holder);
}

inline std::string keys_of(const nn::StateDict& d) {
  std::string s;
  for (size_t i = 0; i < d.size() && i < 4; ++i) s += (i ? ", '" : "'") + d[i].key() + "'";
  if (d.size() > 4) s += ", ...";
  return s.empty() ? "none" : s;
}
}  // namespace serialize_detail

// Modules: every parameter and buffer, keyed as state_dict() names them. load() restores the
// module in place after checking every key, shape and dtype (a mismatch leaves it unchanged).
inline void save(const nn::Module& module, const std::string& path) {
  io::save_checkpoint(path, module);
}
inline void load(nn::Module& module, const std::string& path,
                 const io::CheckpointReadOptions& options = {}) {
  io::load_checkpoint(path, module, nullptr, nullptr, options);
}
template <typename Impl>
void save(const nn::ModuleHolder<Impl>& module, const std::string& path) {
  save(*module, path);
}
template <typename Impl>
void load(const nn::ModuleHolder<Impl>& module, const std::string& path,
          const io::CheckpointReadOptions& options = {}) {
  load(*module, path, options);
}
template <typename M>
requires std::derived_from<M, nn::Module>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  IPUML_CHECK(module != nullptr, "ipuml::save '", path, "': null module");
  save(*module, path);
}
template <typename M>
requires std::derived_from<M, nn::Module>
void load(const std::shared_ptr<M>& module, const std::string& path,
          const io::CheckpointReadOptions& options = {}) {
  IPUML_CHECK(module != nullptr, "ipuml::load '", path, "': null module");
  load(*module, path, options);
}

// Tensors: load() replaces `tensor` with the saved one (shape and dtype as saved), as
// torch::load does.
inline void save(const Tensor& tensor, const std::string& path) {
  serialize_detail::save_tensors({tensor}, path, true);
}
inline void load(Tensor& tensor, const std::string& path,
                 const io::CheckpointReadOptions& options = {}) {
  const io::Checkpoint c = io::read_checkpoint(path, options);
  IPUML_CHECK(c.model.size() == 1 && c.model[0].key() == serialize_detail::kTensorKey,
              "ipuml::load '", path, "': expected one tensor saved by ipuml::save(Tensor), found ",
              c.model.size(), " entries (", serialize_detail::keys_of(c.model), ")");
  tensor = c.model[0].value();
}
inline void save(const std::vector<Tensor>& tensors, const std::string& path) {
  serialize_detail::save_tensors(tensors, path, false);
}
inline void load(std::vector<Tensor>& tensors, const std::string& path,
                 const io::CheckpointReadOptions& options = {}) {
  const io::Checkpoint c = io::read_checkpoint(path, options);
  std::vector<Tensor> out;
  for (size_t i = 0; i < c.model.size(); ++i) {
    IPUML_CHECK(c.model[i].key() == std::to_string(i), "ipuml::load '", path,
                "': expected tensors saved by ipuml::save(std::vector<Tensor>) keyed 0, 1, ..., "
                "found '",
                c.model[i].key(), "' at position ", i);
    out.push_back(c.model[i].value());
  }
  tensors = std::move(out);
}

// Optimizers: the state dict (every parameter's state tensors in order, each group's lr) in the
// checkpoint's /optimizer group, recorded with the optimizer's type and its groups' sizes (no
// module, no parameters: save the module for those). load() restores the state in place into an
// optimizer of the same type over as many parameters, grouped the same way, after checking
// that and every key, shape and dtype; a mismatch leaves the optimizer unchanged. The other
// hyperparameters (momentum, betas, ...) are the target's own: build it with the same options.
inline void save(const optim::Optimizer& optimizer, const std::string& path) {
  io::OptimizerRecord record{optimizer.name(), {}};
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
    record.group_sizes.push_back(static_cast<int64_t>(optimizer.params(g).size()));
  io::save_checkpoint(path, nn::Module("Optimizer"), optimizer.state_dict(), 0, {}, record);
}
inline void load(optim::Optimizer& optimizer, const std::string& path,
                 const io::CheckpointReadOptions& options = {}) {
  const io::Checkpoint c = io::read_checkpoint(path, options);
  const io::OptimizerRecord& saved = c.optimizer_record;
  IPUML_CHECK(!saved.type.empty(), "ipuml::load '", path,
              "': expected an optimizer's state saved by ipuml::save(optimizer), found none (",
              c.model.size(), " module entries: ", serialize_detail::keys_of(c.model), ")");
  IPUML_CHECK(saved.type == optimizer.name(), "ipuml::load '", path,
              "': the file holds the state of an optimizer of type ", saved.type,
              ", which cannot be loaded into one of type ", optimizer.name(),
              " (expected the type that saved it)");
  std::vector<int64_t> mine;
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
    mine.push_back(static_cast<int64_t>(optimizer.params(g).size()));
  auto total = [](const std::vector<int64_t>& v) {
    int64_t n = 0;
    for (int64_t x : v) n += x;
    return n;
  };
  IPUML_CHECK(saved.group_sizes == mine, "ipuml::load '", path, "': the saved ", saved.type,
              " optimized ", total(saved.group_sizes), " parameters in groups of ",
              saved.group_sizes, ", this one optimizes ", total(mine), " in groups of ", mine,
              " (expected the same parameters, grouped the same way)");
  optimizer.load_state_dict(c.optimizer);  // checks every key, shape and dtype before copying
}

}  // namespace ipuml

#endif  // IPUML_WITH_HDF5
