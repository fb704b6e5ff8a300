// The data umbrella: Example, the Dataset concept and CRTP base, transforms and augmentations,
// samplers and the prefetching DataLoader (namespace ipuml::data).
#pragma once

#include <ipuml/data/example.hpp>
#include <ipuml/data/dataset.hpp>
#include <ipuml/data/transforms.hpp>
#include <ipuml/data/augment.hpp>
#include <ipuml/data/image_transforms.hpp>
#include <ipuml/data/samplers.hpp>
#include <ipuml/data/dataloader.hpp>
#include <ipuml/data/make_data_loader.hpp>
