// ipuml: an embeddable C++ deep-learning library with IPU emulation.
// The umbrella header: tensors, autograd, tracing, nn, optim, data, checkpoints, the runtime
// and both backends (CPU and the IPU emulator).
#pragma once

#include <ipuml/version.hpp>
#include <ipuml/core/config.hpp>
#include <ipuml/core/denormals.hpp>
#include <ipuml/core/dtype.hpp>
#include <ipuml/core/error.hpp>
#include <ipuml/core/parallel.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/core/shape.hpp>
#include <ipuml/tensor/tensor.hpp>
#include <ipuml/tensor/ops.hpp>
#include <ipuml/tensor/indexing.hpp>
#include <ipuml/tensor/tensor_literal.hpp>
#include <ipuml/autograd/grad_mode.hpp>
#include <ipuml/autograd/node.hpp>
#include <ipuml/autograd/gradcheck.hpp>
#include <ipuml/ir/graph.hpp>
#include <ipuml/ir/trace.hpp>
#include <ipuml/backend/backend.hpp>
#include <ipuml/backends/cpu/cpu_backend.hpp>
#include <ipuml/backends/cpu/graph_executor.hpp>
#include <ipuml/backends/ipu/ipu_backend.hpp>
#include <ipuml/backends/cerebras/cerebras_backend.hpp>
#include <ipuml/backends/sambanova/sambanova_backend.hpp>
#include <ipuml/nn/nn.hpp>
#include <ipuml/optim/optim.hpp>
#include <ipuml/runtime/block.hpp>
#include <ipuml/runtime/options.hpp>
#include <ipuml/runtime/trace_step.hpp>
#include <ipuml/runtime/training_model.hpp>
#include <ipuml/data/data.hpp>
#include <ipuml/io/checkpoint.hpp>
#include <ipuml/io/serialize.hpp>
