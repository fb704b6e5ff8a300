// Compiled-mode home of the Cerebras target presets and overrides (ipuml::ipuml).
#include <ipuml/backends/cerebras/target.hpp>
#include <ipuml/backends/cerebras/target_impl.hpp>
