// Compiled-mode home of F::rotary_embedding's bodies (ipuml::ipuml).
#include <ipuml/nn/rotary_embedding.hpp>
#include <ipuml/nn/rotary_embedding_impl.hpp>
