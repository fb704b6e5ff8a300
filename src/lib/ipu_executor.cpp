#include <ipuml/backends/ipu/executor.hpp>
#include <ipuml/backends/ipu/executor_impl.hpp>
