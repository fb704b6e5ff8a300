// Opening files that come from users or from disk caches without trusting them: only regular
// files are read (a FIFO, device, socket or directory is refused at once, never blocked on),
// errors say what the path is and why it cannot be read, and stale temporaries are swept.
#pragma once

#include <ipuml/core/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ipuml::io {

// An open, read-only file descriptor of a regular file; closes itself.
class RegularFile {
 public:
  RegularFile() = default;
  RegularFile(RegularFile&& o) noexcept;
  RegularFile& operator=(RegularFile&& o) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Gives the descriptor away (e.g. to gzdopen), which then owns it.
  int release();
  // Reads exactly n bytes at `offset`; a short file throws naming `who`.
  void read_at(uint64_t offset, void* out, size_t n, const std::string& who) const;

 private:
  friend RegularFile open_regular_file(const std::string&, const std::string&, bool);
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Opens `path` read-only. Throws ipuml::Error starting with `who` when it does not exist, is
// not a regular file (named: directory, FIFO, character device, ...), cannot be read
// (permission denied is said as such), or is a symbolic link and `follow_symlinks` is false.
// The open never blocks: O_NONBLOCK keeps a FIFO from waiting for a writer.
RegularFile open_regular_file(const std::string& path, const std::string& who,
                              bool follow_symlinks = true);

// The whole file, if it holds at most `max_bytes`.
std::vector<uint8_t> read_regular_file(const std::string& path, const std::string& who,
                                       uint64_t max_bytes, bool follow_symlinks = true);

// "a directory", "a FIFO (named pipe)", "a character device", ... for a stat st_mode.
std::string file_type_name(unsigned mode);

// Throws unless a file can be created or replaced at `path`: its directory exists (or can be
// created when `create_dirs`), is a directory and is writable, and `path` itself is not a
// directory or another non-regular file. For command-line tools, before any work starts.
void check_writable_path(const std::string& path, const std::string& who, bool create_dirs = false);

// Removes `<path><marker><pid>` files beside `path` whose writer process `pid` is gone (a
// writer killed mid-save leaves its temporary behind). Returns how many were removed; errors
// are ignored (the sweep is housekeeping).
int remove_stale_temporaries(const std::string& path, const std::string& marker);

}  // namespace ipuml::io

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/io/file_impl.hpp>
#endif
