// Compiled-mode home of the image augmentations' bodies (ipuml::ipuml).
#include <ipuml/data/image_transforms.hpp>
#include <ipuml/data/image_transforms_impl.hpp>
