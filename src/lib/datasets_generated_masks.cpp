// Compiled-mode home of GeneratedMasks' bodies (ipuml::ipuml).
#include <ipuml/datasets/generated_masks.hpp>
#include <ipuml/datasets/generated_masks_impl.hpp>
