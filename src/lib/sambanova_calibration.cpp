// Compiled-mode home of the SambaNova calibration microbenchmarks (ipuml::ipuml).
#include <ipuml/backends/sambanova/calibration.hpp>
#include <ipuml/backends/sambanova/calibration_impl.hpp>
