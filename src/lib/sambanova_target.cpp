// Compiled-mode home of the SambaNova target presets and overrides (ipuml::ipuml).
#include <ipuml/backends/sambanova/target.hpp>
#include <ipuml/backends/sambanova/target_impl.hpp>
