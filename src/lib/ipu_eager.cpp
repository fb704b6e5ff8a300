#include <ipuml/backends/ipu/eager.hpp>
#include <ipuml/backends/ipu/eager_impl.hpp>
