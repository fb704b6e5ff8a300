#include <ipuml/backends/ipu/compiler.hpp>
#include <ipuml/backends/ipu/compiler_impl.hpp>
