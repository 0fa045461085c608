// Registration of the CUDA cuda.cublas, cuda.cublas.tf32 (to be written).
#include "kernels/cuda/register_cuda.h"

namespace anvil::cuda {

void register_cuda_gemm() {}

}  // namespace anvil::cuda
