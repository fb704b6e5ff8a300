#include <ipuml/backends/ipu/calibration.hpp>
#include <ipuml/backends/ipu/calibration_impl.hpp>
