#include <ipuml/backends/ipu/partition.hpp>
#include <ipuml/backends/ipu/partition_impl.hpp>
