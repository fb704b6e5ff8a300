// The IPU emulator backend in one include: targets, the cycle model, and the emulator core's
// compiler, executable and reports with the IPU's entry points (compile.hpp).
// Usage: auto exe = ipu::compile(trace.graph, ipu::target_preset("ipu2")); exe->run(inputs,
// states);
#pragma once

#include <ipuml/backends/ipu/compile.hpp>
#include <ipuml/backends/ipu/cycle_model.hpp>
#include <ipuml/backends/ipu/target.hpp>
