// Compiled-mode home of the image-set loading's bodies (ipuml::ipuml).
#include <ipuml/datasets/image_sets.hpp>
#include <ipuml/datasets/image_sets_impl.hpp>
