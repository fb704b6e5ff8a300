// A thin RAII layer over the HDF5 C API: files, nested groups, typed n-d datasets, attributes,
// and atomic saves. Raw buffers plus shapes; the tensor-level checkpoint code builds on this.
#pragma once

#include <ipuml/core/config.hpp>

#if IPUML_WITH_HDF5

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <ipuml/core/error.hpp>

namespace ipuml::io {

// Element types a dataset can hold. float16 and bfloat16 travel as uint16 bit patterns in
// memory. float16 is stored as an IEEE half (h5py/numpy read it as float16); HDF5 has no
// bfloat16, so it is stored as uint16 tagged with the attribute "ipuml_dtype" = "bfloat16",
// and bool as uint8 tagged "bool". `other` is anything else found in a foreign file
// (strings, compounds, ...): it can be listed and inspected but not read as numbers.
enum class H5Dtype {
  float32,
  float64,
  float16,
  bfloat16,
  int8,
  int32,
  int64,
  uint8,
  uint16,
  boolean,
  other
};

const char* dtype_name(H5Dtype dtype);
size_t dtype_size(H5Dtype dtype);  // bytes per element in memory; 0 for `other`

// The dtype that stores a C++ element type; uint16_t means uint16 (pass float16/bfloat16
// explicitly for half-precision bit patterns).
template <typename T>
constexpr H5Dtype h5_dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return H5Dtype::float32;
  else if constexpr (std::is_same_v<T, double>)
    return H5Dtype::float64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return H5Dtype::int8;
  else if constexpr (std::is_same_v<T, int32_t>)
    return H5Dtype::int32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return H5Dtype::int64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return H5Dtype::uint8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return H5Dtype::uint16;
  else if constexpr (std::is_same_v<T, bool>)
    return H5Dtype::boolean;
  else
    static_assert(sizeof(T) == 0, "ipuml::io: no HDF5 dtype for this element type");
}

struct H5DatasetInfo {
  H5Dtype dtype = H5Dtype::other;
  std::vector<int64_t> shape;  // {} for a scalar
  std::string type_name;       // what the file holds, e.g. "float32" or "string (variable length)"
  int64_t numel() const;
};

// One open HDF5 file. Object paths are relative to the root ("layer1/conv/weight"; a leading
// '/' is accepted). One H5File must not be used by two threads at once; different files may be,
// with libhdf5 built thread-safe (Debian's is), which then serialises the calls.
class H5File {
 public:
  enum class Mode {
    read,        // read-only; the file must exist and be HDF5
    truncate,    // create, replacing any existing file
    read_write,  // open an existing file for changes
  };

  // `userblock_bytes` (truncate only; 0 or a power of two >= 512) reserves that many bytes at
  // the start of the file for the caller (HDF5's user block): checkpoints keep their
  // integrity record there. Reading opens only regular files (see io/file.hpp).
  explicit H5File(const std::string& path, Mode mode = Mode::read, size_t userblock_bytes = 0);
  H5File(H5File&& other) noexcept;
  H5File& operator=(H5File&& other) noexcept;
  H5File(const H5File&) = delete;
  H5File& operator=(const H5File&) = delete;
  ~H5File();

  const std::string& path() const { return path_; }
  Mode mode() const { return mode_; }
  bool is_open() const { return id_ >= 0; }
  void flush();
  // Closes now and reports failure (the destructor has to swallow it).
  void close();

  // --- structure ---
  bool exists(const std::string& path) const;  // any object; false for missing parents too
  bool is_group(const std::string& path) const;
  bool is_dataset(const std::string& path) const;
  void create_group(const std::string& path);  // creates missing parents; existing is fine
  std::vector<std::string> list(const std::string& group = "/") const;  // children, sorted by name
  void remove(const std::string& path);
  // Throws unless the file's objects form a plain tree: every link a hard link (no soft or
  // external links, which could point anywhere, even at other files), every object reached
  // once (no link cycles or aliases), at most `max_depth` levels and `max_links` links.
  void check_plain_tree(size_t max_links, int max_depth) const;

  // --- datasets ---
  // Writes `data` (numel(shape) elements of dtype_size(dtype) bytes, row-major) as a new
  // dataset, creating missing parent groups and replacing an existing object at that path.
  void write(const std::string& path, H5Dtype dtype, const std::vector<int64_t>& shape,
             const void* data);
  template <typename T>
  void write(const std::string& path, const std::vector<int64_t>& shape, const T* data) {
    write(path, h5_dtype_of<T>(), shape, data);
  }
  template <typename T>
  void write(const std::string& path, const std::vector<int64_t>& shape,
             const std::vector<T>& data) {
    static_assert(!std::is_same_v<T, bool>,
                  "std::vector<bool> is bit-packed: pass a bool* or uint8 data");
    check_count(path, shape, data.size());
    write(path, h5_dtype_of<T>(), shape, data.data());
  }
  void write_string(const std::string& path, const std::string& value);
  // Creates a dataset of `shape` without writing it (replacing any object at that path), to be
  // filled piecewise by write_rows: a data set larger than memory.
  void create_dataset(const std::string& path, H5Dtype dtype, const std::vector<int64_t>& shape);
  // Writes `count` entries along the first dimension starting at `first` into an existing
  // dataset of that dtype (read_rows' counterpart).
  void write_rows(const std::string& path, H5Dtype dtype, int64_t first, int64_t count,
                  const void* data);

  H5DatasetInfo info(const std::string& path) const;
  // True when the dataset is stored as written by `write`: contiguous (or compact), no filters,
  // and `bytes` of storage allocated. Reading such a dataset touches no chunk index or filter.
  bool is_plain_contiguous(const std::string& path, uint64_t bytes) const;

  // Strings written fixed-length (h5py reads them as bytes) and variable-length strings refused
  // when read: variable-length data lives in libhdf5's global heap, whose parser a crafted file
  // can send into an endless loop. Checkpoints use this.
  void set_fixed_length_strings(bool on) { fixed_strings_ = on; }
  bool fixed_length_strings() const { return fixed_strings_; }
  // Reads the whole dataset into `out`; its dtype must be `dtype` and its shape `shape`,
  // otherwise Error names both.
  void read(const std::string& path, H5Dtype dtype, const std::vector<int64_t>& shape,
            void* out) const;
  // Reads `count` entries along the first dimension starting at `first`: a slice of a data set
  // that does not fit in memory.
  void read_rows(const std::string& path, H5Dtype dtype, int64_t first, int64_t count,
                 void* out) const;
  template <typename T>
  std::vector<T> read_vector(const std::string& path, H5Dtype dtype,
                             std::vector<int64_t>* shape = nullptr) const {
    static_assert(!std::is_same_v<T, bool>,
                  "std::vector<bool> is bit-packed: read bool data as uint8_t");
    H5DatasetInfo found = describe(path, "read");
    IPUML_CHECK(sizeof(T) == dtype_size(dtype), "hdf5: read_vector '", path_, ":", path,
                "': element size ", sizeof(T), " does not fit dtype ", dtype_name(dtype));
    std::vector<T> out(static_cast<size_t>(found.numel()));
    read(path, dtype, found.shape, out.data());
    if (shape) *shape = found.shape;
    return out;
  }
  template <typename T>
  std::vector<T> read_vector(const std::string& path, std::vector<int64_t>* shape = nullptr) const {
    return read_vector<T>(path, h5_dtype_of<T>(), shape);
  }
  std::string read_string(const std::string& path) const;

  // --- attributes, on any object ("/" is the root group) ---
  void set_attr(const std::string& object, const std::string& name, const std::string& value);
  void set_attr(const std::string& object, const std::string& name, const char* value) {
    set_attr(object, name, std::string(value));
  }
  template <std::integral T>
  void set_attr(const std::string& object, const std::string& name, T value) {
    set_attr_int(object, name, std::vector<int64_t>{static_cast<int64_t>(value)}, true);
  }
  template <std::floating_point T>
  void set_attr(const std::string& object, const std::string& name, T value) {
    set_attr_float(object, name, std::vector<double>{static_cast<double>(value)}, true);
  }
  void set_attr(const std::string& object, const std::string& name,
                const std::vector<int64_t>& values) {
    set_attr_int(object, name, values, false);
  }
  void set_attr(const std::string& object, const std::string& name,
                const std::vector<double>& values) {
    set_attr_float(object, name, values, false);
  }
  bool has_attr(const std::string& object, const std::string& name) const;
  std::vector<std::string> attr_names(const std::string& object) const;
  std::string attr_string(const std::string& object, const std::string& name) const;
  int64_t attr_int(const std::string& object,
                   const std::string& name) const;  // integer attributes only
  double attr_double(const std::string& object, const std::string& name) const;  // integer or float
  std::vector<int64_t> attr_ints(const std::string& object, const std::string& name) const;
  std::vector<double> attr_doubles(const std::string& object, const std::string& name) const;

 private:
  H5DatasetInfo describe(const std::string& path,
                         const char* op) const;  // info() naming the caller's op
  void set_attr_int(const std::string& object, const std::string& name,
                    const std::vector<int64_t>& v, bool scalar);
  void set_attr_float(const std::string& object, const std::string& name,
                      const std::vector<double>& v, bool scalar);
  void check_count(const std::string& path, const std::vector<int64_t>& shape, size_t count) const;
  void check_writable(const char* op, const std::string& path) const;
  std::string where(const std::string& path) const;  // "file:object" for messages

  std::string path_;
  Mode mode_ = Mode::read;
  bool fixed_strings_ = false;
  int64_t id_ =
      -1;  // the hid_t (int64_t since HDF5 1.10), kept as a plain integer so <hdf5.h> stays private
};

// Saves through a temporary file beside `path` (`<path>.tmp-<pid>`) that is renamed over it
// only after `writer` returned and the data reached the disk, so a crash or an exception
// mid-save leaves the previous file intact. On exception the temporary file is removed and the
// exception rethrown; temporaries of writers that died mid-save are removed first. With
// `userblock_bytes`, the file reserves a user block and `seal(temporary path)` runs after the
// HDF5 file is closed and before it is synced and renamed (to write the user block).
void atomic_write(const std::string& path, const std::function<void(H5File&)>& writer,
                  size_t userblock_bytes = 0,
                  const std::function<void(const std::string&)>& seal = {});

}  // namespace ipuml::io

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/io/hdf5_impl.hpp>
#endif

#endif  // IPUML_WITH_HDF5
