// Compiled-mode home of the samplers' bodies (ipuml::ipuml).
#include <ipuml/data/samplers.hpp>
#include <ipuml/data/samplers_impl.hpp>
