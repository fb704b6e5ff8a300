// Bodies of the HDF5 checkpoints (compiled once in src/lib/io_checkpoint.cpp).
#pragma once

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/core/error.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/io/hdf5.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::io {

namespace ckpt_detail {

inline constexpr const char* kModelGroup = "model";
inline constexpr const char* kOptimizerGroup = "optimizer";

inline H5Dtype to_h5(DType t) {
  switch (t) {
    case DType::Float32:
      return H5Dtype::float32;
    case DType::Float16:
      return H5Dtype::float16;
    case DType::BFloat16:
      return H5Dtype::bfloat16;
    case DType::Int32:
      return H5Dtype::int32;
    case DType::Int64:
      return H5Dtype::int64;
    case DType::Bool:
      return H5Dtype::boolean;
  }
  return H5Dtype::other;
}

// "layer1.conv.weight" -> "layer1/conv/weight"; refuses keys that would not map back.
inline std::string key_to_path(const std::string& file, const std::string& key) {
  IPUML_CHECK(!key.empty() && key.front() != '.' && key.back() != '.' &&
                  key.find("..") == std::string::npos && key.find('/') == std::string::npos,
              "save_checkpoint '", file, "': key '", key,
              "' cannot be stored (expected dot-separated non-empty names without '/')");
  std::string p = key;
  std::replace(p.begin(), p.end(), '.', '/');
  return p;
}

inline std::string path_to_key(std::string p) {
  std::replace(p.begin(), p.end(), '/', '.');
  return p;
}

// Writes one state dict under `group`. Keys are checked as they are written, so one that
// collides with an earlier key (the same name, or one a group was already made for) fails here
// in the middle of the save, which atomic_write turns into "nothing happened".
inline void write_state(H5File& f, const std::string& file, const std::string& group,
                        const nn::StateDict& state) {
  f.create_group(group);
  int64_t order = 0;
  for (const auto& [key, tensor] : state) {
    const std::string path = group + "/" + key_to_path(file, key);
    // A parent that already exists as a dataset: "a" saved before "a.b".
    for (size_t pos = path.find('/', group.size() + 1); pos != std::string::npos;
         pos = path.find('/', pos + 1))
      IPUML_CHECK(!f.is_dataset(path.substr(0, pos)), "save_checkpoint '", file, "': key '", key,
                  "' in /", group, " lies under the key '",
                  path_to_key(path.substr(group.size() + 1, pos - group.size() - 1)), "'");
    IPUML_CHECK(!f.exists(path), "save_checkpoint '", file, "': key '", key, "' in /", group,
                " collides with another key (duplicate, or a prefix of another key)");
    IPUML_CHECK(tensor.defined(), "save_checkpoint '", file, "': '", key,
                "' is an undefined tensor");
    IPUML_CHECK(!tensor.is_symbolic(), "save_checkpoint '", file, "': '", key,
                "' is symbolic (recorded while tracing) and holds no values");
    const Tensor c = tensor.contiguous();
    f.write(path, to_h5(c.dtype()), c.shape(), c.raw_data());
    f.set_attr(path, "dtype", dtype_name(c.dtype()));
    f.set_attr(path, "order", order++);
  }
}

// Every dataset under `group`, as (key, path), in saved order.
inline std::vector<std::pair<std::string, std::string>> list_state(const H5File& f,
                                                                   const std::string& file,
                                                                   const std::string& group) {
  std::vector<std::pair<int64_t, std::pair<std::string, std::string>>> found;
  std::vector<std::string> pending{group};
  while (!pending.empty()) {
    const std::string g = pending.back();
    pending.pop_back();
    for (const std::string& child : f.list(g)) {
      const std::string p = g + "/" + child;
      if (f.is_group(p)) {
        pending.push_back(p);
        continue;
      }
      const std::string key = path_to_key(p.substr(group.size() + 1));
      IPUML_CHECK(f.is_dataset(p), "load_checkpoint '", file, "': /", p,
                  " is neither a group nor a dataset");
      const int64_t order = f.has_attr(p, "order") ? f.attr_int(p, "order") : int64_t{1} << 62;
      found.push_back({order, {key, p}});
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [o, kp] : found) out.push_back(std::move(kp));
  return out;
}

// Reads one dataset into a new tensor of the dtype it was saved with.
inline Tensor read_tensor(const H5File& f, const std::string& file, const std::string& key,
                          const std::string& p) {
  const H5DatasetInfo info = f.info(p);
  IPUML_CHECK(f.has_attr(p, "dtype"), "load_checkpoint '", file, "': '", key,
              "' has no dtype attribute (not written by save_checkpoint)");
  const std::string name = f.attr_string(p, "dtype");
  DType dt{};
  bool known = false;
  for (DType t : {kFloat32, kFloat16, kBFloat16, kInt32, kInt64, kBool})
    if (name == dtype_name(t)) {
      dt = t;
      known = true;
    }
  IPUML_CHECK(known, "load_checkpoint '", file, "': '", key, "' has unknown dtype '", name, "'");
  IPUML_CHECK(info.dtype == to_h5(dt), "load_checkpoint '", file, "': '", key, "' is stored as ",
              info.type_name, " but tagged ", name);
  Tensor t = empty(info.shape, dt);
  f.read(p, info.dtype, info.shape, t.raw_data());
  return t;
}

inline H5File open_checkpoint(const std::string& path) {
  std::error_code ec;
  IPUML_CHECK(std::filesystem::exists(path, ec), "load_checkpoint '", path, "': no such file");
  H5File f = [&] {
    try {
      return H5File(path, H5File::Mode::read);
    } catch (const Error& e) {
      fail("load_checkpoint '", path, "': not a readable checkpoint (", e.what(), ")");
    }
  }();
  IPUML_CHECK(f.has_attr("/", "ipuml_checkpoint"), "load_checkpoint '", path,
              "': not an ipuml checkpoint (the HDF5 file has no ipuml_checkpoint attribute)");
  const int64_t format = f.attr_int("/", "ipuml_checkpoint");
  IPUML_CHECK(format == kCheckpointFormat, "load_checkpoint '", path, "': checkpoint format ",
              format, " is not supported (this build reads format ", kCheckpointFormat, ")");
  IPUML_CHECK(f.is_group(kModelGroup), "load_checkpoint '", path, "': no /", kModelGroup, " group");
  IPUML_CHECK(f.has_attr("/", "step"), "load_checkpoint '", path, "': no step attribute");
  return f;
}

inline nn::StateDict read_state(const H5File& f, const std::string& path,
                                const std::string& group) {
  nn::StateDict out;
  for (const auto& [key, p] : list_state(f, path, group))
    out.emplace_back(key, read_tensor(f, path, key, p));
  return out;
}

}  // namespace ckpt_detail

IPUML_INLINE void save_checkpoint(const std::string& path, const nn::Module& module,
                                  const nn::StateDict& optimizer_state, int64_t step) {
  const nn::StateDict model = module.state_dict();
  atomic_write(path, [&](H5File& f) {
    f.set_attr("/", "ipuml_checkpoint", kCheckpointFormat);
    f.set_attr("/", "step", step);
    ckpt_detail::write_state(f, path, ckpt_detail::kModelGroup, model);
    ckpt_detail::write_state(f, path, ckpt_detail::kOptimizerGroup, optimizer_state);
  });
}

IPUML_INLINE Checkpoint read_checkpoint(const std::string& path) {
  H5File f = ckpt_detail::open_checkpoint(path);
  Checkpoint c;
  c.step = f.attr_int("/", "step");
  c.model = ckpt_detail::read_state(f, path, ckpt_detail::kModelGroup);
  if (f.is_group(ckpt_detail::kOptimizerGroup))
    c.optimizer = ckpt_detail::read_state(f, path, ckpt_detail::kOptimizerGroup);
  return c;
}

IPUML_INLINE int64_t load_checkpoint(const std::string& path, nn::Module& module,
                                     nn::StateDict* optimizer_state) {
  H5File f = ckpt_detail::open_checkpoint(path);
  const int64_t step = f.attr_int("/", "step");
  const nn::StateDict mine = module.state_dict();
  const std::string root = ckpt_detail::kModelGroup;

  // Validate every key, shape and dtype first so a bad file leaves the module untouched.
  std::set<std::string> wanted;
  nn::StateDict loaded;
  for (const auto& [key, t] : mine) {
    wanted.insert(key);
    const std::string p = root + "/" + ckpt_detail::key_to_path(path, key);
    IPUML_CHECK(f.is_dataset(p), "load_checkpoint '", path, "': missing '", key,
                "' (the module has it, the checkpoint does not)");
    Tensor v = ckpt_detail::read_tensor(f, path, key, p);
    IPUML_CHECK(v.dtype() == t.dtype(), "load_checkpoint '", path, "': '", key, "' is ",
                dtype_name(v.dtype()), " in the checkpoint but ", dtype_name(t.dtype()),
                " in the module");
    IPUML_CHECK(v.shape() == t.shape(), "load_checkpoint '", path, "': '", key, "' has shape ",
                shape_str(v.shape()), " in the checkpoint but ", shape_str(t.shape()),
                " in the module");
    loaded.emplace_back(key, std::move(v));
  }
  for (const auto& [key, p] : ckpt_detail::list_state(f, path, root))
    IPUML_CHECK(wanted.count(key) != 0, "load_checkpoint '", path, "': unexpected '", key,
                "' (the checkpoint has it, the module does not)");

  nn::StateDict opt;
  if (optimizer_state) {
    IPUML_CHECK(f.is_group(ckpt_detail::kOptimizerGroup), "load_checkpoint '", path, "': no /",
                ckpt_detail::kOptimizerGroup, " group");
    opt = ckpt_detail::read_state(f, path, ckpt_detail::kOptimizerGroup);
  }

  module.load_state_dict(loaded, /*strict=*/true);
  if (optimizer_state) *optimizer_state = std::move(opt);
  return step;
}

}  // namespace ipuml::io
