// Compiled-mode home of the communicators (ipuml::ipuml); IPUML_WITH_MPI is set for this file
// when CMake found MPI.
#include <ipuml/dist/communicator.hpp>
#include <ipuml/dist/communicator_impl.hpp>
