// The one translation unit of a header-only program that compiles ipuml's definitions; the
// program's other units include the headers and only declare. Built against ipuml::ipuml (the
// compiled library, IPUML_COMPILED_LIB) it compiles nothing: the library has the definitions.
#define IPUML_IMPLEMENTATION
#include <ipuml/ipuml.hpp>
