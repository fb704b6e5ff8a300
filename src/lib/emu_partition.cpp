#include <ipuml/backends/emu/partition.hpp>
#include <ipuml/backends/emu/partition_impl.hpp>
