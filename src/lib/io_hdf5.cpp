// Compiled-mode home of the HDF5 layer's bodies (ipuml::ipuml).
#include <ipuml/io/hdf5.hpp>

#if IPUML_WITH_HDF5
#include <ipuml/io/hdf5_impl.hpp>
#endif
