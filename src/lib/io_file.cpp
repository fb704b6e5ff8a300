// Compiled-mode home of <ipuml/io/file.hpp>'s bodies (ipuml::ipuml).
#include <ipuml/io/file.hpp>
#include <ipuml/io/file_impl.hpp>
