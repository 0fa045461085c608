// SPDX-License-Identifier: Apache-2.0
// `cuda.custom.embedding`: embedding forward (row gather, grid-stride over the n x dim outputs)
// and a deterministic backward (sort positions by id with CUB's stable radix sort, then one
// block per run of equal ids sums that id's rows of dy in position order), f32/f64 values,
// i32/i64 ids, dense row-major weight/grad [rows, dim], ids [n], out/dy [n, dim].
//
// Note [Deterministic embedding backward]
// atomicAdd of every dy row into grad would make the float sums depend on the order in which
// blocks run. Instead the positions 0..n-1 are sorted by id (radix sort is stable: equal ids
// keep increasing positions), and the block that owns a run of equal ids adds their rows in that
// order, starting from 0: grad[v, c] = ((0 + dy[p0, c]) + dy[p1, c]) + ..., exactly the order of
// the CPU variants (cpu.omp, ref), so the GPU result is bit-equal to theirs and to itself run
// after run. Cost: one sort of n 32-bit keys and values plus one pass over dy.
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_error_report.cuh"
#include "kernels/cuda/embedding_kernels.h"
#include "kernels/cuda/pointwise_geometry.cuh"
#include "kernels/value_index_types.h"

namespace anvil::cuda {
namespace {

constexpr int kEmbThreads = 256;
constexpr unsigned kBadKey = 0xffffffffu;

unsigned grid_for(std::int64_t work) {
  const std::int64_t blocks = (work + kEmbThreads - 1) / kEmbThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks < 1 ? 1 : blocks) : 65535 * 8);
}

template <typename T, typename I>
__global__ void gather_kernel(const T* weight, const I* ids, T* out, std::int64_t rows,
                              std::int64_t dim, std::int64_t total, unsigned long long* bad_pos) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = e / dim, c = e - r * dim;
    const std::int64_t id = static_cast<std::int64_t>(ids[r]);
    if (id >= 0 && id < rows) {
      out[e] = weight[id * dim + c];
    } else {
      out[e] = device_nan<T>();
      if (c == 0) atomicMin(bad_pos, static_cast<unsigned long long>(r));
    }
  }
}

// keys[i] = ids[i] (kBadKey when out of range), values[i] = i.
template <typename I>
__global__ void keys_kernel(const I* ids, std::int64_t rows, std::int64_t n, unsigned* keys,
                            unsigned* values) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t id = static_cast<std::int64_t>(ids[i]);
    keys[i] = id >= 0 && id < rows ? static_cast<unsigned>(id) : kBadKey;
    values[i] = static_cast<unsigned>(i);
  }
}

// Block b: if sorted index b starts a run of equal keys, grad[key, :] = sum of the run's dy rows
// in position order (Note [Deterministic embedding backward]).
template <typename T>
__global__ void run_sum_kernel(const unsigned* keys, const unsigned* positions, const T* dy,
                               T* grad, std::int64_t n, std::int64_t dim) {
  for (std::int64_t b = blockIdx.x; b < n; b += gridDim.x) {
    const unsigned key = keys[b];
    if (key == kBadKey || (b > 0 && keys[b - 1] == key)) continue;  // uniform per block
    std::int64_t end = b + 1;
    while (end < n && keys[end] == key) ++end;
    for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
      T acc = T(0);
      for (std::int64_t k = b; k < end; ++k)
        acc += dy[static_cast<std::int64_t>(positions[k]) * dim + c];
      grad[static_cast<std::int64_t>(key) * dim + c] = acc;
    }
  }
}

void check_types(const char* where, DType dtype, DType index_dtype) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::f64, where, "needs f32 or f64, got ",
              dtype_name(dtype));
  ANVIL_CHECK(index_dtype == DType::i32 || index_dtype == DType::i64, where,
              "needs i32 or i64 ids, got ", dtype_name(index_dtype));
}

std::size_t align_up(std::size_t b) { return (b + 255) / 256 * 256; }

std::size_t cub_temp_bytes(std::int64_t n) {
  std::size_t bytes = 0;
  ANVIL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const unsigned*>(nullptr), static_cast<unsigned*>(nullptr),
      static_cast<const unsigned*>(nullptr), static_cast<unsigned*>(nullptr),
      static_cast<std::int64_t>(n), 0, 32, static_cast<cudaStream_t>(nullptr)));
  return bytes;
}

}  // namespace

std::size_t embedding_forward_scratch_bytes() { return sizeof(unsigned long long); }

void embedding_forward(cudaStream_t stream, DType dtype, DType index_dtype, const void* weight,
                       const void* ids, void* out, std::int64_t rows, std::int64_t dim,
                       std::int64_t n, void* scratch, DeviceErrorRecord* record) {
  check_types("embedding_forward", dtype, index_dtype);
  if (n == 0 || dim == 0) return;
  ANVIL_CHECK(scratch != nullptr && record != nullptr, "embedding_forward",
              "null scratch or error record");
  auto* bad = static_cast<unsigned long long*>(scratch);
  ANVIL_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), stream));  // "none"
  const std::int64_t total = n * dim;
  kernels::visit_value_and_index(dtype, index_dtype, [&](auto zero, auto izero) {
    using T = decltype(zero);
    using I = decltype(izero);
    gather_kernel<T, I><<<grid_for(total), kEmbThreads, 0, stream>>>(
        static_cast<const T*>(weight), static_cast<const I*>(ids), static_cast<T*>(out), rows, dim,
        total, bad);
    ANVIL_CUDA_CHECK(cudaGetLastError());
    report_bad_id<I><<<1, 1, 0, stream>>>(bad, static_cast<const I*>(ids), rows,
                                          kDeviceErrorEmbeddingIndex, record);
    ANVIL_CUDA_CHECK(cudaGetLastError());
  });
}

std::size_t embedding_backward_scratch_bytes(std::int64_t n) {
  if (n <= 0) return 0;
  const std::size_t words = align_up(static_cast<std::size_t>(n) * sizeof(unsigned));
  return 4 * words + align_up(cub_temp_bytes(n));
}

void embedding_backward(cudaStream_t stream, DType dtype, DType index_dtype, const void* dy,
                        const void* ids, void* grad, std::int64_t rows, std::int64_t dim,
                        std::int64_t n, void* scratch, std::size_t scratch_bytes) {
  check_types("embedding_backward", dtype, index_dtype);
  ANVIL_CHECK(n < (std::int64_t{1} << 31) && rows < (std::int64_t{1} << 32) - 1,
              "embedding_backward", "sizes beyond 32-bit sort keys: n=", n, " rows=", rows);
  if (rows == 0 || dim == 0) return;
  ANVIL_CUDA_CHECK(
      cudaMemsetAsync(grad, 0, static_cast<std::size_t>(rows * dim) * dtype_size(dtype), stream));
  if (n == 0) return;
  const std::size_t words = align_up(static_cast<std::size_t>(n) * sizeof(unsigned));
  const std::size_t temp = align_up(cub_temp_bytes(n));
  ANVIL_CHECK(scratch != nullptr && scratch_bytes >= 4 * words + temp, "embedding_backward",
              "scratch of ", scratch_bytes, " bytes, needs ", 4 * words + temp);
  char* base = static_cast<char*>(scratch);
  auto* keys_in = reinterpret_cast<unsigned*>(base);
  auto* keys_out = reinterpret_cast<unsigned*>(base + words);
  auto* values_in = reinterpret_cast<unsigned*>(base + 2 * words);
  auto* values_out = reinterpret_cast<unsigned*>(base + 3 * words);
  void* cub_temp = base + 4 * words;
  std::size_t temp_bytes = temp;
  kernels::visit_value_and_index(dtype, index_dtype, [&](auto zero, auto izero) {
    using T = decltype(zero);
    using I = decltype(izero);
    keys_kernel<I><<<grid_for(n), kEmbThreads, 0, stream>>>(static_cast<const I*>(ids), rows, n,
                                                            keys_in, values_in);
    ANVIL_CUDA_CHECK(cudaGetLastError());
    ANVIL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_temp, temp_bytes, keys_in, keys_out,
                                                     values_in, values_out, n, 0, 32, stream));
    const unsigned blocks = static_cast<unsigned>(n < 65535 * 16 ? n : 65535 * 16);
    const int threads = dim >= 256 ? 256 : (dim >= 64 ? 64 : 32);
    run_sum_kernel<T><<<blocks, threads, 0, stream>>>(
        keys_out, values_out, static_cast<const T*>(dy), static_cast<T*>(grad), n, dim);
    ANVIL_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace anvil::cuda
