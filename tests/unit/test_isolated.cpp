// io::run_isolated: a check run in a child process, whose crash, hang or error becomes an
// ipuml::Error in the caller; and the readers that probe files with it first.
#include <ipuml/io/isolated.hpp>
#include <ipuml/ipuml.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../support/error_of.hpp"

#include <atomic>
#include <chrono>
#include <thread>
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>

using namespace ipuml;
using testing::error_of;

namespace {

// Restores the process-wide isolation settings a test changed.
struct IsolationSettings {
  bool on = io::parser_isolation();
  double timeout = io::parser_isolation_timeout();
  ~IsolationSettings() { io::set_parser_isolation(on, timeout); }
};

}  // namespace

TEST_CASE("run_isolated runs the check in a child and reports how it ended", "[isolated]") {
  IsolationSettings keep;
  io::set_parser_isolation(true, 60.0);
  // What the check changes stays in the child.
  int changed = 0;
  const pid_t me = ::getpid();
  pid_t where = me;
  CHECK_NOTHROW(io::run_isolated("probe", [&] {
    changed = 1;
    where = ::getpid();
  }));
  CHECK(changed == 0);
  CHECK(where == me);

  // An ipuml::Error comes back as itself; another exception names what was checked.
  CHECK(error_of([] {
          io::run_isolated("probe", [] { fail("bad shape [3, 4], expected [4]"); });
        }) == "bad shape [3, 4], expected [4]");
  CHECK(error_of([] { io::run_isolated("file x", [] { throw std::runtime_error("boom"); }); }) ==
        "file x: the isolated check failed: boom");

  // A crash, an abort, an exit without a result. (The expected texts are built with append:
  // GCC 12 at -O3 warns falsely of an out-of-bounds copy in `"literal" + std::string&&`.)
  std::string segv = "file x: the parser crashed on it in the isolated check (signal ";
  segv.append(std::to_string(SIGSEGV));
  std::string abrt = "crashed on it in the isolated check (signal ";
  abrt.append(std::to_string(SIGABRT));
  CHECK_THAT(error_of([] { io::run_isolated("file x", [] { std::raise(SIGSEGV); }); }),
             Catch::StartsWith(segv) && Catch::Contains("the file is malformed"));
  CHECK_THAT(error_of([] { io::run_isolated("file x", [] { std::abort(); }); }),
             Catch::Contains(abrt));
  CHECK(error_of([] { io::run_isolated("file x", [] { ::_exit(3); }); }) ==
        "file x: the isolated check ended without a result (exit status 3)");

  // A hang is stopped at the timeout.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THAT(error_of([] {
               io::run_isolated(
                   "file x",
                   [] {
                     for (;;) ::pause();
                   },
                   0.3);
             }),
             Catch::StartsWith("file x: the parser did not finish within 0.3 s"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  // The process-wide timeout is the default.
  io::set_parser_isolation(true, 0.2);
  CHECK_THAT(error_of([] { io::run_isolated("f", [] { ::sleep(30); }); }),
             Catch::Contains("within 0.2 s"));
}

TEST_CASE("run_isolated with isolation off runs the check here", "[isolated]") {
  IsolationSettings keep;
  io::set_parser_isolation(false);
  CHECK_FALSE(io::parser_isolation());
  int changed = 0;
  io::run_isolated("probe", [&] { changed = 1; });
  CHECK(changed == 1);
  CHECK(error_of([] { io::run_isolated("probe", [] { fail("here"); }); }) == "here");
  CHECK_THAT(error_of([] { io::set_parser_isolation(true, 0.0); }),
             Catch::Contains("timeout must be a positive number of seconds, got 0"));
  CHECK_THAT(error_of([] { io::set_parser_isolation(true, -1.0); }), Catch::Contains("got -1"));
  CHECK_FALSE(io::parser_isolation());  // a refused setting changes nothing
}

TEST_CASE("run_isolated waits for threads inside a ForkFence", "[isolated]") {
  // A thread inside libhdf5 holds libhdf5's lock: a child forked then would wait for it forever.
  // io::H5File's calls are fenced, and the fork waits for the fence.
  IsolationSettings keep;
  io::set_parser_isolation(true, 20.0);
  std::atomic<bool> inside{false}, left{false};
  std::thread t([&] {
    const io::ForkFence fence;
    const io::ForkFence nested;  // nesting within a thread is one fence
    inside = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    left = true;
  });
  while (!inside) std::this_thread::yield();
  bool left_first = false;
  CHECK_NOTHROW(io::run_isolated("probe", [] {}));
  left_first = left;
  t.join();
  CHECK(left_first);
  // A fence held by the calling thread itself does not block its own fork.
  const io::ForkFence mine;
  CHECK_NOTHROW(io::run_isolated("probe", [] { const io::ForkFence in_child; }));
}

TEST_CASE("run_isolated runs the check in place when the process cannot fork", "[isolated]") {
  // A test child whose fork() is refused: RLIMIT_NPROC 0 (root first becomes an unprivileged
  // user, for whom the limit holds). The probe then runs in the caller, as with isolation off.
  IsolationSettings keep;
  io::set_parser_isolation(true, 60.0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(10);
    const rlimit none{0, 0};
    if (::setrlimit(RLIMIT_NPROC, &none) != 0) ::_exit(11);
    const pid_t probe_fork = ::fork();  // the limit holds: no child can start
    if (probe_fork == 0) ::_exit(0);
    if (probe_fork > 0) ::_exit(12);
    const pid_t me = ::getpid();
    pid_t ran_in = 0;
    try {
      io::run_isolated("probe", [&] { ran_in = ::getpid(); });
      if (ran_in != me) code = 13;
      // An Error from the check reaches the caller unchanged.
      try {
        io::run_isolated("probe", [] { fail("bad field 'x'"); });
        code = 14;
      } catch (const Error& e) {
        if (std::string(e.what()) != "bad field 'x'") code = 15;
      }
    } catch (...) {
      code = 16;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  // 10/11: no way to drop privileges or set the limit here; 12: the limit did not stop fork.
  CHECK(WEXITSTATUS(status) == 0);
}
