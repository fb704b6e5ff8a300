#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/backends/ipu/target_impl.hpp>
