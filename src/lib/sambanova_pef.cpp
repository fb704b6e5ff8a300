// Compiled-mode home of the SambaNova PEF reader and writer (ipuml::ipuml).
#include <ipuml/backends/sambanova/pef.hpp>
#include <ipuml/backends/sambanova/pef_impl.hpp>
