// Bodies of <ipuml/io/hdf5.hpp>: compiled once in src/lib/io_hdf5.cpp, or included by the
// header in header-only mode. The only place that includes <hdf5.h>.
#pragma once

#include <ipuml/io/file.hpp>
#include <ipuml/io/hdf5.hpp>
#include <ipuml/io/isolated.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <tuple>
#include <utility>

namespace ipuml::io {

static_assert(std::is_same_v<hid_t, int64_t>,
              "ipuml::io::H5File stores hid_t as int64_t (HDF5 >= 1.10)");

namespace h5detail {

// The attribute that marks uint16/uint8 storage as bfloat16/bool, which HDF5 cannot express.
inline constexpr const char* kDtypeTag = "ipuml_dtype";

// Owns one hid_t. Predefined ids (H5T_NATIVE_FLOAT, ...) are wrapped without a closer.
class H5Handle {
 public:
  H5Handle() = default;
  H5Handle(hid_t id, herr_t (*closer)(hid_t)) : id_(id), closer_(closer) {}
  H5Handle(H5Handle&& o) noexcept : id_(std::exchange(o.id_, -1)), closer_(o.closer_) {}
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, -1);
      closer_ = o.closer_;
    }
    return *this;
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  ~H5Handle() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && closer_) closer_(id_);
    id_ = -1;
  }

 private:
  hid_t id_ = -1;
  herr_t (*closer_)(hid_t) = nullptr;
};

inline H5Handle borrowed(hid_t id) { return H5Handle(id, nullptr); }

// HDF5 prints its error stack to stderr by default; ipuml reports through Error instead. The
// setting is per thread in thread-safe builds, so every entry point a thread may reach first
// calls this.
inline void silence_hdf5() {
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

// The most specific message on HDF5's error stack (e.g. "truncated file: eof = ..."), then
// clears it so the next failure starts fresh.
inline std::string hdf5_error_text() {
  std::string text;
  auto walk = [](unsigned, const H5E_error2_t* err, void* data) -> herr_t {
    if (err && err->desc && *err->desc) *static_cast<std::string*>(data) = err->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? std::string("no detail from HDF5") : text;
}

// "a/b", "/a/b/" and "a//b" all name "/a/b"; "" and "/" name the root group.
inline std::string normalize(const std::string& path) {
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = i;
    while (j < path.size() && path[j] != '/') ++j;
    if (j > i) out += "/" + path.substr(i, j - i);
    i = j;
  }
  return out.empty() ? std::string("/") : out;
}

inline std::string parent_of(const std::string& normalized) {
  size_t slash = normalized.rfind('/');
  return slash == 0 ? std::string("/") : normalized.substr(0, slash);
}

inline int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A 2-byte IEEE-style float type: float16 is (exponent 5, mantissa 10, bias 15), bfloat16 is
// (8, 7, 127). h5py builds its float16 the same way, so files interoperate.
inline H5Handle make_float2(size_t ebits, size_t mbits, size_t ebias) {
  H5Handle t(H5Tcopy(H5T_NATIVE_FLOAT), H5Tclose);
  if (!t.valid() || H5Tset_fields(t.get(), 15, mbits, ebits, 0, mbits) < 0 ||
      H5Tset_size(t.get(), 2) < 0 || H5Tset_ebias(t.get(), ebias) < 0)
    ipuml::fail("hdf5: cannot build a 2-byte float type (HDF5: ", hdf5_error_text(), ")");
  return t;
}

inline H5Handle string_type_variable() {
  H5Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!t.valid() || H5Tset_size(t.get(), H5T_VARIABLE) < 0 ||
      H5Tset_cset(t.get(), H5T_CSET_UTF8) < 0)
    ipuml::fail("hdf5: cannot build a string type (HDF5: ", hdf5_error_text(), ")");
  return t;
}

// Storage type for a dtype, and whether it needs the tag attribute.
inline H5Handle file_type(H5Dtype dtype) {
  switch (dtype) {
    case H5Dtype::float32:
      return borrowed(H5T_IEEE_F32LE);
    case H5Dtype::float64:
      return borrowed(H5T_IEEE_F64LE);
    case H5Dtype::float16:
      return make_float2(5, 10, 15);
    case H5Dtype::bfloat16:
      return borrowed(H5T_STD_U16LE);
    case H5Dtype::int8:
      return borrowed(H5T_STD_I8LE);
    case H5Dtype::int32:
      return borrowed(H5T_STD_I32LE);
    case H5Dtype::int64:
      return borrowed(H5T_STD_I64LE);
    case H5Dtype::uint8:
      return borrowed(H5T_STD_U8LE);
    case H5Dtype::uint16:
      return borrowed(H5T_STD_U16LE);
    case H5Dtype::boolean:
      return borrowed(H5T_STD_U8LE);
    case H5Dtype::other:
      break;
  }
  ipuml::fail("hdf5: dtype 'other' cannot be stored");
}

inline const char* tag_of(H5Dtype dtype) {
  if (dtype == H5Dtype::bfloat16) return "bfloat16";
  if (dtype == H5Dtype::boolean) return "bool";
  return nullptr;
}

// In-memory type for a dtype, given what the file stores (so that e.g. an h5py bool enum or a
// float-typed bfloat16 is read bit for bit rather than converted).
inline H5Handle memory_type(H5Dtype dtype, hid_t stored) {
  H5T_class_t cls = stored >= 0 ? H5Tget_class(stored) : H5T_NO_CLASS;
  switch (dtype) {
    case H5Dtype::float32:
      return borrowed(H5T_NATIVE_FLOAT);
    case H5Dtype::float64:
      return borrowed(H5T_NATIVE_DOUBLE);
    case H5Dtype::float16:
      return make_float2(5, 10, 15);
    case H5Dtype::bfloat16:
      return cls == H5T_FLOAT ? make_float2(8, 7, 127) : borrowed(H5T_NATIVE_UINT16);
    case H5Dtype::int8:
      return borrowed(H5T_NATIVE_INT8);
    case H5Dtype::int32:
      return borrowed(H5T_NATIVE_INT32);
    case H5Dtype::int64:
      return borrowed(H5T_NATIVE_INT64);
    case H5Dtype::uint8:
      return borrowed(H5T_NATIVE_UINT8);
    case H5Dtype::uint16:
      return borrowed(H5T_NATIVE_UINT16);
    case H5Dtype::boolean:
      return cls == H5T_ENUM ? H5Handle(H5Tcopy(stored), H5Tclose) : borrowed(H5T_NATIVE_UINT8);
    case H5Dtype::other:
      break;
  }
  ipuml::fail("hdf5: dtype 'other' cannot be read as numbers");
}

// Maps a stored type (plus the tag attribute, if any) to a dtype and a readable description.
inline std::pair<H5Dtype, std::string> classify(hid_t type, const std::string& tag) {
  H5T_class_t cls = H5Tget_class(type);
  size_t size = H5Tget_size(type);
  std::string bytes = std::to_string(size) + "-byte";
  if (cls == H5T_FLOAT) {
    if (size == 4) return {H5Dtype::float32, "float32"};
    if (size == 8) return {H5Dtype::float64, "float64"};
    if (size == 2) {
      size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
      if (esize == 5 && msize == 10) return {H5Dtype::float16, "float16"};
      if (esize == 8 && msize == 7) return {H5Dtype::bfloat16, "bfloat16"};
    }
    return {H5Dtype::other, bytes + " float"};
  }
  if (cls == H5T_INTEGER) {
    bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    if (is_signed && size == 1) return {H5Dtype::int8, "int8"};
    if (is_signed && size == 4) return {H5Dtype::int32, "int32"};
    if (is_signed && size == 8) return {H5Dtype::int64, "int64"};
    if (!is_signed && size == 1)
      return tag == "bool" ? std::pair{H5Dtype::boolean, std::string("bool")}
                           : std::pair{H5Dtype::uint8, std::string("uint8")};
    if (!is_signed && size == 2)
      return tag == "bfloat16" ? std::pair{H5Dtype::bfloat16, std::string("bfloat16")}
                               : std::pair{H5Dtype::uint16, std::string("uint16")};
    return {H5Dtype::other, std::string(is_signed ? "int" : "uint") + std::to_string(8 * size)};
  }
  if (cls == H5T_ENUM && size == 1 && H5Tget_nmembers(type) == 2) {
    // numpy bool as h5py writes it: enum {FALSE = 0, TRUE = 1} over int8.
    int8_t v = 1;
    if (H5Tenum_valueof(type, "TRUE", &v) >= 0 && v == 1) return {H5Dtype::boolean, "bool (enum)"};
    H5Eclear2(H5E_DEFAULT);
  }
  if (cls == H5T_STRING) {
    if (H5Tis_variable_str(type) > 0) return {H5Dtype::other, "string (variable length)"};
    return {H5Dtype::other, "string (fixed length " + std::to_string(size) + ")"};
  }
  const char* kind = cls == H5T_COMPOUND    ? "compound"
                     : cls == H5T_ARRAY     ? "array"
                     : cls == H5T_ENUM      ? "enum"
                     : cls == H5T_VLEN      ? "variable-length sequence"
                     : cls == H5T_OPAQUE    ? "opaque"
                     : cls == H5T_REFERENCE ? "reference"
                                            : "unknown";
  return {H5Dtype::other, bytes + " " + kind};
}

// Reads a string stored with `type` through `read(mem_type, buffer)`, whichever of variable
// or fixed length it is.
template <typename ReadFn>
std::string read_string_value(hid_t type, ReadFn&& read) {
  if (H5Tis_variable_str(type) > 0) {
    H5Handle mem = string_type_variable();
    char* p = nullptr;
    if (read(mem.get(), static_cast<void*>(&p)) < 0) return {};
    std::string s = p ? std::string(p) : std::string();
    if (p) H5free_memory(p);
    return s;
  }
  size_t size = H5Tget_size(type);
  H5Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.get(), size);
  H5Tset_strpad(mem.get(), H5Tget_strpad(type));
  std::string buf(size, '\0');
  if (read(mem.get(), static_cast<void*>(buf.data())) < 0) return {};
  if (H5Tget_strpad(type) == H5T_STR_SPACEPAD) {
    size_t end = buf.find_last_not_of(' ');
    buf.resize(end == std::string::npos ? 0 : end + 1);
  } else {
    buf.resize(std::strlen(buf.c_str()));
  }
  return buf;
}

// True when an HDF5 signature sits where the format allows one (offset 0, 512, 1024, ...): the
// check H5Fis_hdf5 makes, done here so "not HDF5" and "corrupt HDF5" get different messages.
inline bool has_hdf5_signature(const RegularFile& f) {
  static const char sig[8] = {'\211', 'H', 'D', 'F', '\r', '\n', '\032', '\n'};
  for (uint64_t off = 0; off + 8 <= f.size(); off = off ? off * 2 : 512) {
    char buf[8];
    if (::pread(f.fd(), buf, 8, static_cast<off_t>(off)) != 8) return false;
    if (std::memcmp(buf, sig, 8) == 0) return true;
  }
  return false;
}

}  // namespace h5detail

// ---------------------------------------------------------------------------------------------

IPUML_INLINE const char* dtype_name(H5Dtype dtype) {
  switch (dtype) {
    case H5Dtype::float32:
      return "float32";
    case H5Dtype::float64:
      return "float64";
    case H5Dtype::float16:
      return "float16";
    case H5Dtype::bfloat16:
      return "bfloat16";
    case H5Dtype::int8:
      return "int8";
    case H5Dtype::int32:
      return "int32";
    case H5Dtype::int64:
      return "int64";
    case H5Dtype::uint8:
      return "uint8";
    case H5Dtype::uint16:
      return "uint16";
    case H5Dtype::boolean:
      return "bool";
    case H5Dtype::other:
      return "other";
  }
  return "invalid";
}

IPUML_INLINE size_t dtype_size(H5Dtype dtype) {
  switch (dtype) {
    case H5Dtype::float64:
    case H5Dtype::int64:
      return 8;
    case H5Dtype::float32:
    case H5Dtype::int32:
      return 4;
    case H5Dtype::float16:
    case H5Dtype::bfloat16:
    case H5Dtype::uint16:
      return 2;
    case H5Dtype::int8:
    case H5Dtype::uint8:
    case H5Dtype::boolean:
      return 1;
    case H5Dtype::other:
      return 0;
  }
  return 0;
}

IPUML_INLINE int64_t H5DatasetInfo::numel() const { return h5detail::numel_of(shape); }

// --- file -----------------------------------------------------------------------------------

IPUML_INLINE H5File::H5File(const std::string& path, Mode mode, size_t userblock_bytes)
    : path_(path), mode_(mode) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::silence_hdf5();
  // STRONG: closing the file closes everything in it, so close() really releases the file
  // (atomic_write renames it next).
  h5detail::H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
  if (mode == Mode::truncate) {
    IPUML_CHECK(userblock_bytes == 0 ||
                    (userblock_bytes >= 512 && (userblock_bytes & (userblock_bytes - 1)) == 0),
                "hdf5: cannot create '", path, "': a user block of ", userblock_bytes,
                " bytes is not 0 or a power of two >= 512");
    h5detail::H5Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
    if (userblock_bytes) H5Pset_userblock(fcpl.get(), userblock_bytes);
    id_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get());
    if (id_ < 0)
      ipuml::fail("hdf5: cannot create '", path, "' (HDF5: ", h5detail::hdf5_error_text(), ")");
    return;
  }
  // Opened by us first: a FIFO, device or directory is refused without blocking, and a file
  // this user cannot read is reported as such rather than as a corrupt one.
  const RegularFile file = open_regular_file(path, "hdf5: cannot open");
  if (!h5detail::has_hdf5_signature(file))
    ipuml::fail("hdf5: cannot open '", path, "': not an HDF5 file (no HDF5 signature in its ",
                file.size(), " bytes; truncated, corrupt or another format)");
  id_ = H5Fopen(path.c_str(), mode == Mode::read ? H5F_ACC_RDONLY : H5F_ACC_RDWR, fapl.get());
  if (id_ < 0)
    ipuml::fail("hdf5: cannot open '", path,
                "': the HDF5 file is truncated or corrupt (HDF5: ", h5detail::hdf5_error_text(),
                ")");
}

IPUML_INLINE H5File::H5File(H5File&& other) noexcept
    : path_(std::move(other.path_)),
      mode_(other.mode_),
      fixed_strings_(other.fixed_strings_),
      id_(std::exchange(other.id_, -1)) {}

IPUML_INLINE H5File& H5File::operator=(H5File&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0) {
      const ForkFence fence;
      H5Fclose(id_);
    }
    path_ = std::move(other.path_);
    mode_ = other.mode_;
    fixed_strings_ = other.fixed_strings_;
    id_ = std::exchange(other.id_, -1);
  }
  return *this;
}

IPUML_INLINE H5File::~H5File() {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  if (id_ >= 0) H5Fclose(id_);
}

IPUML_INLINE void H5File::flush() {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  IPUML_CHECK(id_ >= 0, "hdf5: flush '", path_, "': the file is closed");
  if (mode_ == Mode::read) return;
  if (H5Fflush(id_, H5F_SCOPE_GLOBAL) < 0)
    ipuml::fail("hdf5: flush '", path_, "' failed (HDF5: ", h5detail::hdf5_error_text(), ")");
}

IPUML_INLINE void H5File::close() {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  if (id_ < 0) return;
  h5detail::silence_hdf5();
  hid_t id = std::exchange(id_, -1);
  if (H5Fclose(id) < 0)
    ipuml::fail("hdf5: close '", path_, "' failed (HDF5: ", h5detail::hdf5_error_text(), ")");
}

IPUML_INLINE std::string H5File::where(const std::string& path) const {
  return "'" + path_ + ":" + h5detail::normalize(path) + "'";
}

IPUML_INLINE void H5File::check_writable(const char* op, const std::string& path) const {
  h5detail::silence_hdf5();
  IPUML_CHECK(id_ >= 0, "hdf5: ", op, " ", where(path), ": the file is closed");
  IPUML_CHECK(mode_ != Mode::read, "hdf5: ", op, " ", where(path), ": the file is open read-only");
}

IPUML_INLINE void H5File::check_count(const std::string& path, const std::vector<int64_t>& shape,
                                      size_t count) const {
  IPUML_CHECK(h5detail::numel_of(shape) == static_cast<int64_t>(count), "hdf5: write ", where(path),
              ": shape ", shape, " holds ", h5detail::numel_of(shape), " elements but ", count,
              " were given");
}

// --- structure ------------------------------------------------------------------------------

IPUML_INLINE bool H5File::exists(const std::string& path) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::silence_hdf5();
  IPUML_CHECK(id_ >= 0, "hdf5: exists ", where(path), ": the file is closed");
  std::string full = h5detail::normalize(path);
  if (full == "/") return true;
  // H5Lexists fails rather than answers when a parent is missing, so walk down from the root.
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = full.find('/', pos + 1);
    std::string prefix = full.substr(0, pos);
    if (H5Lexists(id_, prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
  }
  htri_t resolves =
      H5Oexists_by_name(id_, full.c_str(), H5P_DEFAULT);  // false for dangling soft links
  H5Eclear2(H5E_DEFAULT);
  return resolves > 0;
}

namespace h5detail {
inline H5I_type_t object_type(hid_t file, const std::string& full) {
  H5Handle obj(H5Oopen(file, full.c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return H5I_BADID;
  }
  return H5Iget_type(obj.get());
}
}  // namespace h5detail

IPUML_INLINE bool H5File::is_group(const std::string& path) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  return exists(path) && h5detail::object_type(id_, h5detail::normalize(path)) == H5I_GROUP;
}

IPUML_INLINE bool H5File::is_dataset(const std::string& path) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  return exists(path) && h5detail::object_type(id_, h5detail::normalize(path)) == H5I_DATASET;
}

IPUML_INLINE void H5File::create_group(const std::string& path) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("create_group", path);
  std::string full = h5detail::normalize(path);
  if (exists(full)) {
    IPUML_CHECK(is_group(full), "hdf5: create_group ", where(path),
                ": a dataset already has this name");
    return;
  }
  h5detail::H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  h5detail::H5Handle g(H5Gcreate2(id_, full.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                       H5Gclose);
  if (!g.valid())
    ipuml::fail("hdf5: create_group ", where(path),
                " failed (a parent may be a dataset; HDF5: ", h5detail::hdf5_error_text(), ")");
}

IPUML_INLINE std::vector<std::string> H5File::list(const std::string& group) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  IPUML_CHECK(id_ >= 0, "hdf5: list ", where(group), ": the file is closed");
  std::string full = h5detail::normalize(group);
  IPUML_CHECK(exists(full), "hdf5: list ", where(group), ": no such group");
  IPUML_CHECK(is_group(full), "hdf5: list ", where(group), ": found a dataset, expected a group");
  h5detail::H5Handle g(H5Gopen2(id_, full.c_str(), H5P_DEFAULT), H5Gclose);
  H5G_info_t ginfo;
  if (!g.valid() || H5Gget_info(g.get(), &ginfo) < 0)
    ipuml::fail("hdf5: list ", where(group), " failed (HDF5: ", h5detail::hdf5_error_text(), ")");
  std::vector<std::string> names;
  for (hsize_t i = 0; i < ginfo.nlinks; ++i) {
    ssize_t len =
        H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (len < 0)
      ipuml::fail("hdf5: list ", where(group), " failed (HDF5: ", h5detail::hdf5_error_text(), ")");
    std::string name(static_cast<size_t>(len) + 1, '\0');
    H5Lget_name_by_idx(g.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                       H5P_DEFAULT);
    name.resize(static_cast<size_t>(len));
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

IPUML_INLINE void H5File::remove(const std::string& path) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("remove", path);
  std::string full = h5detail::normalize(path);
  IPUML_CHECK(full != "/", "hdf5: remove ", where(path), ": the root group cannot be removed");
  IPUML_CHECK(exists(full), "hdf5: remove ", where(path), ": no such object");
  if (H5Ldelete(id_, full.c_str(), H5P_DEFAULT) < 0)
    ipuml::fail("hdf5: remove ", where(path), " failed (HDF5: ", h5detail::hdf5_error_text(), ")");
}

IPUML_INLINE void H5File::check_plain_tree(size_t max_links, int max_depth) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::silence_hdf5();
  IPUML_CHECK(id_ >= 0, "hdf5: check_plain_tree '", path_, "': the file is closed");
  struct Walk {
    size_t max_links;
    int max_depth;
    size_t links = 0;
#if H5_VERSION_GE(1, 12, 0)
    std::vector<H5O_token_t> seen;
#else
    std::vector<haddr_t> seen;
#endif
    std::string problem;
  } walk{max_links, max_depth};
  auto visit = [](hid_t, const char* name, const H5L_info_t* info, void* data) -> herr_t {
    auto& w = *static_cast<Walk*>(data);
    const std::string where = std::string("'/") + name + "'";
    if (++w.links > w.max_links) {
      w.problem = detail::str("more than ", w.max_links, " links");
      return -1;
    }
    const int depth = 1 + static_cast<int>(std::count(name, name + std::strlen(name), '/'));
    if (depth > w.max_depth) {
      w.problem = detail::str(where, " lies ", depth, " levels deep, more than ", w.max_depth);
      return -1;
    }
    if (info->type != H5L_TYPE_HARD) {
      w.problem = where + (info->type == H5L_TYPE_SOFT       ? " is a soft link"
                           : info->type == H5L_TYPE_EXTERNAL ? " is an external link"
                                                             : " is a user-defined link");
      return -1;
    }
#if H5_VERSION_GE(1, 12, 0)
    w.seen.push_back(info->u.token);
#else
    w.seen.push_back(info->u.address);
#endif
    return 0;
  };
  h5detail::H5Handle root(H5Gopen2(id_, "/", H5P_DEFAULT), H5Gclose);
  if (!root.valid())
    ipuml::fail("hdf5: '", path_,
                "': cannot open the root group (HDF5: ", h5detail::hdf5_error_text(), ")");
  const herr_t r = H5Lvisit(root.get(), H5_INDEX_NAME, H5_ITER_INC, visit, &walk);
  if (!walk.problem.empty()) {
    H5Eclear2(H5E_DEFAULT);
    ipuml::fail("hdf5: '", path_, "': ", walk.problem,
                " (expected a plain tree of groups and datasets)");
  }
  if (r < 0)
    ipuml::fail("hdf5: '", path_,
                "': cannot list its objects (corrupt file? HDF5: ", h5detail::hdf5_error_text(),
                ")");
    // HDF5 visits a group once however many links lead to it, but reports each link: two links
    // with one target are a cycle or an alias.
#if H5_VERSION_GE(1, 12, 0)
  auto less = [](const H5O_token_t& a, const H5O_token_t& b) {
    return std::memcmp(&a, &b, sizeof a) < 0;
  };
  auto same = [](const H5O_token_t& a, const H5O_token_t& b) {
    return std::memcmp(&a, &b, sizeof a) == 0;
  };
  std::sort(walk.seen.begin(), walk.seen.end(), less);
  const bool unique =
      std::adjacent_find(walk.seen.begin(), walk.seen.end(), same) == walk.seen.end();
#else
  std::sort(walk.seen.begin(), walk.seen.end());
  const bool unique = std::adjacent_find(walk.seen.begin(), walk.seen.end()) == walk.seen.end();
#endif
  IPUML_CHECK(unique, "hdf5: '", path_,
              "': an object is reached by more than one link (a link cycle or an alias; expected "
              "a plain tree of groups and datasets)");
}

// --- datasets -------------------------------------------------------------------------------

namespace h5detail {

// Opens an existing dataset or fails naming what is there instead (and, for a missing one,
// what its parent group holds, since the usual cause is a misspelt or renamed key).
inline H5Handle open_dataset(const H5File& f, hid_t file, const std::string& op,
                             const std::string& where, const std::string& path) {
  std::string full = normalize(path);
  if (!f.exists(full)) {
    std::string parent = parent_of(full);
    std::string hint;
    if (f.is_group(parent)) {
      std::vector<std::string> names = f.list(parent);
      if (names.empty()) {
        hint = "; the group '" + parent + "' is empty";
      } else {
        hint = "; the group '" + parent + "' holds: ";
        for (size_t i = 0; i < names.size() && i < 12; ++i) hint += (i ? ", " : "") + names[i];
        if (names.size() > 12) hint += ", ... (" + std::to_string(names.size()) + " in all)";
      }
    } else {
      hint = "; the group '" + parent + "' does not exist";
    }
    ipuml::fail("hdf5: ", op, " ", where, ": no such dataset", hint);
  }
  H5Handle ds(H5Dopen2(file, full.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) {
    H5Eclear2(H5E_DEFAULT);
    if (f.is_group(full))
      ipuml::fail("hdf5: ", op, " ", where, ": found a group, expected a dataset");
    ipuml::fail("hdf5: ", op, " ", where,
                ": cannot open the dataset (corrupt file? HDF5: ", hdf5_error_text(), ")");
  }
  return ds;
}

// Variable-length data lives in libhdf5's global heap, whose parser a crafted file can send
// into an endless loop (libhdf5 1.10.8, found by fuzzing): files opened with fixed-length
// strings only refuse such strings before reading them.
inline void refuse_variable(bool fixed_only, hid_t type, const std::string& what) {
  if (fixed_only && H5Tis_variable_str(type) > 0)
    ipuml::fail("hdf5: ", what,
                " is a variable-length string; this file is read with fixed-length strings only");
}

inline std::string read_tag(hid_t obj, bool fixed_only, const std::string& where) {
  if (H5Aexists(obj, kDtypeTag) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return {};
  }
  H5Handle attr(H5Aopen(obj, kDtypeTag, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) return {};
  H5Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) return {};
  refuse_variable(fixed_only, type.get(), where + " attribute '" + kDtypeTag + "'");
  return read_string_value(type.get(),
                           [&](hid_t mem, void* buf) { return H5Aread(attr.get(), mem, buf); });
}

inline std::vector<int64_t> extent(hid_t space) {
  H5S_class_t cls = H5Sget_simple_extent_type(space);
  if (cls == H5S_SCALAR) return {};
  if (cls == H5S_NULL) return {0};
  int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

inline void write_string_attr(hid_t obj, const char* name, const std::string& value,
                              bool fixed = false) {
  if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
  H5Eclear2(H5E_DEFAULT);
  H5Handle type = string_type_variable();
  if (fixed) {  // null-padded, as h5py's fixed-length bytes
    type = H5Handle(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), std::max<size_t>(value.size(), 1));
    H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
  }
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle attr(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* p = value.c_str();
  std::string padded = value;
  padded.resize(std::max<size_t>(value.size(), 1), '\0');
  const void* data = fixed ? static_cast<const void*>(padded.data()) : static_cast<const void*>(&p);
  if (!attr.valid() || H5Awrite(attr.get(), type.get(), data) < 0)
    ipuml::fail("hdf5: cannot write attribute '", name, "' (HDF5: ", hdf5_error_text(), ")");
}

inline H5Handle make_space(const std::vector<int64_t>& shape) {
  if (shape.empty()) return H5Handle(H5Screate(H5S_SCALAR), H5Sclose);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  return H5Handle(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
}

}  // namespace h5detail

IPUML_INLINE void H5File::write(const std::string& path, H5Dtype dtype,
                                const std::vector<int64_t>& shape, const void* data) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("write", path);
  std::string full = h5detail::normalize(path);
  IPUML_CHECK(full != "/", "hdf5: write ", where(path), ": a dataset needs a name");
  IPUML_CHECK(dtype != H5Dtype::other, "hdf5: write ", where(path),
              ": dtype 'other' cannot be stored");
  for (int64_t d : shape)
    IPUML_CHECK(d >= 0, "hdf5: write ", where(path), ": shape ", shape,
                " has a negative dimension");
  int64_t n = h5detail::numel_of(shape);
  IPUML_CHECK(n == 0 || data != nullptr, "hdf5: write ", where(path), ": no data for shape ",
              shape);
  if (exists(full)) remove(full);
  h5detail::H5Handle ftype = h5detail::file_type(dtype);
  h5detail::H5Handle mtype = h5detail::memory_type(dtype, ftype.get());
  h5detail::H5Handle space = h5detail::make_space(shape);
  h5detail::H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  h5detail::H5Handle ds(
      H5Dcreate2(id_, full.c_str(), ftype.get(), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  if (!space.valid() || !ds.valid())
    ipuml::fail("hdf5: write ", where(path), ": cannot create a ", dtype_name(dtype),
                " dataset of shape ", shape,
                " (a parent may be a dataset; HDF5: ", h5detail::hdf5_error_text(), ")");
  if (n > 0 && H5Dwrite(ds.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    ipuml::fail("hdf5: write ", where(path), " failed (HDF5: ", h5detail::hdf5_error_text(), ")");
  if (const char* tag = h5detail::tag_of(dtype))
    h5detail::write_string_attr(ds.get(), h5detail::kDtypeTag, tag, fixed_strings_);
}

IPUML_INLINE void H5File::write_string(const std::string& path, const std::string& value) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("write_string", path);
  std::string full = h5detail::normalize(path);
  IPUML_CHECK(full != "/", "hdf5: write_string ", where(path), ": a dataset needs a name");
  if (exists(full)) remove(full);
  h5detail::H5Handle type = h5detail::string_type_variable();
  h5detail::H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  h5detail::H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  h5detail::H5Handle ds(
      H5Dcreate2(id_, full.c_str(), type.get(), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  const char* p = value.c_str();
  if (!ds.valid() || H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &p) < 0)
    ipuml::fail("hdf5: write_string ", where(path), " failed (HDF5: ", h5detail::hdf5_error_text(),
                ")");
}

IPUML_INLINE H5DatasetInfo H5File::info(const std::string& path) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  return describe(path, "info");
}

IPUML_INLINE H5DatasetInfo H5File::describe(const std::string& path, const char* op) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::silence_hdf5();
  IPUML_CHECK(id_ >= 0, "hdf5: ", op, " ", where(path), ": the file is closed");
  h5detail::H5Handle ds = h5detail::open_dataset(*this, id_, op, where(path), path);
  h5detail::H5Handle type(H5Dget_type(ds.get()), H5Tclose);
  h5detail::H5Handle space(H5Dget_space(ds.get()), H5Sclose);
  if (!type.valid() || !space.valid())
    ipuml::fail("hdf5: ", op, " ", where(path),
                ": cannot read the dataset's type or shape (corrupt file? HDF5: ",
                h5detail::hdf5_error_text(), ")");
  H5DatasetInfo out;
  std::tie(out.dtype, out.type_name) =
      h5detail::classify(type.get(), h5detail::read_tag(ds.get(), fixed_strings_, where(path)));
  out.shape = h5detail::extent(space.get());
  return out;
}

IPUML_INLINE bool H5File::is_plain_contiguous(const std::string& path, uint64_t bytes) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::silence_hdf5();
  h5detail::H5Handle ds =
      h5detail::open_dataset(*this, id_, "is_plain_contiguous", where(path), path);
  h5detail::H5Handle dcpl(H5Dget_create_plist(ds.get()), H5Pclose);
  if (!dcpl.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  const int filters = H5Pget_nfilters(dcpl.get());
  H5Eclear2(H5E_DEFAULT);
  if (filters != 0 || !(layout == H5D_CONTIGUOUS || layout == H5D_COMPACT)) return false;
  // Unwritten contiguous storage reads as the fill value: only what was written counts.
  return bytes == 0 || H5Dget_storage_size(ds.get()) == bytes;
}

IPUML_INLINE void H5File::read(const std::string& path, H5Dtype dtype,
                               const std::vector<int64_t>& shape, void* out) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  H5DatasetInfo found = describe(path, "read");
  IPUML_CHECK(dtype != H5Dtype::other, "hdf5: read ", where(path),
              ": dtype 'other' cannot be read as numbers");
  IPUML_CHECK(found.dtype == dtype, "hdf5: read ", where(path), ": found dtype ", found.type_name,
              ", expected ", dtype_name(dtype));
  IPUML_CHECK(found.shape == shape, "hdf5: read ", where(path), ": found shape ", found.shape,
              ", expected ", shape);
  if (found.numel() == 0) return;
  IPUML_CHECK(out != nullptr, "hdf5: read ", where(path), ": no output buffer");
  h5detail::H5Handle ds(H5Dopen2(id_, h5detail::normalize(path).c_str(), H5P_DEFAULT), H5Dclose);
  h5detail::H5Handle type(H5Dget_type(ds.get()), H5Tclose);
  h5detail::H5Handle mtype = h5detail::memory_type(dtype, type.get());
  if (H5Dread(ds.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
    ipuml::fail("hdf5: read ", where(path),
                " failed (corrupt file? HDF5: ", h5detail::hdf5_error_text(), ")");
}

namespace h5detail {

// Rows [first, first + count) of a dataset described by `found`, checked, then moved by `io`
// (H5Dread or H5Dwrite given the dataset, memory type, memory space and file selection).
// Returns false when there is nothing to move.
template <typename Io>
bool row_slab(hid_t file, const std::string& path, const std::string& where,
              const H5DatasetInfo& found, H5Dtype dtype, int64_t first, int64_t count,
              const char* op, const void* buf, Io&& io) {
  IPUML_CHECK(found.dtype == dtype, "hdf5: ", op, " ", where, ": found dtype ", found.type_name,
              ", expected ", dtype_name(dtype));
  IPUML_CHECK(!found.shape.empty(), "hdf5: ", op, " ", where,
              ": the dataset is a scalar, expected rank >= 1");
  IPUML_CHECK(first >= 0 && count >= 0 && first + count <= found.shape[0], "hdf5: ", op, " ", where,
              ": rows [", first, ", ", first + count, ") are outside the ", found.shape[0],
              " rows of shape ", found.shape);
  if (count == 0 || found.numel() == 0) return false;
  IPUML_CHECK(buf != nullptr, "hdf5: ", op, " ", where, ": no buffer");
  H5Handle ds(H5Dopen2(file, normalize(path).c_str(), H5P_DEFAULT), H5Dclose);
  H5Handle type(H5Dget_type(ds.get()), H5Tclose);
  H5Handle mtype = memory_type(dtype, type.get());
  H5Handle fspace(H5Dget_space(ds.get()), H5Sclose);
  std::vector<hsize_t> start(found.shape.size(), 0), dims(found.shape.begin(), found.shape.end());
  start[0] = static_cast<hsize_t>(first);
  dims[0] = static_cast<hsize_t>(count);
  H5Handle mspace(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, dims.data(),
                          nullptr) < 0 ||
      io(ds.get(), mtype.get(), mspace.get(), fspace.get()) < 0)
    ipuml::fail("hdf5: ", op, " ", where, " failed (corrupt file? HDF5: ", hdf5_error_text(), ")");
  return true;
}

}  // namespace h5detail

IPUML_INLINE void H5File::read_rows(const std::string& path, H5Dtype dtype, int64_t first,
                                    int64_t count, void* out) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::row_slab(id_, path, where(path), describe(path, "read_rows"), dtype, first, count,
                     "read_rows", out, [&](hid_t ds, hid_t mt, hid_t ms, hid_t fs) {
                       return H5Dread(ds, mt, ms, fs, H5P_DEFAULT, out);
                     });
}

IPUML_INLINE void H5File::create_dataset(const std::string& path, H5Dtype dtype,
                                         const std::vector<int64_t>& shape) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("create_dataset", path);
  std::string full = h5detail::normalize(path);
  IPUML_CHECK(full != "/", "hdf5: create_dataset ", where(path), ": a dataset needs a name");
  IPUML_CHECK(dtype != H5Dtype::other, "hdf5: create_dataset ", where(path),
              ": dtype 'other' cannot be stored");
  for (int64_t d : shape)
    IPUML_CHECK(d >= 0, "hdf5: create_dataset ", where(path), ": shape ", shape,
                " has a negative dimension");
  if (exists(full)) remove(full);
  h5detail::H5Handle ftype = h5detail::file_type(dtype);
  h5detail::H5Handle space = h5detail::make_space(shape);
  h5detail::H5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  h5detail::H5Handle ds(
      H5Dcreate2(id_, full.c_str(), ftype.get(), space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  if (!space.valid() || !ds.valid())
    ipuml::fail("hdf5: create_dataset ", where(path), ": cannot create a ", dtype_name(dtype),
                " dataset of shape ", shape, " (HDF5: ", h5detail::hdf5_error_text(), ")");
  if (const char* tag = h5detail::tag_of(dtype))
    h5detail::write_string_attr(ds.get(), h5detail::kDtypeTag, tag);
}

IPUML_INLINE void H5File::write_rows(const std::string& path, H5Dtype dtype, int64_t first,
                                     int64_t count, const void* data) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("write_rows", path);
  h5detail::row_slab(id_, path, where(path), describe(path, "write_rows"), dtype, first, count,
                     "write_rows", data, [&](hid_t ds, hid_t mt, hid_t ms, hid_t fs) {
                       return H5Dwrite(ds, mt, ms, fs, H5P_DEFAULT, data);
                     });
}

IPUML_INLINE std::string H5File::read_string(const std::string& path) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  IPUML_CHECK(id_ >= 0, "hdf5: read_string ", where(path), ": the file is closed");
  h5detail::H5Handle ds = h5detail::open_dataset(*this, id_, "read_string", where(path), path);
  h5detail::H5Handle type(H5Dget_type(ds.get()), H5Tclose);
  h5detail::H5Handle space(H5Dget_space(ds.get()), H5Sclose);
  if (H5Tget_class(type.get()) == H5T_STRING)
    h5detail::refuse_variable(fixed_strings_, type.get(), "read_string " + where(path));
  if (H5Tget_class(type.get()) != H5T_STRING)
    ipuml::fail(
        "hdf5: read_string ", where(path), ": found dtype ",
        h5detail::classify(type.get(), h5detail::read_tag(ds.get(), fixed_strings_, where(path)))
            .second,
        ", expected a string");
  IPUML_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1, "hdf5: read_string ", where(path),
              ": found shape ", h5detail::extent(space.get()), ", expected a single string");
  bool ok = true;
  std::string s = h5detail::read_string_value(type.get(), [&](hid_t mem, void* buf) {
    herr_t r = H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    ok = r >= 0;
    return r;
  });
  if (!ok)
    ipuml::fail("hdf5: read_string ", where(path), " failed (HDF5: ", h5detail::hdf5_error_text(),
                ")");
  return s;
}

// --- attributes -----------------------------------------------------------------------------

namespace h5detail {

inline H5Handle open_object(const H5File& f, hid_t file, const char* op, const std::string& where,
                            const std::string& path) {
  std::string full = normalize(path);
  IPUML_CHECK(file >= 0, "hdf5: ", op, " ", where, ": the file is closed");
  IPUML_CHECK(f.exists(full), "hdf5: ", op, " ", where, ": no such object");
  H5Handle obj(H5Oopen(file, full.c_str(), H5P_DEFAULT), H5Oclose);
  if (!obj.valid())
    ipuml::fail("hdf5: ", op, " ", where, ": cannot open the object (HDF5: ", hdf5_error_text(),
                ")");
  return obj;
}

inline H5Handle open_attr(const H5File& f, hid_t file, const char* op, const std::string& where,
                          const std::string& path, const std::string& name) {
  H5Handle obj = open_object(f, file, op, where, path);
  if (H5Aexists(obj.get(), name.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    ipuml::fail("hdf5: ", op, " ", where, ": no attribute '", name, "'");
  }
  H5Handle attr(H5Aopen(obj.get(), name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!attr.valid())
    ipuml::fail("hdf5: ", op, " ", where, ": cannot open attribute '", name,
                "' (HDF5: ", hdf5_error_text(), ")");
  return attr;
}

template <typename T>
std::vector<T> read_numeric_attr(const H5Handle& attr, hid_t mem, bool integers_only,
                                 const char* op, const std::string& where,
                                 const std::string& name) {
  H5Handle type(H5Aget_type(attr.get()), H5Tclose);
  H5T_class_t cls = H5Tget_class(type.get());
  bool ok = cls == H5T_INTEGER || (!integers_only && cls == H5T_FLOAT);
  if (!ok)
    ipuml::fail("hdf5: ", op, " ", where, ": attribute '", name, "' holds ",
                classify(type.get(), "").second, ", expected ",
                integers_only ? "integers" : "numbers");
  H5Handle space(H5Aget_space(attr.get()), H5Sclose);
  hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<T> out(static_cast<size_t>(std::max<hssize_t>(n, 0)));
  if (!out.empty() && H5Aread(attr.get(), mem, out.data()) < 0)
    ipuml::fail("hdf5: ", op, " ", where, ": cannot read attribute '", name,
                "' (HDF5: ", hdf5_error_text(), ")");
  return out;
}

template <typename T>
void write_numeric_attr(hid_t obj, const std::string& name, hid_t ftype, hid_t mtype,
                        const std::vector<T>& v, bool scalar, const std::string& where) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  H5Eclear2(H5E_DEFAULT);
  H5Handle space = scalar ? make_space({}) : make_space({static_cast<int64_t>(v.size())});
  H5Handle attr(H5Acreate2(obj, name.c_str(), ftype, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                H5Aclose);
  if (!attr.valid() || (!v.empty() && H5Awrite(attr.get(), mtype, v.data()) < 0))
    ipuml::fail("hdf5: set_attr ", where, ": cannot write attribute '", name,
                "' (HDF5: ", hdf5_error_text(), ")");
}

}  // namespace h5detail

IPUML_INLINE void H5File::set_attr(const std::string& object, const std::string& name,
                                   const std::string& value) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("set_attr", object);
  h5detail::H5Handle obj = h5detail::open_object(*this, id_, "set_attr", where(object), object);
  try {
    h5detail::write_string_attr(obj.get(), name.c_str(), value, fixed_strings_);
  } catch (const Error& e) {
    ipuml::fail("hdf5: set_attr ", where(object), ": ", e.what());
  }
}

IPUML_INLINE void H5File::set_attr_int(const std::string& object, const std::string& name,
                                       const std::vector<int64_t>& v, bool scalar) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("set_attr", object);
  h5detail::H5Handle obj = h5detail::open_object(*this, id_, "set_attr", where(object), object);
  h5detail::write_numeric_attr(obj.get(), name, H5T_STD_I64LE, H5T_NATIVE_INT64, v, scalar,
                               where(object));
}

IPUML_INLINE void H5File::set_attr_float(const std::string& object, const std::string& name,
                                         const std::vector<double>& v, bool scalar) {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  check_writable("set_attr", object);
  h5detail::H5Handle obj = h5detail::open_object(*this, id_, "set_attr", where(object), object);
  h5detail::write_numeric_attr(obj.get(), name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, v, scalar,
                               where(object));
}

IPUML_INLINE bool H5File::has_attr(const std::string& object, const std::string& name) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::H5Handle obj = h5detail::open_object(*this, id_, "has_attr", where(object), object);
  htri_t r = H5Aexists(obj.get(), name.c_str());
  H5Eclear2(H5E_DEFAULT);
  return r > 0;
}

IPUML_INLINE std::vector<std::string> H5File::attr_names(const std::string& object) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::H5Handle obj = h5detail::open_object(*this, id_, "attr_names", where(object), object);
  std::vector<std::string> names;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
    static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
  };
  hsize_t idx = 0;
  if (H5Aiterate2(obj.get(), H5_INDEX_NAME, H5_ITER_INC, &idx, collect, &names) < 0)
    ipuml::fail("hdf5: attr_names ", where(object), " failed (HDF5: ", h5detail::hdf5_error_text(),
                ")");
  std::sort(names.begin(), names.end());
  return names;
}

IPUML_INLINE std::string H5File::attr_string(const std::string& object,
                                             const std::string& name) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::H5Handle attr =
      h5detail::open_attr(*this, id_, "attr_string", where(object), object, name);
  h5detail::H5Handle type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING)
    ipuml::fail("hdf5: attr_string ", where(object), ": attribute '", name, "' holds ",
                h5detail::classify(type.get(), "").second, ", expected a string");
  h5detail::refuse_variable(fixed_strings_, type.get(),
                            "attr_string " + where(object) + ": attribute '" + name + "'");
  h5detail::H5Handle space(H5Aget_space(attr.get()), H5Sclose);
  IPUML_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1, "hdf5: attr_string ", where(object),
              ": attribute '", name, "' has shape ", h5detail::extent(space.get()),
              ", expected a single string");
  bool ok = true;
  std::string s = h5detail::read_string_value(type.get(), [&](hid_t mem, void* buf) {
    herr_t r = H5Aread(attr.get(), mem, buf);
    ok = r >= 0;
    return r;
  });
  if (!ok)
    ipuml::fail("hdf5: attr_string ", where(object), ": cannot read attribute '", name,
                "' (HDF5: ", h5detail::hdf5_error_text(), ")");
  return s;
}

IPUML_INLINE std::vector<int64_t> H5File::attr_ints(const std::string& object,
                                                    const std::string& name) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::H5Handle attr =
      h5detail::open_attr(*this, id_, "attr_ints", where(object), object, name);
  return h5detail::read_numeric_attr<int64_t>(attr, H5T_NATIVE_INT64, true, "attr_ints",
                                              where(object), name);
}

IPUML_INLINE std::vector<double> H5File::attr_doubles(const std::string& object,
                                                      const std::string& name) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::H5Handle attr =
      h5detail::open_attr(*this, id_, "attr_doubles", where(object), object, name);
  return h5detail::read_numeric_attr<double>(attr, H5T_NATIVE_DOUBLE, false, "attr_doubles",
                                             where(object), name);
}

IPUML_INLINE int64_t H5File::attr_int(const std::string& object, const std::string& name) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::H5Handle attr =
      h5detail::open_attr(*this, id_, "attr_int", where(object), object, name);
  auto v = h5detail::read_numeric_attr<int64_t>(attr, H5T_NATIVE_INT64, true, "attr_int",
                                                where(object), name);
  IPUML_CHECK(v.size() == 1, "hdf5: attr_int ", where(object), ": attribute '", name, "' holds ",
              v.size(), " values, expected one");
  return v[0];
}

IPUML_INLINE double H5File::attr_double(const std::string& object, const std::string& name) const {
  const ForkFence fence;  // libhdf5 holds its global lock inside
  h5detail::H5Handle attr =
      h5detail::open_attr(*this, id_, "attr_double", where(object), object, name);
  auto v = h5detail::read_numeric_attr<double>(attr, H5T_NATIVE_DOUBLE, false, "attr_double",
                                               where(object), name);
  IPUML_CHECK(v.size() == 1, "hdf5: attr_double ", where(object), ": attribute '", name, "' holds ",
              v.size(), " values, expected one");
  return v[0];
}

// --- atomic save ----------------------------------------------------------------------------

IPUML_INLINE void atomic_write(const std::string& path, const std::function<void(H5File&)>& writer,
                               size_t userblock_bytes,
                               const std::function<void(const std::string&)>& seal) {
  namespace fs = std::filesystem;
  remove_stale_temporaries(path, ".tmp-");
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    H5File f(tmp, H5File::Mode::truncate, userblock_bytes);
    writer(f);
    f.close();
    if (seal) seal(tmp);
    // The rename must not reach the disk before the data does, or a power cut could leave the
    // new name pointing at an empty file.
    int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    IPUML_CHECK(fd >= 0, "hdf5: atomic_write '", path, "': cannot reopen '", tmp,
                "': ", std::strerror(errno));
    const int synced = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    IPUML_CHECK(synced == 0, "hdf5: atomic_write '", path, "': cannot sync '", tmp,
                "' to disk: ", std::strerror(err));
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    ipuml::fail("hdf5: atomic_write '", path, "': cannot rename '", tmp,
                "' over it: ", ec.message());
  }
  fs::path dir = fs::absolute(fs::path(path), ec).parent_path();
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace ipuml::io
