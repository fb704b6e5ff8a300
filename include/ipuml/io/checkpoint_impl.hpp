// Bodies of the HDF5 checkpoints (compiled once in src/lib/io_checkpoint.cpp).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <new>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ipuml/core/error.hpp>
#include <ipuml/core/sha256.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/io/file.hpp>
#include <ipuml/io/hdf5.hpp>
#include <ipuml/io/isolated.hpp>
#include <ipuml/tensor/dispatch.hpp>

namespace ipuml::io {

namespace ckpt_detail {

inline constexpr const char* kModelGroup = "model";
inline constexpr const char* kOptimizerGroup = "optimizer";
inline constexpr const char* kTrainingGroup = "training";
inline constexpr const char* kRecordMagic = "ipuml checkpoint integrity v1\n";
// Sane limits for what a file may describe, checked before anything is allocated.
inline constexpr int kMaxRank = 32;
inline constexpr int kMaxDepth = 64;
inline constexpr size_t kMaxLinks = size_t{1} << 20;
inline constexpr int64_t kMaxStep = int64_t{1} << 53;

inline Sha256Digest digest_of(const Tensor& c) {
  return sha256(c.raw_data(), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
}

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
    f.set_attr(path, "sha256", to_hex(digest_of(c)));
  }
}

// The integrity record: what the user block of a checkpoint holds. `body` is every byte after
// the user block.
inline std::string integrity_record(uint64_t body_bytes, const Sha256Digest& body_sha) {
  return detail::str(kRecordMagic, "body-bytes ", body_bytes, "\nbody-sha256 ", to_hex(body_sha),
                     "\n");
}

// Size and SHA-256 of the bytes of `f` from `offset` to its end.
inline Sha256Digest hash_from(const RegularFile& f, uint64_t offset, const std::string& who) {
  Sha256 h;
  std::vector<uint8_t> buf(size_t{1} << 20);
  for (uint64_t at = offset; at < f.size();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), f.size() - at));
    f.read_at(at, buf.data(), n, who);
    h.update(buf.data(), n);
    at += n;
  }
  return h.finish();
}

// Written after libhdf5 closed the temporary file: the record covers the final bytes.
inline void seal(const std::string& tmp) {
  const RegularFile f = open_regular_file(tmp, "save_checkpoint");
  IPUML_CHECK(f.size() >= kCheckpointUserBlock, "save_checkpoint '", tmp, "': only ", f.size(),
              " bytes were written, expected a ", kCheckpointUserBlock, "-byte user block first");
  const std::string record = integrity_record(
      f.size() - kCheckpointUserBlock, hash_from(f, kCheckpointUserBlock, "save_checkpoint"));
  std::string block(kCheckpointUserBlock, '\0');
  std::memcpy(block.data(), record.data(), record.size());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
  IPUML_CHECK(fd >= 0, "save_checkpoint '", tmp,
              "': cannot reopen to seal: ", std::strerror(errno));
  const ssize_t n = ::pwrite(fd, block.data(), block.size(), 0);
  const int err = errno;
  ::close(fd);
  IPUML_CHECK(n == static_cast<ssize_t>(block.size()), "save_checkpoint '", tmp,
              "': cannot write the integrity record: ", n < 0 ? std::strerror(err) : "short write");
}

// What the integrity check found: whether the record was there and matched, and the budget of
// bytes the file's tensors may take in memory.
struct Verified {
  bool verified = false;
  uint64_t byte_budget = 0;
  RegularFile file;  // kept open until libhdf5 has opened the same file
};

// Checks the integrity record before libhdf5 sees a byte of the file, so a corrupt, truncated
// or crafted file never reaches libhdf5's metadata parser.
inline Verified verify_file(const std::string& path, const CheckpointReadOptions& options) {
  Verified v;
  v.file = open_regular_file(path, "load_checkpoint");
  const RegularFile& f = v.file;
  const std::string magic = kRecordMagic;
  std::string head(std::min<uint64_t>(kCheckpointUserBlock, f.size()), '\0');
  if (!head.empty()) f.read_at(0, head.data(), head.size(), "load_checkpoint");
  // What is wrong with the record, if anything; allow_unverified then reads the file as a
  // foreign one (an ipuml file edited by another tool keeps a stale record).
  const std::string problem = [&]() -> std::string {
    if (head.compare(0, magic.size(), magic) != 0)
      return detail::str("no ipuml integrity record in its first ", kCheckpointUserBlock,
                         " bytes (not written by ipuml's save_checkpoint, written before format 2, "
                         "or damaged)");
    if (head.size() < kCheckpointUserBlock)
      return detail::str("truncated: the file ends inside its integrity record (", f.size(),
                         " bytes)");
    // "body-bytes N\nbody-sha256 HEX\n" exactly, then zero padding.
    const size_t nul = head.find('\0');
    const std::string text = head.substr(magic.size(), nul - magic.size());
    const bool padded =
        nul != std::string::npos && head.find_first_not_of('\0', nul) == std::string::npos;
    const std::string k1 = "body-bytes ", k2 = "\nbody-sha256 ";
    const size_t eol = text.find('\n');
    const std::string digits = text.compare(0, k1.size(), k1) == 0 && eol != std::string::npos
                                   ? text.substr(k1.size(), eol - k1.size())
                                   : std::string();
    const std::string hex = eol != std::string::npos && text.size() > eol + k2.size()
                                ? text.substr(eol + k2.size(), 64)
                                : std::string();
    if (!padded || digits.empty() || digits.size() > 19 ||
        digits.find_first_not_of("0123456789") != std::string::npos || hex.size() != 64 ||
        hex.find_first_not_of("0123456789abcdef") != std::string::npos ||
        text != k1 + digits + k2 + hex + "\n")
      return "its integrity record is damaged (expected \"body-bytes N\" and \"body-sha256 "
             "HEX\" lines after the first)";
    const uint64_t body = std::stoull(digits), actual = f.size() - kCheckpointUserBlock;
    if (body != actual)
      return detail::str(actual < body ? "truncated" : "extended", ": the integrity record says ",
                         body, " bytes follow the user block, the file has ", actual);
    const std::string got = to_hex(hash_from(f, kCheckpointUserBlock, "load_checkpoint"));
    if (got != hex)
      return detail::str("corrupt: the SHA-256 of its contents is ", got,
                         ", its integrity record says ", hex);
    return {};
  }();
  if (problem.empty()) {
    v.verified = true;
    v.byte_budget = f.size() - kCheckpointUserBlock;
    return v;
  }
  IPUML_CHECK(options.allow_unverified, "load_checkpoint '", path, "': ", problem,
              "; pass allow_unverified (--allow-unverified) to read a file from another tool "
              "with bounds checks only");
  // Foreign files may compress their datasets: allow a generous ratio, still bounded.
  v.byte_budget = f.size() * 64 + (uint64_t{1} << 20);
  return v;
}

// Bytes a dataset of `shape` and element size takes, or -1 when the shape is malformed or the
// count overflows.
inline int64_t bytes_of(const std::vector<int64_t>& shape, size_t elem) {
  int64_t n = static_cast<int64_t>(elem);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  return n;
}

// Counts NaN and infinity in a float tensor's storage (float16/bfloat16 by their bit patterns).
inline int64_t non_finite(const Tensor& t) {
  const int64_t n = t.numel();
  int64_t bad = 0;
  if (t.dtype() == kFloat32) {
    const float* p = static_cast<const float*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) bad += !std::isfinite(p[i]);
  } else if (t.dtype() == kFloat16 || t.dtype() == kBFloat16) {
    const uint16_t mask = t.dtype() == kFloat16 ? 0x7c00 : 0x7f80;
    const uint16_t* p = static_cast<const uint16_t*>(t.raw_data());
    for (int64_t i = 0; i < n; ++i) bad += (p[i] & mask) == mask;
  }
  return bad;
}

// Every dataset under `group`, as (key, path), in saved order.
inline std::vector<std::pair<std::string, std::string>> list_state(const H5File& f,
                                                                   const std::string& file,
                                                                   const std::string& group) {
  std::vector<std::pair<int64_t, std::pair<std::string, std::string>>> found;
  std::vector<std::pair<std::string, int>> pending{{group, 1}};
  size_t visited = 0;
  while (!pending.empty()) {
    const auto [g, depth] = pending.back();
    pending.pop_back();
    // open_checkpoint refused cycles and aliases; these bounds hold even without that check.
    IPUML_CHECK(depth <= kMaxDepth, "load_checkpoint '", file, "': /", g, " lies more than ",
                kMaxDepth, " groups deep");
    for (const std::string& child : f.list(g)) {
      IPUML_CHECK(++visited <= kMaxLinks, "load_checkpoint '", file, "': more than ", kMaxLinks,
                  " objects under /", group);
      const std::string p = g + "/" + child;
      if (f.is_group(p)) {
        pending.push_back({p, depth + 1});
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

// What a reader needs to know about the file it reads from.
struct Source {
  const H5File& f;
  const std::string& file;
  bool verified = false;
  uint64_t byte_budget = 0;  // what the file's tensors may still take in memory
};

// Reads one dataset into a new tensor of the dtype it was saved with. Shape, dtype and size are
// checked (against `expect` when given, and against the file's budget) before any allocation;
// the checksum and every float value after the read.
inline Tensor read_tensor(Source& src, const std::string& key, const std::string& p,
                          const Tensor* expect = nullptr) {
  const H5File& f = src.f;
  const std::string& file = src.file;
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
  IPUML_CHECK(info.shape.size() <= static_cast<size_t>(kMaxRank), "load_checkpoint '", file, "': '",
              key, "' has ", info.shape.size(), " dimensions, more than ", kMaxRank);
  if (expect) {
    IPUML_CHECK(dt == expect->dtype(), "load_checkpoint '", file, "': '", key, "' is ",
                dtype_name(dt), " in the checkpoint but ", dtype_name(expect->dtype()),
                " in the module");
    IPUML_CHECK(info.shape == expect->shape(), "load_checkpoint '", file, "': '", key,
                "' has shape ", shape_str(info.shape), " in the checkpoint but ",
                shape_str(expect->shape()), " in the module");
  }
  const int64_t bytes = bytes_of(info.shape, dtype_size(dt));
  IPUML_CHECK(bytes >= 0 && static_cast<uint64_t>(bytes) <= src.byte_budget, "load_checkpoint '",
              file, "': '", key, "' claims shape ", shape_str(info.shape), " (",
              bytes < 0 ? std::string("more than 2^63") : std::to_string(bytes),
              " bytes), more than the file can hold (", src.byte_budget, " bytes ",
              src.verified ? "left in the file" : "at most, allowing for compression", ")");
  src.byte_budget -= static_cast<uint64_t>(bytes);
  // save_checkpoint writes plain contiguous data; reading anything else (chunk indexes,
  // filters) is left to files the caller chose to trust.
  IPUML_CHECK(!src.verified || f.is_plain_contiguous(p, static_cast<uint64_t>(bytes)),
              "load_checkpoint '", file, "': '", key,
              "' is not stored as save_checkpoint stores tensors (contiguous, unfiltered, ", bytes,
              " bytes)");
  Tensor t = [&] {
    try {
      return empty(info.shape, dt);
    } catch (const std::bad_alloc&) {
      fail("load_checkpoint '", file, "': '", key, "': out of memory allocating ", bytes,
           " bytes for shape ", shape_str(info.shape));
    }
  }();
  f.read(p, info.dtype, info.shape, t.raw_data());
  const bool has_sum = f.has_attr(p, "sha256");
  IPUML_CHECK(has_sum || !src.verified, "load_checkpoint '", file, "': '", key,
              "' has no sha256 attribute (every tensor of a format ", kCheckpointFormat,
              " checkpoint has one)");
  if (has_sum) {
    const std::string want = f.attr_string(p, "sha256"), got = to_hex(digest_of(t));
    IPUML_CHECK(got == want, "load_checkpoint '", file, "': '", key,
                "' is corrupt: the SHA-256 of its values is ", got, ", its checksum says ", want);
  }
  const int64_t bad = non_finite(t);
  IPUML_CHECK(bad == 0, "load_checkpoint '", file, "': '", key, "' holds ", bad,
              " non-finite values (NaN or infinity) of ", t.numel(),
              "; a diverged run cannot be resumed");
  return t;
}

// Optimizer hyperparameters and counters kept as state must be non-negative (finiteness is
// checked for every tensor).
inline void check_optimizer_entry(const std::string& file, const std::string& key,
                                  const Tensor& t) {
  const std::string last = key.substr(key.rfind('.') + 1);
  static const std::set<std::string> non_negative = {
      "lr", "step", "eps", "momentum", "weight_decay", "beta1", "beta2", "betas", "max_grad_norm"};
  if (!non_negative.count(last)) return;
  IPUML_CHECK(is_floating(t.dtype()) || t.dtype() == kInt32 || t.dtype() == kInt64,
              "load_checkpoint '", file, "': optimizer '", key, "' is ", dtype_name(t.dtype()),
              ", expected a number");
  const Tensor v = t.to(kFloat32).contiguous();
  const float* p = static_cast<const float*>(v.raw_data());
  for (int64_t i = 0; i < v.numel(); ++i)
    IPUML_CHECK(p[i] >= 0.0f, "load_checkpoint '", file, "': optimizer '", key, "' is ", p[i],
                ", expected >= 0");
}

inline H5File open_checkpoint(const std::string& path, const Verified& v) {
  H5File f = [&] {
    try {
      return H5File(path, H5File::Mode::read);
    } catch (const Error& e) {
      fail("load_checkpoint '", path, "': not a readable checkpoint (", e.what(), ")");
    }
  }();
  // What ipuml writes holds no variable-length strings: a verified file's are refused unread.
  f.set_fixed_length_strings(v.verified);
  // libhdf5 opened the file by name: it must still be the file that was verified.
  struct stat was {
  }, now{};
  IPUML_CHECK(::fstat(v.file.fd(), &was) == 0 && ::stat(path.c_str(), &now) == 0 &&
                  was.st_dev == now.st_dev && was.st_ino == now.st_ino &&
                  was.st_size == now.st_size,
              "load_checkpoint '", path, "': the file was replaced while it was being read");
  f.check_plain_tree(kMaxLinks, kMaxDepth);
  IPUML_CHECK(f.has_attr("/", "ipuml_checkpoint"), "load_checkpoint '", path,
              "': not an ipuml checkpoint (the HDF5 file has no ipuml_checkpoint attribute)");
  const int64_t format = f.attr_int("/", "ipuml_checkpoint");
  IPUML_CHECK(format == kCheckpointFormat || (format == 1 && !v.verified), "load_checkpoint '",
              path, "': checkpoint format ", format, " is not supported (this build reads format ",
              kCheckpointFormat, ", and format 1 with allow_unverified)");
  IPUML_CHECK(f.is_group(kModelGroup), "load_checkpoint '", path, "': no /", kModelGroup, " group");
  IPUML_CHECK(f.has_attr("/", "step"), "load_checkpoint '", path, "': no step attribute");
  const int64_t step = f.attr_int("/", "step");
  IPUML_CHECK(step >= 0 && step <= kMaxStep, "load_checkpoint '", path, "': step ", step,
              " is outside [0, 2^53]");
  return f;
}

// The optimizer record's attributes: a type made of letters, digits and '_' (an optimizer's
// name), and as many non-negative group sizes as the file could describe.
inline bool is_optimizer_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}
inline void write_optimizer_record(H5File& f, const std::string& file, const OptimizerRecord& r) {
  if (r.type.empty()) return;
  IPUML_CHECK(is_optimizer_name(r.type), "save_checkpoint '", file, "': optimizer type '", r.type,
              "' cannot be stored (expected at most 64 letters, digits and '_')");
  f.set_attr(kOptimizerGroup, "type", r.type);
  f.set_attr(kOptimizerGroup, "group_sizes", r.group_sizes);
}
inline OptimizerRecord read_optimizer_record(const H5File& f, const std::string& file) {
  OptimizerRecord r;
  if (!f.is_group(kOptimizerGroup) || !f.has_attr(kOptimizerGroup, "type")) return r;
  r.type = f.attr_string(kOptimizerGroup, "type");
  IPUML_CHECK(is_optimizer_name(r.type), "load_checkpoint '", file,
              "': the optimizer type attribute is not an optimizer's name (expected 1 to 64 "
              "letters, digits and '_')");
  IPUML_CHECK(f.has_attr(kOptimizerGroup, "group_sizes"), "load_checkpoint '", file,
              "': the optimizer record has a type but no group_sizes attribute");
  r.group_sizes = f.attr_ints(kOptimizerGroup, "group_sizes");
  IPUML_CHECK(r.group_sizes.size() <= kMaxLinks, "load_checkpoint '", file,
              "': ", r.group_sizes.size(), " optimizer parameter groups, more than ", kMaxLinks);
  for (int64_t n : r.group_sizes)
    IPUML_CHECK(n >= 0 && n <= static_cast<int64_t>(kMaxLinks), "load_checkpoint '", file,
                "': an optimizer parameter group of ", n, " parameters (expected 0 to ", kMaxLinks,
                ")");
  return r;
}

// The integrity record proves a file was not damaged since it was sealed, not that ipuml wrote
// it, and libhdf5 1.10 parses some crafted files into crashes or endless loops. So what the
// read does with libhdf5's metadata (and, for a file that is not ipuml's, one row of each
// dataset: chunk indexes and filters) is done first in a child process. Errors there are left
// for the read itself to report, in its own words.
inline void probe_in_child(const std::string& path, const Verified& v) {
  io::run_isolated(detail::str("load_checkpoint '", path, "'"), [&] {
    try {
      const H5File f = open_checkpoint(path, v);
      for (const char* group : {kModelGroup, kOptimizerGroup, kTrainingGroup}) {
        if (!f.is_group(group)) continue;
        for (const auto& [key, p] : list_state(f, path, group)) {
          const H5DatasetInfo info = f.info(p);
          if (f.has_attr(p, "dtype")) (void)f.attr_string(p, "dtype");
          const size_t elem = dtype_size(info.dtype);
          const int64_t bytes = bytes_of(info.shape, elem);
          if (elem == 0 || bytes < 0 || static_cast<uint64_t>(bytes) > v.byte_budget) continue;
          if (v.verified) {
            (void)f.is_plain_contiguous(p, static_cast<uint64_t>(bytes));
          } else if (!info.shape.empty() && info.shape[0] > 0) {
            std::vector<char> row(static_cast<size_t>(bytes / info.shape[0]));
            f.read_rows(p, info.dtype, 0, 1, row.data());
          }
        }
      }
      (void)read_optimizer_record(f, path);
    } catch (const Error&) {
    }
  });
}

inline nn::StateDict read_state(Source& src, const std::string& group) {
  nn::StateDict out;
  for (const auto& [key, p] : list_state(src.f, src.file, group)) {
    out.emplace_back(key, read_tensor(src, key, p));
    if (group == kOptimizerGroup) check_optimizer_entry(src.file, key, out.back().second);
  }
  return out;
}

}  // namespace ckpt_detail

IPUML_INLINE void save_checkpoint(const std::string& path, const nn::Module& module,
                                  const nn::StateDict& optimizer_state, int64_t step,
                                  const nn::StateDict& training_state,
                                  const OptimizerRecord& optimizer_record) {
  IPUML_CHECK(step >= 0 && step <= ckpt_detail::kMaxStep, "save_checkpoint '", path, "': step ",
              step, " is outside [0, 2^53]");
  const nn::StateDict model = module.state_dict();
  atomic_write(
      path,
      [&](H5File& f) {
        f.set_fixed_length_strings(true);  // nothing in libhdf5's global heap
        f.set_attr("/", "ipuml_checkpoint", kCheckpointFormat);
        f.set_attr("/", "step", step);
        ckpt_detail::write_state(f, path, ckpt_detail::kModelGroup, model);
        ckpt_detail::write_state(f, path, ckpt_detail::kOptimizerGroup, optimizer_state);
        ckpt_detail::write_optimizer_record(f, path, optimizer_record);
        ckpt_detail::write_state(f, path, ckpt_detail::kTrainingGroup, training_state);
      },
      kCheckpointUserBlock, ckpt_detail::seal);
}

IPUML_INLINE Checkpoint read_checkpoint(const std::string& path,
                                        const CheckpointReadOptions& options) {
  const ckpt_detail::Verified v = ckpt_detail::verify_file(path, options);
  ckpt_detail::probe_in_child(path, v);
  H5File f = ckpt_detail::open_checkpoint(path, v);
  ckpt_detail::Source src{f, path, v.verified, v.byte_budget};
  Checkpoint c;
  c.verified = v.verified;
  c.step = f.attr_int("/", "step");
  c.model = ckpt_detail::read_state(src, ckpt_detail::kModelGroup);
  if (f.is_group(ckpt_detail::kOptimizerGroup)) {
    c.optimizer = ckpt_detail::read_state(src, ckpt_detail::kOptimizerGroup);
    c.optimizer_record = ckpt_detail::read_optimizer_record(f, path);
  }
  if (f.is_group(ckpt_detail::kTrainingGroup))
    c.training = ckpt_detail::read_state(src, ckpt_detail::kTrainingGroup);
  return c;
}

IPUML_INLINE int64_t load_checkpoint(const std::string& path, nn::Module& module,
                                     nn::StateDict* optimizer_state, nn::StateDict* training_state,
                                     const CheckpointReadOptions& options) {
  const ckpt_detail::Verified v = ckpt_detail::verify_file(path, options);
  ckpt_detail::probe_in_child(path, v);
  H5File f = ckpt_detail::open_checkpoint(path, v);
  ckpt_detail::Source src{f, path, v.verified, v.byte_budget};
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
    loaded.emplace_back(key, ckpt_detail::read_tensor(src, key, p, &t));
  }
  for (const auto& [key, p] : ckpt_detail::list_state(f, path, root))
    IPUML_CHECK(wanted.count(key) != 0, "load_checkpoint '", path, "': unexpected '", key,
                "' (the checkpoint has it, the module does not)");

  nn::StateDict opt, training;
  if (optimizer_state) {
    IPUML_CHECK(f.is_group(ckpt_detail::kOptimizerGroup), "load_checkpoint '", path, "': no /",
                ckpt_detail::kOptimizerGroup, " group");
    opt = ckpt_detail::read_state(src, ckpt_detail::kOptimizerGroup);
  }
  if (training_state && f.is_group(ckpt_detail::kTrainingGroup))
    training = ckpt_detail::read_state(src, ckpt_detail::kTrainingGroup);

  module.load_state_dict(loaded, /*strict=*/true);
  if (optimizer_state) *optimizer_state = std::move(opt);
  if (training_state) *training_state = std::move(training);
  return step;
}

}  // namespace ipuml::io
