// Compiled-mode home of the cellSpike reader's and generator's bodies (ipuml::ipuml).
#include <ipuml/datasets/cellspike.hpp>
#include <ipuml/datasets/cellspike_gen.hpp>

#if IPUML_WITH_HDF5
#include <ipuml/datasets/cellspike_gen_impl.hpp>
#include <ipuml/datasets/cellspike_impl.hpp>
#endif
