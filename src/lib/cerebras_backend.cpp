// Compiled-mode home of the Cerebras backend's bodies and its pipelined layout (ipuml::ipuml).
#include <ipuml/backends/cerebras/cerebras_backend.hpp>
#include <ipuml/backends/cerebras/cerebras_backend_impl.hpp>
#include <ipuml/backends/cerebras/layer_pipeline_impl.hpp>
#include <ipuml/backends/cerebras/wafer_view_impl.hpp>
