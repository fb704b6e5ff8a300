// Compiled-mode home of F::interpolate's bodies (ipuml::ipuml).
#include <ipuml/nn/interpolate.hpp>
#include <ipuml/nn/interpolate_impl.hpp>
