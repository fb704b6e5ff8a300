#include <ipuml/backends/emu/matrix_plan.hpp>
#include <ipuml/backends/emu/matrix_plan_impl.hpp>
