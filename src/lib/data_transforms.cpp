// Compiled-mode home of the data transforms' bodies (ipuml::ipuml).
#include <ipuml/data/transforms.hpp>
#include <ipuml/data/transforms_impl.hpp>
