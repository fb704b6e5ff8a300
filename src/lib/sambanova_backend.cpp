// Compiled-mode home of the SambaNova backend's bodies and its section plan (ipuml::ipuml).
#include <ipuml/backends/sambanova/sambanova_backend.hpp>
#include <ipuml/backends/sambanova/sambanova_backend_impl.hpp>
#include <ipuml/backends/sambanova/sections_impl.hpp>
