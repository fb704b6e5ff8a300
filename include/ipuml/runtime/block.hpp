// BeginBlock: PopTorch's model-parallel annotation. `runtime::BeginBlock(net->layer2, 1)` puts
// layer2 and everything after it on IPU 1 of each replica (backward ops follow their forward).
#pragma once

#include <ipuml/nn/module.hpp>

namespace ipuml::runtime {

template <typename Holder>
Holder BeginBlock(Holder module, int ipu_id) {
  module->begin_block(ipu_id);
  return module;
}

}  // namespace ipuml::runtime
