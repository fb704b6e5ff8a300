// Compiled-mode home of nn::Module's bodies (ipuml::ipuml).
#include <ipuml/nn/module.hpp>
#include <ipuml/nn/module_impl.hpp>
