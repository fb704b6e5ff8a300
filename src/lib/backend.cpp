// Compiled-mode home of the backend registry's and the backend interface's bodies (ipuml::ipuml).
#include <ipuml/backend/backend.hpp>
#include <ipuml/backend/backend_impl.hpp>
