// Compiled-mode home of the IPU backend's bodies (ipuml::ipuml).
#include <ipuml/backends/ipu/ipu_backend.hpp>
#include <ipuml/backends/ipu/ipu_backend_impl.hpp>
