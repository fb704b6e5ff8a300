// Bodies of <ipuml/datasets/mnist.hpp>: compiled once in src/lib/datasets_mnist.cpp, or
// included by the header in header-only mode.
#pragma once

#include <ipuml/datasets/mnist.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <ipuml/io/file.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <ipuml/datasets/data_cache.hpp>

namespace ipuml::datasets {

namespace mnist_detail {

inline constexpr uint32_t kImagesMagic = 2051;  // 0x00000803: unsigned bytes, 3 dimensions
inline constexpr uint32_t kLabelsMagic = 2049;  // 0x00000801: unsigned bytes, 1 dimension

inline std::string fetch_hint() {
  return "run scripts/fetch-data.sh mnist to download MNIST into " + data_cache_dir() +
         "/mnist (or set IPUML_DATA_DIR)";
}

// `dir/name` or `dir/name.gz`, whichever exists; empty when neither does. A path that exists
// but is not a regular file (a directory, a FIFO) is an error naming what it is, unless
// `quiet` (when probing candidate directories).
inline std::string resolve(const std::string& dir, const std::string& name, bool quiet = false) {
  namespace fs = std::filesystem;
  for (const fs::path& p : {fs::path(dir) / name, fs::path(dir) / (name + ".gz")}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;
    if (S_ISREG(st.st_mode)) return p.string();
    if (!quiet)
      ipuml::fail("mnist: '", p.string(), "' is ", io::file_type_name(st.st_mode),
                  ", expected the IDX file ", name);
  }
  return {};
}

// zlib reads uncompressed files transparently, so one reader serves both forms.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    // Opened as a regular file first: a FIFO or device is refused instead of blocking.
    io::RegularFile f = io::open_regular_file(path, "mnist: cannot open");
    errno = 0;
    const int fd = f.release();
    file_ = gzdopen(fd, "rb");
    if (!file_) {
      ::close(fd);
      ipuml::fail("mnist: cannot open '", path,
                  "': ", errno ? std::strerror(errno) : "out of memory");
    }
    gzbuffer(file_, 1 << 17);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  ~GzReader() {
    if (file_) gzclose(file_);
  }

  // Reads up to n bytes; fewer only at the end of the data. A damaged gzip stream throws.
  size_t read(void* out, size_t n) {
    size_t done = 0;
    while (done < n) {
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, size_t{1} << 20));
      int got = gzread(file_, static_cast<char*>(out) + done, chunk);
      if (got < 0) fail_stream();
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    // zlib reports a gzip stream cut short as a short read plus Z_BUF_ERROR.
    int code = Z_OK;
    gzerror(file_, &code);
    if (code != Z_OK && code != Z_STREAM_END) fail_stream();
    return done;
  }

 private:
  [[noreturn]] void fail_stream() {
    int code = Z_OK;
    const char* msg = gzerror(file_, &code);
    ipuml::fail("mnist: cannot read '", path_,
                "': corrupt or truncated gzip data (zlib: ", msg && *msg ? msg : "unknown error",
                ")");
  }

  std::string path_;
  gzFile file_ = nullptr;
};

struct IdxFile {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

inline uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads a whole unsigned-byte IDX file and checks that its length is exactly what the header
// says: a truncated download and a file with something appended are both errors.
inline IdxFile read_idx(const std::string& path, uint32_t magic, size_t ndims, const char* what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) ipuml::fail("mnist: cannot find '", path, "'; ", fetch_hint());
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    ipuml::fail("mnist: '", path, "' is ", io::file_type_name(st.st_mode), ", expected ", what);
  GzReader in(path);
  const size_t header_size = 4 + 4 * ndims;
  uint8_t header[16] = {};
  size_t got = in.read(header, header_size);
  if (got < 4)
    ipuml::fail("mnist: '", path, "' is ", got,
                " bytes long, too short for an IDX header (expected ", what, ")");
  uint32_t found = big_endian_u32(header);
  if (found != magic) {
    std::string guess = found == kImagesMagic   ? " (an image file)"
                        : found == kLabelsMagic ? " (a label file)"
                                                : "";
    ipuml::fail("mnist: '", path, "' has magic number ", found, guess, ", expected ", magic, " (",
                what, ")");
  }
  if (got < header_size)
    ipuml::fail("mnist: '", path, "' is truncated: ", got, " bytes, expected a ", header_size,
                "-byte IDX header");
  IdxFile out;
  uint64_t payload = 1;
  for (size_t d = 0; d < ndims; ++d) {
    uint32_t dim = big_endian_u32(header + 4 + 4 * d);
    out.dims.push_back(static_cast<int64_t>(dim));
    payload *= dim;
    // No real IDX file comes near this; a larger product means a damaged header, and a
    // bound here keeps the multiplication from overflowing.
    if (payload > (uint64_t{1} << 40))
      ipuml::fail("mnist: '", path, "' header claims dimensions ", out.dims,
                  "..., which is not plausible for ", what);
  }
  // Grow as data arrives rather than trusting the header with one huge allocation.
  out.data.reserve(static_cast<size_t>(std::min<uint64_t>(payload, uint64_t{64} << 20)));
  uint64_t have = 0;
  while (have < payload) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(payload - have, uint64_t{4} << 20));
    out.data.resize(static_cast<size_t>(have) + chunk);
    size_t n = in.read(out.data.data() + have, chunk);
    have += n;
    if (n < chunk) break;
  }
  if (have < payload)
    ipuml::fail("mnist: '", path, "' is truncated: its header (dimensions ", out.dims,
                ") promises ", payload, " data bytes after the ", header_size,
                "-byte header, but only ", have, " are present; ", fetch_hint());
  uint8_t extra[1];
  if (in.read(extra, 1) != 0)
    ipuml::fail("mnist: '", path, "' has trailing bytes after the ", header_size + payload,
                " bytes its header (dimensions ", out.dims,
                ") describes; expected the file to end there");
  return out;
}

}  // namespace mnist_detail

IPUML_INLINE MnistSplit read_mnist(const std::string& images_path, const std::string& labels_path) {
  using namespace mnist_detail;
  IdxFile images = read_idx(images_path, kImagesMagic, 3, "an IDX image file, magic 2051");
  IdxFile labels = read_idx(labels_path, kLabelsMagic, 1, "an IDX label file, magic 2049");
  IPUML_CHECK(images.dims[1] > 0 && images.dims[2] > 0, "mnist: '", images_path, "' has images of ",
              images.dims[1], "x", images.dims[2], " pixels, expected at least 1x1");
  IPUML_CHECK(images.dims[0] == labels.dims[0], "mnist: '", images_path, "' holds ", images.dims[0],
              " images but '", labels_path, "' holds ", labels.dims[0],
              " labels; expected equal counts");
  for (size_t i = 0; i < labels.data.size(); ++i)
    IPUML_CHECK(labels.data[i] <= 9, "mnist: '", labels_path, "' has label ", int(labels.data[i]),
                " at index ", i, ", expected a digit 0..9");
  MnistSplit split;
  split.count = images.dims[0];
  split.rows = images.dims[1];
  split.cols = images.dims[2];
  split.images = std::move(images.data);
  split.labels = std::move(labels.data);
  return split;
}

IPUML_INLINE MnistSplit load_mnist(const std::string& dir, bool train) {
  using namespace mnist_detail;
  const std::string where = dir.empty() ? find_mnist_dir() : dir;
  const char* names[2] = {train ? kMnistTrainImages : kMnistTestImages,
                          train ? kMnistTrainLabels : kMnistTestLabels};
  std::string paths[2];
  for (int i = 0; i < 2; ++i) {
    paths[i] = resolve(where, names[i]);
    if (paths[i].empty())
      ipuml::fail("mnist: cannot find '", (std::filesystem::path(where) / names[i]).string(),
                  "' (nor its .gz) for the ", train ? "training" : "test", " split; ",
                  fetch_hint());
  }
  return read_mnist(paths[0], paths[1]);
}

IPUML_INLINE std::string find_mnist_dir(const std::string& hint) {
  using namespace mnist_detail;
  std::vector<std::string> candidates;
  if (!hint.empty()) candidates.push_back(hint);
  if (const char* data = std::getenv("IPUML_DATA_DIR"); data && *data)
    candidates.push_back(std::string(data) + "/mnist");
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    candidates.push_back(std::string(xdg) + "/ipuml/mnist");
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    candidates.push_back(std::string(home) + "/.cache/ipuml/mnist");
  }
  for (const std::string& dir : candidates) {
    bool complete = true;
    for (const char* name :
         {kMnistTrainImages, kMnistTrainLabels, kMnistTestImages, kMnistTestLabels})
      complete = complete && !resolve(dir, name, true).empty();
    if (complete) return dir;
  }
  std::string searched;
  for (const std::string& dir : candidates) searched += (searched.empty() ? "" : ", ") + dir;
  ipuml::fail("mnist: the MNIST files (", kMnistTrainImages, ", ", kMnistTrainLabels, ", ",
              kMnistTestImages, ", ", kMnistTestLabels, ", optionally .gz) are not in any of: ",
              searched.empty() ? "(nowhere to look)" : searched, "; ", fetch_hint());
}

}  // namespace ipuml::datasets
