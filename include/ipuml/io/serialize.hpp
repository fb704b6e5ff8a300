// LibTorch's torch::save / torch::load as ipuml::save / ipuml::load: modules, tensors and
// vectors of tensors to HDF5 files in the checkpoint format (atomic writes, integrity checks).
#pragma once

#include <ipuml/core/config.hpp>

#if IPUML_WITH_HDF5

#include <concepts>
#include <memory>
#include <string>
#include <vector>

#include <ipuml/io/checkpoint.hpp>
#include <ipuml/nn/module.hpp>

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

}  // namespace ipuml

#endif  // IPUML_WITH_HDF5
