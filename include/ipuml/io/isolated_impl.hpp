// Bodies of <ipuml/io/isolated.hpp>.
#pragma once

#include <ipuml/core/error.hpp>
#include <ipuml/io/isolated.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define IPUML_ISOLATED_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(IPUML_ISOLATED_SANITIZER)
#define IPUML_ISOLATED_SANITIZER 1
#endif
#ifdef IPUML_ISOLATED_SANITIZER
#include <sanitizer/common_interface_defs.h>
#endif

namespace ipuml::io {
namespace isolated_detail {

inline std::atomic<double>& timeout() {
  static std::atomic<double> seconds{60.0};
  return seconds;
}

inline std::atomic<bool>& flag() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("IPUML_ISOLATE_PARSERS");
    return !(e != nullptr && std::strcmp(e, "0") == 0);
  }()};
  return on;
}

// Threads inside a ForkFence, and whether a fork waits for them to leave.
struct Fences {
  std::mutex m;
  std::condition_variable cv;
  int64_t inside = 0;  // threads, not nesting levels
  int forking = 0;     // forks waiting or under way
};
inline Fences& fences() {
  static Fences f;
  return f;
}
inline int& fence_depth() {  // this thread's nesting
  thread_local int depth = 0;
  return depth;
}

inline void write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // the parent is gone or stopped reading: nothing left to tell
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The child's side: run the check, report 'K' (returned), 'E' + an ipuml::Error's message or
// 'X' + another exception's, as one status byte, a 4-byte length and the message, then leave
// without running the parent's exit handlers or flushing its stdio buffers.
[[noreturn]] inline void child(int fd, const std::function<void()>& check) {
  // The caller's crash handlers (a fuzzer's, a crash reporter's) must not act for the child.
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGALRM, SIGINT, SIGTERM, SIGXFSZ,
                  SIGUSR1, SIGUSR2})
    ::signal(sig, SIG_DFL);
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
#ifdef IPUML_ISOLATED_SANITIZER
  __sanitizer_set_death_callback(nullptr);
#endif
  const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0) ::dup2(null, STDERR_FILENO);
  char status = 'K';
  std::string message;
  try {
    check();
  } catch (const Error& e) {
    status = 'E';
    message = e.what();
  } catch (const std::exception& e) {
    status = 'X';
    message = e.what();
  } catch (...) {
    status = 'X';
    message = "an exception that is not a std::exception";
  }
  message.resize(std::min<size_t>(message.size(), 1 << 16));
  const uint32_t n = static_cast<uint32_t>(message.size());
  write_all(fd, &status, 1);
  write_all(fd, &n, sizeof n);
  write_all(fd, message.data(), message.size());
  ::_exit(0);
}

}  // namespace isolated_detail

IPUML_INLINE ForkFence::ForkFence() {
  if (isolated_detail::fence_depth()++ > 0) return;
  auto& f = isolated_detail::fences();
  std::unique_lock<std::mutex> lock(f.m);
  f.cv.wait(lock, [&] { return f.forking == 0; });
  ++f.inside;
}
IPUML_INLINE ForkFence::~ForkFence() {
  if (--isolated_detail::fence_depth() > 0) return;
  auto& f = isolated_detail::fences();
  {
    const std::lock_guard<std::mutex> lock(f.m);
    --f.inside;
  }
  f.cv.notify_all();
}

IPUML_INLINE void set_parser_isolation(bool on, double timeout_seconds) {
  IPUML_CHECK(std::isfinite(timeout_seconds) && timeout_seconds > 0,
              "set_parser_isolation: the timeout must be a positive number of seconds, got ",
              timeout_seconds);
  isolated_detail::flag() = on;
  isolated_detail::timeout() = timeout_seconds;
}
IPUML_INLINE bool parser_isolation() { return isolated_detail::flag(); }
IPUML_INLINE double parser_isolation_timeout() { return isolated_detail::timeout(); }

IPUML_INLINE void run_isolated(const std::string& what, const std::function<void()>& check,
                               double timeout_seconds) {
  if (!parser_isolation()) {
    check();
    return;
  }
  if (timeout_seconds == 0) timeout_seconds = parser_isolation_timeout();
  IPUML_CHECK(std::isfinite(timeout_seconds) && timeout_seconds > 0, what,
              ": the isolated check's timeout must be a positive number of seconds, got ",
              timeout_seconds);
  int fds[2];
  IPUML_CHECK(::pipe2(fds, O_CLOEXEC) == 0, what,
              ": cannot create a pipe for the isolated check: ", std::strerror(errno));
  // Fork when no thread is inside a ForkFence (this one may be, if it called from inside one),
  // with new ones kept out, and the fences' own mutex held so that the child's copy is free.
  auto& fences = isolated_detail::fences();
  std::unique_lock<std::mutex> lock(fences.m);
  ++fences.forking;
  const int64_t mine = isolated_detail::fence_depth() > 0 ? 1 : 0;
  fences.cv.wait(lock, [&] { return fences.inside == mine; });
  const pid_t pid = ::fork();
  --fences.forking;
  lock.unlock();  // in the child: the only thread, and std::mutex is not owner-checked by glibc
  if (pid != 0) fences.cv.notify_all();
  if (pid < 0) {
    // No memory or process slot for a child (a large process under strict overcommit): the
    // check runs here, as with isolation off, rather than refusing a file that may be fine.
    ::close(fds[0]);
    ::close(fds[1]);
    check();
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    isolated_detail::child(fds[1], check);
  }
  ::close(fds[1]);

  // Read the whole report (or EOF, or the deadline). The report's own length ends the read: a
  // copy of the pipe's write end inherited by another process forked meanwhile would otherwise
  // hold EOF back.
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(timeout_seconds);
  std::string got;
  bool timed_out = false;
  auto complete = [&] {
    uint32_t n = 0;
    if (got.size() < 1 + sizeof n) return false;
    std::memcpy(&n, got.data() + 1, sizeof n);
    return got.size() >= 1 + sizeof n + n;
  };
  while (!complete()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // EOF: the child ended
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int st = 0;
  pid_t w = -1;
  do {
    w = ::waitpid(pid, &st, 0);
  } while (w < 0 && errno == EINTR);

  if (complete()) {
    const char status = got[0];
    const std::string message = got.substr(1 + sizeof(uint32_t));
    if (status == 'K') return;
    if (status == 'E') throw Error(message);
    fail(what, ": the isolated check failed: ", message);
  }
  if (timed_out)
    fail(what, ": the parser did not finish within ", timeout_seconds,
         " s in the isolated check, which was stopped (a malformed file can make it loop)");
  if (w == pid && WIFSIGNALED(st))
    fail(what, ": the parser crashed on it in the isolated check (signal ", WTERMSIG(st), ", ",
         ::strsignal(WTERMSIG(st)), "): the file is malformed");
  fail(what, ": the isolated check ended without a result (",
       w == pid && WIFEXITED(st) ? ipuml::detail::str("exit status ", WEXITSTATUS(st))
                                 : std::string("status unknown"),
       ")");
}

}  // namespace ipuml::io
