// Placeholder: strided copy and fill kernels (kernels/cuda/copy_kernels.h), to be written.
#include "kernels/cuda/copy_kernels.h"
#include "kernels/cuda/cuda_check.h"

namespace anvil::cuda {

void strided_copy(cudaStream_t, const std::int64_t*, int, DeviceOperand, DeviceOperand) {
  throw Error("strided_copy: not implemented yet");
}
void strided_fill(cudaStream_t, const std::int64_t*, int, DeviceOperand, double) {
  throw Error("strided_fill: not implemented yet");
}

}  // namespace anvil::cuda
