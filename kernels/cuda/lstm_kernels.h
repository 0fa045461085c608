// SPDX-License-Identifier: Apache-2.0
#pragma once
// Launchers of the pointwise parts of the own CUDA LSTM variants (lstm_kernels.cu); the GEMMs
// run through the gemm table (lstm_register.cpp). Gate blocks per row in PyTorch's order
// (i, f, g, o), each H wide: gates [B, 4H]; states [B, H]; all dense row-major, f32 or f64.
// `fused` = one kernel per step and direction; unfused = one launch per pointwise operation
// (DLBench's "many small kernels" cell). Enqueued on `stream`, never waited for. C++17-clean.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/core/dtype.h"

namespace anvil::cuda {

// g[r, :] = b_ih (+ b_hh when not null) for every row r of g [rows, 4H].
void lstm_bias_rows(cudaStream_t stream, DType dtype, void* g, const void* b_ih, const void* b_hh,
                    std::int64_t rows, std::int64_t h4);

// Forward cell of one step: gates hold the pre-activations (both GEMMs and the biases); they are
// replaced by the activations (i, f, g, o: what backward needs), c = f * c_prev + i * g
// (c_prev null = zeros), h = o * tanh(c). `scratch` ([B, H]) is used by the unfused form only.
void lstm_cell_forward(cudaStream_t stream, DType dtype, bool fused, void* gates,
                       const void* c_prev, void* c, void* h, void* scratch, std::int64_t B,
                       std::int64_t H);

// Backward cell of one step, from the activated gates, c_prev (null = zeros), c, dy_t, dh_next
// and dc_next (null = zeros): dgates = the pre-activation gradients [B, 4H]; dc_prev [B, H]
// (may be the same buffer as dc_next). `scratch` (3 x [B, H]) for the unfused form.
void lstm_cell_backward(cudaStream_t stream, DType dtype, bool fused, const void* gates,
                        const void* c_prev, const void* c, const void* dy_t, const void* dh_next,
                        const void* dc_next, void* dgates, void* dc_prev, void* scratch,
                        std::int64_t B, std::int64_t H);

// out[j] = sum over rows of m[r, j], accumulated in double, fixed order (deterministic).
void lstm_column_sums(cudaStream_t stream, DType dtype, const void* m, void* out, std::int64_t rows,
                      std::int64_t cols);

}  // namespace anvil::cuda
