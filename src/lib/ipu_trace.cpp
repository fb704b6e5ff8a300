#include <ipuml/backends/ipu/trace.hpp>
#include <ipuml/backends/ipu/trace_impl.hpp>
