#include <ipuml/backends/emu/trace.hpp>
#include <ipuml/backends/emu/trace_impl.hpp>
