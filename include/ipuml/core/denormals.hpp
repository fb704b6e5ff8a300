// Flushing denormal floats to zero, as torch.set_flush_denormal does. Arithmetic that produces or
// reads denormals (|x| < 1.2e-38) runs many times slower on x86 cores; gradients of a saturating
// model drift there late in training (the eager MNIST example slows by a third by epoch 8).
// With the mode on, such values become zero: results change only where they were below 1.2e-38.
#pragma once

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define IPUML_HAS_FLUSH_DENORMAL 1
#endif

namespace ipuml {

namespace detail {

// 0: never set (ipuml leaves every thread's mode alone), 1: flush, 2: keep denormals.
inline std::atomic<int>& denormal_mode() {
  static std::atomic<int> mode{0};
  return mode;
}

// Brings the calling thread's mode in line with set_flush_denormal. ipuml's parallel loops and
// kernel entry call it, so oneTBB's worker threads follow the setting too.
inline void apply_denormal_mode() {
#ifdef IPUML_HAS_FLUSH_DENORMAL
  const int mode = denormal_mode().load(std::memory_order_relaxed);
  if (mode == 0) return;
  constexpr unsigned kFtzDaz = 0x8040u;  // MXCSR flush-to-zero | denormals-are-zero
  const unsigned want = mode == 1 ? kFtzDaz : 0u, csr = _mm_getcsr();
  if ((csr & kFtzDaz) != want) _mm_setcsr((csr & ~kFtzDaz) | want);
#endif
}

}  // namespace detail

// Turns flushing of denormal floats to zero on or off for ipuml's computations on every thread.
// Returns false, and changes nothing, on CPUs without such a mode (as PyTorch does).
inline bool set_flush_denormal(bool on) {
#ifdef IPUML_HAS_FLUSH_DENORMAL
  detail::denormal_mode().store(on ? 1 : 2);
  detail::apply_denormal_mode();
  return true;
#else
  (void)on;
  return false;
#endif
}

// Whether set_flush_denormal(true) is in force.
inline bool flush_denormal() { return detail::denormal_mode().load() == 1; }

}  // namespace ipuml
