#include <ipuml/backends/cpu/gemm.hpp>
#include <ipuml/backends/cpu/gemm_impl.hpp>

namespace ipuml::cpu::detail {

template IPUML_RUN_GEMM(PackRowMajorA, PackRowMajorB);
template IPUML_RUN_GEMM(PackRowMajorA, PackColMajorB);
template IPUML_RUN_GEMM(PackColMajorA, PackRowMajorB);
template IPUML_RUN_GEMM(PackColMajorA, PackColMajorB);

}  // namespace ipuml::cpu::detail
