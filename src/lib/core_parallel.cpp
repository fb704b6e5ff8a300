// Compiled-mode home of the parallel loop's and thread limit's bodies (ipuml::ipuml).
#include <ipuml/core/parallel.hpp>
#include <ipuml/core/parallel_impl.hpp>
