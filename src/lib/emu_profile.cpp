#include <ipuml/backends/emu/profile.hpp>
#include <ipuml/backends/emu/profile_impl.hpp>
