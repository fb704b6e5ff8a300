#include <ipuml/backends/emu/compiler.hpp>
#include <ipuml/backends/emu/compiler_impl.hpp>
