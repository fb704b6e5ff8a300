#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/backends/cpu/kernels_impl.hpp>
