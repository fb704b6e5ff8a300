// Running a parser ipuml does not trust on a file first in a child process, so that what the
// parser does wrong there (a crash or an endless loop, as libhdf5 1.10 does on some crafted
// files) becomes an ipuml::Error here instead of taking the program down or hanging it.
//
// The check runs in a fork()ed copy of the process: it sees everything the caller can, and
// whatever it damages is thrown away with it. It is not a sandbox (the child has the caller's
// rights), and a parser's memory error that does not crash the child (only a sanitizer build
// stops at every one) is not seen.
#pragma once

#include <ipuml/core/config.hpp>

#include <functional>
#include <string>

namespace ipuml::io {

// Runs `check` in a child process and returns once it returned there. Throws ipuml::Error with
// the child's message when `check` threw one, and an Error naming `what` and the signal, exit
// status or timeout when the child crashed, exited without a result, or did not finish within
// `timeout_seconds` (0: the process-wide setting below; the child is then killed). Runs `check`
// in this process instead when isolation is off, or when the process cannot fork (no memory or
// process slot left). In the child, the caller's crash handlers are reset (signals to their
// default action) and its stderr goes to /dev/null.
void run_isolated(const std::string& what, const std::function<void()>& check,
                  double timeout_seconds = 0);

// Marks a stretch of code that a fork must not cut through: a call into a library that holds
// a lock of its own while it works (libhdf5's global lock: a child forked meanwhile would find
// it held forever). run_isolated waits until no thread is inside a ForkFence and keeps new ones
// waiting while it forks. Nests within a thread; io::H5File holds one in every call.
class ForkFence {
 public:
  ForkFence();
  ~ForkFence();
  ForkFence(const ForkFence&) = delete;
  ForkFence& operator=(const ForkFence&) = delete;
};

// Process-wide settings: isolation on (the default) or off, and the timeout (60 s by default).
// The environment variable IPUML_ISOLATE_PARSERS=0 turns isolation off at start-up. With it off,
// the readers that probe files first (HDF5 checkpoints and cellSpike files) parse them only in
// this process: faster for many small trusted files, and what a fuzzer of libhdf5 itself wants.
void set_parser_isolation(bool on, double timeout_seconds = 60.0);
bool parser_isolation();
double parser_isolation_timeout();

}  // namespace ipuml::io

#ifdef IPUML_INCLUDE_IMPL
#include <ipuml/io/isolated_impl.hpp>
#endif
