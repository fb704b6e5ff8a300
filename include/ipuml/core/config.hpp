// Build-mode switches shared by every header: header-only (default) or compiled library.
// In compiled mode (IPUML_COMPILED_LIB) the *_impl.hpp files are compiled once in src/lib.
#pragma once

#ifdef IPUML_COMPILED_LIB
#define IPUML_INLINE
#else
#define IPUML_INLINE inline
#define IPUML_HEADER_ONLY 1
#endif

// Include an implementation file only in header-only mode.
#ifdef IPUML_HEADER_ONLY
#define IPUML_INCLUDE_IMPL 1
#endif
