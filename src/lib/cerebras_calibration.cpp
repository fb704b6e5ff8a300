// Compiled-mode home of the Cerebras calibration microbenchmarks (ipuml::ipuml).
#include <ipuml/backends/cerebras/calibration.hpp>
#include <ipuml/backends/cerebras/calibration_impl.hpp>
