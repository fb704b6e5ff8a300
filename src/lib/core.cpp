// Compiled mode: the tensor core, autograd, tracing and dispatch, instantiated once.
#include <ipuml/ipuml.hpp>

#include <ipuml/ir/op_catalogue_impl.hpp>
#include <ipuml/ir/trace_impl.hpp>
#include <ipuml/tensor/dispatch_impl.hpp>
#include <ipuml/tensor/ops_impl.hpp>
#include <ipuml/autograd/engine_impl.hpp>
#include <ipuml/backends/cpu/graph_executor_impl.hpp>
#include <ipuml/backends/cpu/op_profile_impl.hpp>
