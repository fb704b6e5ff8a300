#include <ipuml/backends/ipu/profile.hpp>
#include <ipuml/backends/ipu/profile_impl.hpp>
