// The IPU emulator backend in one include: targets, compiler, executable, cycle model, profile.
// Usage: auto exe = ipu::compile(trace.graph, ipu::target_preset("ipu2")); exe->run(inputs,
// states);
#pragma once

#include <ipuml/backends/ipu/compiler.hpp>
#include <ipuml/backends/ipu/cycle_model.hpp>
#include <ipuml/backends/ipu/executor.hpp>
#include <ipuml/backends/ipu/partition.hpp>
#include <ipuml/backends/ipu/profile.hpp>
#include <ipuml/backends/ipu/target.hpp>
#include <ipuml/backends/ipu/trace.hpp>
