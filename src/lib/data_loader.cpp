// Compiled-mode home of the DataLoader's prefetcher and collation (ipuml::ipuml).
#include <ipuml/data/dataloader.hpp>
#include <ipuml/data/dataloader_impl.hpp>
