// Compiled-mode home of the Optimizer base's bodies (ipuml::ipuml).
#include <ipuml/optim/optimizer.hpp>
#include <ipuml/optim/optimizer_impl.hpp>
