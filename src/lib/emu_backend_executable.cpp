// Compiled-mode home of the emulator's backend executable (ipuml::ipuml).
#include <ipuml/backends/emu/backend_executable.hpp>
#include <ipuml/backends/emu/backend_executable_impl.hpp>
