#include <ipuml/backends/emu/executor.hpp>
#include <ipuml/backends/emu/executor_impl.hpp>
