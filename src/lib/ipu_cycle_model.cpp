#include <ipuml/backends/ipu/cycle_model.hpp>
#include <ipuml/backends/ipu/cycle_model_impl.hpp>
