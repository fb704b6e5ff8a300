// Compiled-mode home of the HDF5 checkpoint bodies (ipuml::ipuml).
#include <ipuml/io/checkpoint.hpp>

#if IPUML_WITH_HDF5
#include <ipuml/io/checkpoint_impl.hpp>
#endif
