// Registration of the CUDA training family (to be written).
#include "kernels/cuda/register_cuda.h"

namespace anvil::cuda {

void register_cuda_training() {}

}  // namespace anvil::cuda
