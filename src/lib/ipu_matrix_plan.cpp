#include <ipuml/backends/ipu/matrix_plan.hpp>
#include <ipuml/backends/ipu/matrix_plan_impl.hpp>
