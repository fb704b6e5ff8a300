// Build-mode switches shared by every header.
//
// - Header-only (the default): the headers declare; exactly one translation unit of the program
//   defines IPUML_IMPLEMENTATION before including ipuml's headers and compiles every definition
//   there (the stb convention), so the program's other translation units compile in seconds.
//   That unit includes every ipuml header the program uses (ipuml.hpp, and any datasets/ or
//   backends/ headers beyond it).
// - Compiled library (IPUML_COMPILED_LIB, the ipuml::ipuml CMake target): the definitions are
//   compiled once in src/lib; no translation unit of the program defines them.
// - IPUML_HEADER_ONLY_INLINE: every translation unit compiles every definition as inline
//   functions (slow, about 50 s of CPU per unit at -O2, but nothing to arrange).
#pragma once

#if defined(IPUML_COMPILED_LIB)
#define IPUML_INLINE
#elif defined(IPUML_HEADER_ONLY_INLINE)
#define IPUML_INLINE inline
#define IPUML_HEADER_ONLY 1
#define IPUML_INCLUDE_IMPL 1
#elif defined(IPUML_IMPLEMENTATION)
#define IPUML_INLINE
#define IPUML_HEADER_ONLY 1
#define IPUML_INCLUDE_IMPL 1
#else
#define IPUML_INLINE
#define IPUML_HEADER_ONLY 1
#endif

// HDF5 (checkpoints, ipuml::save/load, HDF5 data sets): the build says IPUML_WITH_HDF5=1 or 0;
// header-only use without the flag turns it on when HDF5's headers are on the include path and
// otherwise stops with a message, instead of quietly leaving checkpoints out.
#ifndef IPUML_WITH_HDF5
#if __has_include(<hdf5.h>)
#define IPUML_WITH_HDF5 1
#else
#error \
    "ipuml: HDF5's headers were not found (checkpoints and HDF5 data sets need them): install libhdf5-dev and add -I/usr/include/hdf5/serial and -lhdf5_serial, or define IPUML_WITH_HDF5=0 to build without them"
#endif
#endif
