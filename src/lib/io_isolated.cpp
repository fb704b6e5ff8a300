// Compiled-mode home of <ipuml/io/isolated.hpp>'s bodies (ipuml::ipuml).
#include <ipuml/io/isolated.hpp>
#include <ipuml/io/isolated_impl.hpp>
