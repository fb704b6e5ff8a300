#include <ipuml/backends/cpu/conv.hpp>
#include <ipuml/backends/cpu/conv_impl.hpp>
