// Compiled-mode home of the CPU backend's bodies (ipuml::ipuml).
#include <ipuml/backends/cpu/cpu_backend.hpp>
#include <ipuml/backends/cpu/cpu_backend_impl.hpp>
