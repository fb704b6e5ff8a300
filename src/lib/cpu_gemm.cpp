#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/gemm_impl.hpp>
