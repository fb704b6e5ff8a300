// Bodies of <ipuml/io/file.hpp> (compiled once in src/lib/io_file.cpp).
#pragma once

#include <ipuml/io/file.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <ipuml/core/error.hpp>

namespace ipuml::io {

IPUML_INLINE std::string file_type_name(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO (named pipe)";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symbolic link";
    default:
      return "not a regular file";
  }
}

IPUML_INLINE RegularFile::RegularFile(RegularFile&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), size_(o.size_), path_(std::move(o.path_)) {}

IPUML_INLINE RegularFile& RegularFile::operator=(RegularFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    size_ = o.size_;
    path_ = std::move(o.path_);
  }
  return *this;
}

IPUML_INLINE RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

IPUML_INLINE int RegularFile::release() { return std::exchange(fd_, -1); }

IPUML_INLINE void RegularFile::read_at(uint64_t offset, void* out, size_t n,
                                       const std::string& who) const {
  IPUML_CHECK(fd_ >= 0, who, " '", path_, "': the file is closed");
  auto* p = static_cast<char*>(out);
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(who, " '", path_, "': read failed: ", std::strerror(errno));
    if (got == 0)
      fail(who, " '", path_, "': the file ends after ", offset + done, " bytes, expected at least ",
           offset + n);
    done += static_cast<size_t>(got);
  }
}

IPUML_INLINE RegularFile open_regular_file(const std::string& path, const std::string& who,
                                           bool follow_symlinks) {
  IPUML_CHECK(!path.empty(), who, ": empty file name");
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  if (!follow_symlinks) flags |= O_NOFOLLOW;
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (err == ENOENT) fail(who, " '", path, "': no such file");
    if (err == EACCES || err == EPERM)
      fail(who, " '", path, "': permission denied (the file exists but this user cannot read it)");
    if (err == ELOOP && !follow_symlinks && ::lstat(path.c_str(), &st) == 0)
      fail(who, " '", path, "': is a symbolic link, expected a regular file");
    if (err == ENXIO && ::stat(path.c_str(), &st) == 0)
      fail(who, " '", path, "': is ", file_type_name(st.st_mode), ", expected a regular file");
    fail(who, " '", path, "': cannot open: ", std::strerror(err));
  }
  RegularFile f;
  f.fd_ = fd;
  f.path_ = path;
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(who, " '", path, "': cannot stat: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    fail(who, " '", path, "': is ", file_type_name(st.st_mode), ", expected a regular file");
  // Reads block normally from here on (O_NONBLOCK only guarded the open).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  f.size_ = static_cast<uint64_t>(st.st_size);
  return f;
}

IPUML_INLINE std::vector<uint8_t> read_regular_file(const std::string& path, const std::string& who,
                                                    uint64_t max_bytes, bool follow_symlinks) {
  RegularFile f = open_regular_file(path, who, follow_symlinks);
  IPUML_CHECK(f.size() <= max_bytes, who, " '", path, "': ", f.size(),
              " bytes is more than the largest expected (", max_bytes, ")");
  std::vector<uint8_t> out(static_cast<size_t>(f.size()));
  if (!out.empty()) f.read_at(0, out.data(), out.size(), who);
  return out;
}

IPUML_INLINE void check_writable_path(const std::string& path, const std::string& who,
                                      bool create_dirs) {
  namespace fs = std::filesystem;
  IPUML_CHECK(!path.empty(), who, ": empty file name");
  std::error_code ec;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    IPUML_CHECK(S_ISREG(st.st_mode), who, " '", path, "': is ", file_type_name(st.st_mode),
                ", expected a regular file (or a new file's name)");
    IPUML_CHECK(::access(path.c_str(), W_OK) == 0, who, " '", path,
                "': permission denied (the file exists but this user cannot write it)");
  }
  fs::path dir = fs::absolute(fs::path(path), ec).parent_path();
  if (ec) dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::exists(dir, ec)) {
    IPUML_CHECK(create_dirs, who, " '", path, "': the directory '", dir.string(),
                "' does not exist");
    fs::create_directories(dir, ec);
    IPUML_CHECK(!ec, who, " '", path, "': cannot create the directory '", dir.string(),
                "': ", ec.message());
  }
  IPUML_CHECK(fs::is_directory(dir, ec), who, " '", path, "': '", dir.string(),
              "' is not a directory");
  IPUML_CHECK(::access(dir.c_str(), W_OK | X_OK) == 0, who, " '", path,
              "': permission denied (this user cannot create files in '", dir.string(), "')");
}

IPUML_INLINE int remove_stale_temporaries(const std::string& path, const std::string& marker) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string prefix = p.filename().string() + marker;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(digits);
    // A live process (or one of another user: EPERM) may still be writing it.
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    if (fs::is_regular_file(fs::symlink_status(it->path(), rm)) && fs::remove(it->path(), rm))
      ++removed;
  }
  return removed;
}

}  // namespace ipuml::io
