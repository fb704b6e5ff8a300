// Compiled-mode home of GeneratedImages' bodies (ipuml::ipuml).
#include <ipuml/datasets/generated_images.hpp>
#include <ipuml/datasets/generated_images_impl.hpp>
