// Bodies of the public ops, split by family (compiled once in compiled mode).
#pragma once

#include <ipuml/tensor/ops_common_impl.hpp>
#include <ipuml/tensor/ops_creation_impl.hpp>
#include <ipuml/tensor/ops_elementwise_impl.hpp>
#include <ipuml/tensor/ops_reduce_impl.hpp>
#include <ipuml/tensor/ops_movement_impl.hpp>
#include <ipuml/tensor/ops_nn_impl.hpp>
#include <ipuml/tensor/ops_linalg_impl.hpp>
#include <ipuml/tensor/ops_attention_impl.hpp>
#include <ipuml/tensor/ops_optim_impl.hpp>
#include <ipuml/tensor/tensor_methods_impl.hpp>
#include <ipuml/tensor/indexing_impl.hpp>
