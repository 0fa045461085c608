// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the `cuda.custom` pooling kernels (pool_kernels.cu): max, average and
// adaptive-average 2-D pooling over dense NCHW planes, forward and backward, f32/f64, with the
// window, divisor, tie and index rules of the CPU `ref` (kernels/cpu/ref/pool_ref.cpp).
// C++17-clean (plain pointers and extents); enqueued on `stream`, not waited for.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "kernels/cuda/pool_window.h"  // PoolGeometry, PoolCode

namespace anvil::cuda {

// y[p, i, j] = the window's max / average. For max, index (may be null: inference) receives
// ih*W + iw of the first maximum in row-major window order (a NaN always wins, the last one in
// window order: Note [NaN propagation]), as `ref` does. Nothing is launched when the output
// has no elements.
void pool_forward(cudaStream_t stream, DType dtype, const PoolGeometry& g, const void* x, void* y,
                  std::int32_t* index);

// dx (written entirely) from dy; max needs the index of its forward. One thread per input
// element gathers the outputs whose window holds it, in ascending output order, accumulating in
// the data type, as `ref` scatters: the result equals ref's bit for bit. No atomics.
void pool_backward(cudaStream_t stream, DType dtype, const PoolGeometry& g, const void* dy,
                   void* dx, const std::int32_t* index);

}  // namespace anvil::cuda
