// SPDX-License-Identifier: Apache-2.0
// Fused multi-tensor optimizer kernels (launchers in optimizer_kernels.h), behind the variants
// cuda.custom.sgd, cuda.custom.adam, cuda.custom.grad_norm and cuda.custom.grad_scale (which
// also runs loss scaling's unscale-and-check pass, scale_check_kernel).
// A list of dense f32/f64 tensors is cut into chunks of kChunk elements; one grid walks all
// chunks of all tensors (grid-stride over the global chunk index), each block finding its
// tensor by binary search in a prefix table of chunk counts (Note [Multi-tensor launch]).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/host_waits.h"
#include "kernels/cuda/optimizer_kernels.h"
#include "kernels/cuda/upload_ring.h"

namespace anvil::cuda {
namespace {

// Note [Multi-tensor launch]
// The host builds one table of 64-bit words for the list and copies it to device scratch on the
// stream through a page-locked slot (upload_small, Note [Small uploads]: a cudaMemcpyAsync from
// pageable memory may wait for the stream), then one kernel covers the list:
//   words [0,n) param, [n,2n) grad, [2n,3n) state1, [3n,4n) state2 (pointers),
//         [4n,5n) numel, [5n,6n) first flag, [6n,7n+1) chunk_start (prefix sums, n+1 entries)
// Chunk c belongs to the tensor s with chunk_start[s] <= c < chunk_start[s+1] (tensors with no
// elements have no chunks and are never found). After the table come kMaxBlocks doubles of
// partial sums and one double of result (sum of squares only).
constexpr std::int64_t kChunk = 16384;  // elements per chunk: 64 per thread of a 256-thread block
constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;  // also the number of partial sums of the reduction
constexpr int kTableWordsPerTensor = 7;

struct DeviceList {
  void* const* param;
  void* const* grad;
  void* const* state1;
  void* const* state2;
  const std::int64_t* numel;
  const std::int64_t* first;
  const std::int64_t* chunk_start;  // count + 1 entries
  int count;
};

std::size_t table_words(int count) {
  return static_cast<std::size_t>(kTableWordsPerTensor) * static_cast<std::size_t>(count) + 1;
}

// Where chunk c's elements are: tensor `s`, elements [begin, end).
struct ChunkRange {
  int s;
  std::int64_t begin, end;
};

__device__ __forceinline__ ChunkRange find_chunk(const DeviceList& l, std::int64_t c) {
  // Largest s in [0, count) with chunk_start[s] <= c (upper bound minus one).
  int lo = 0, hi = l.count;  // invariant: chunk_start[lo] <= c < chunk_start[hi]
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (l.chunk_start[mid] <= c)
      lo = mid;
    else
      hi = mid;
  }
  const std::int64_t begin = (c - l.chunk_start[lo]) * kChunk;
  const std::int64_t end = begin + kChunk < l.numel[lo] ? begin + kChunk : l.numel[lo];
  return {lo, begin, end};
}

__device__ __forceinline__ float dev_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double dev_sqrt(double x) { return sqrt(x); }

template <typename T>
__global__ void sgd_kernel(DeviceList l, std::int64_t total_chunks, T lr, T momentum, T damp, T wd,
                           bool nesterov) {
  for (std::int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const ChunkRange r = find_chunk(l, c);
    T* p = static_cast<T*>(l.param[r.s]);
    const T* g = static_cast<const T*>(l.grad[r.s]);
    T* buf = static_cast<T*>(l.state1[r.s]);
    const bool first = l.first[r.s] != 0;
    for (std::int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
      const T d = g[i] + wd * p[i];
      T step = d;
      if (buf != nullptr) {  // momentum (the host passes null buffers without it)
        const T b = first ? d : momentum * buf[i] + damp * d;
        buf[i] = b;
        step = nesterov ? d + momentum * b : b;
      }
      p[i] -= lr * step;
    }
  }
}

// c_b1, c_b2 are 1 - b1, 1 - b2 rounded from double (as PyTorch passes them); wd is Adam's L2
// coefficient (0 for AdamW), keep AdamW's decay factor 1 - lr*wd (1 for Adam, where
// p * keep - x is p - x exactly).
template <typename T>
__global__ void adam_kernel(DeviceList l, std::int64_t total_chunks, T step_size, T b1, T b2,
                            T c_b1, T c_b2, T eps, T wd, T keep, T inv_sqrt_c2) {
  for (std::int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const ChunkRange r = find_chunk(l, c);
    T* p = static_cast<T*>(l.param[r.s]);
    const T* g = static_cast<const T*>(l.grad[r.s]);
    T* m = static_cast<T*>(l.state1[r.s]);
    T* v = static_cast<T*>(l.state2[r.s]);
    for (std::int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
      const T d = g[i] + wd * p[i];
      const T mi = b1 * m[i] + c_b1 * d;
      const T vi = b2 * v[i] + c_b2 * d * d;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * keep - step_size * mi / (dev_sqrt(vi) * inv_sqrt_c2 + eps);
    }
  }
}

template <typename T>
__global__ void scale_kernel(DeviceList l, std::int64_t total_chunks, T scale) {
  for (std::int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const ChunkRange r = find_chunk(l, c);
    T* g = static_cast<T*>(l.grad[r.s]);
    for (std::int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) g[i] = g[i] * scale;
  }
}

__device__ __forceinline__ bool dev_isfinite(float x) { return isfinite(x); }
__device__ __forceinline__ bool dev_isfinite(double x) { return isfinite(x); }

// scale_kernel that also checks (loss scaling's unscale pass, optim::unscale_grads_): a thread
// that wrote an inf or NaN stores 1 into *found_inf, once, after its loop. The store is an
// atomicExch so that concurrent stores from several threads are well defined; nothing stores 0,
// so the flag only goes from 0 to 1 and the host reads it after the stream has run the kernel.
template <typename T>
__global__ void scale_check_kernel(DeviceList l, std::int64_t total_chunks, T scale,
                                   float* found_inf) {
  bool bad = false;
  for (std::int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const ChunkRange r = find_chunk(l, c);
    T* g = static_cast<T*>(l.grad[r.s]);
    for (std::int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
      const T v = g[i] * scale;
      g[i] = v;
      bad = bad || !dev_isfinite(v);
    }
  }
  if (bad) atomicExch(found_inf, 1.0f);
}

// Sum of a double over the block, in a fixed order; the result is valid in thread 0.
// blockDim.x must be kThreads (a multiple of 32).
__device__ double block_sum(double v) {
  __shared__ double warp_sums[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  double s = 0.0;
  if (threadIdx.x == 0)
    for (int w = 0; w < kThreads / 32; ++w) s += warp_sums[w];
  return s;
}

// Pass 1: partial[b] = sum of g^2 over the chunks block b visits.
template <typename T>
__global__ void sum_squares_kernel(DeviceList l, std::int64_t total_chunks, double* partial) {
  double acc = 0.0;
  for (std::int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const ChunkRange r = find_chunk(l, c);
    const T* g = static_cast<const T*>(l.grad[r.s]);
    for (std::int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) {
      const double x = static_cast<double>(g[i]);
      acc += x * x;
    }
  }
  const double s = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Pass 2 (one block): *result = sum of the `n` partials (+= with `accumulate`).
__global__ void sum_partials_kernel(const double* partial, int n, double* result, bool accumulate) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += partial[i];
  const double s = block_sum(acc);
  if (threadIdx.x == 0) *result = accumulate ? *result + s : s;
}

// Clipping on the device: g *= min(1, max_norm / (sqrt(*sum_squares) + 1e-6)), the factor
// computed in double as clip_grad_norm_ does on the host, then converted to T.
template <typename T>
__global__ void clip_scale_kernel(DeviceList l, std::int64_t total_chunks,
                                  const double* sum_squares, double max_norm) {
  const double f = max_norm / (sqrt(*sum_squares) + 1e-6);
  if (!(f < 1.0)) return;  // uniform over the grid: nothing to scale (as on the host)
  const T scale = static_cast<T>(f);
  for (std::int64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const ChunkRange r = find_chunk(l, c);
    T* g = static_cast<T*>(l.grad[r.s]);
    for (std::int64_t i = r.begin + threadIdx.x; i < r.end; i += blockDim.x) g[i] = g[i] * scale;
  }
}

// Uploads the table of Note [Multi-tensor launch] into `scratch`; returns the device view and
// the total number of chunks (0: nothing to launch).
std::int64_t upload_list(cudaStream_t stream, const MultiTensorEntry* entries, int count,
                         void* scratch, DeviceList& list) {
  ANVIL_CHECK(count >= 0, "multi_tensor", "negative tensor count ", count);
  if (count == 0) return 0;
  ANVIL_CHECK(scratch != nullptr, "multi_tensor", "no device scratch for ", count, " tensors");
  const std::size_t n = static_cast<std::size_t>(count);
  std::vector<std::int64_t> words(table_words(count), 0);
  std::int64_t chunks = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const MultiTensorEntry& e = entries[k];
    ANVIL_CHECK(e.numel >= 0, "multi_tensor", "tensor ", k, " has numel ", e.numel);
    words[0 * n + k] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(e.param));
    words[1 * n + k] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(e.grad));
    words[2 * n + k] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(e.state1));
    words[3 * n + k] = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(e.state2));
    words[4 * n + k] = e.numel;
    words[5 * n + k] = e.first ? 1 : 0;
    words[6 * n + k] = chunks;
    chunks += (e.numel + kChunk - 1) / kChunk;
  }
  words[6 * n + n] = chunks;
  upload_small(scratch, words.data(), words.size() * sizeof(std::int64_t), stream);
  auto* w = static_cast<std::int64_t*>(scratch);
  list.param = reinterpret_cast<void* const*>(w + 0 * n);
  list.grad = reinterpret_cast<void* const*>(w + 1 * n);
  list.state1 = reinterpret_cast<void* const*>(w + 2 * n);
  list.state2 = reinterpret_cast<void* const*>(w + 3 * n);
  list.numel = w + 4 * n;
  list.first = w + 5 * n;
  list.chunk_start = w + 6 * n;
  list.count = count;
  return chunks;
}

int grid_for(std::int64_t chunks) {
  return static_cast<int>(std::min<std::int64_t>(chunks, kMaxBlocks));
}

void check_dtype(DType dtype, const char* where) {
  ANVIL_CHECK(dtype == DType::f32 || dtype == DType::f64, where, "needs f32 or f64, got ",
              dtype_name(dtype));
}

template <typename T>
void launch_sgd(cudaStream_t stream, const DeviceList& l, std::int64_t chunks, const SgdParams& p) {
  sgd_kernel<T><<<grid_for(chunks), kThreads, 0, stream>>>(
      l, chunks, static_cast<T>(p.lr), static_cast<T>(p.momentum),
      static_cast<T>(1.0 - p.dampening), static_cast<T>(p.weight_decay), p.nesterov);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void launch_adam(cudaStream_t stream, const DeviceList& l, std::int64_t chunks,
                 const AdamParams& p) {
  const double wd = p.decoupled_decay ? 0.0 : p.weight_decay;
  const double keep = p.decoupled_decay ? 1.0 - p.lr * p.weight_decay : 1.0;
  adam_kernel<T><<<grid_for(chunks), kThreads, 0, stream>>>(
      l, chunks, static_cast<T>(p.lr / p.c1), static_cast<T>(p.beta1), static_cast<T>(p.beta2),
      static_cast<T>(1.0 - p.beta1), static_cast<T>(1.0 - p.beta2), static_cast<T>(p.eps),
      static_cast<T>(wd), static_cast<T>(keep), static_cast<T>(1.0 / std::sqrt(p.c2)));
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

std::size_t multi_tensor_scratch_bytes(int count) {
  const std::size_t n = count > 0 ? static_cast<std::size_t>(count) : 0;
  return table_words(static_cast<int>(n)) * sizeof(std::int64_t) +
         (static_cast<std::size_t>(kMaxBlocks) + 1) * sizeof(double);
}

void multi_tensor_sgd(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries, int count,
                      void* scratch, const SgdParams& params) {
  check_dtype(dtype, "multi_tensor_sgd");
  DeviceList l{};
  const std::int64_t chunks = upload_list(stream, entries, count, scratch, l);
  if (chunks == 0) return;
  if (dtype == DType::f64)
    launch_sgd<double>(stream, l, chunks, params);
  else
    launch_sgd<float>(stream, l, chunks, params);
}

void multi_tensor_adam(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries, int count,
                       void* scratch, const AdamParams& params) {
  check_dtype(dtype, "multi_tensor_adam");
  ANVIL_CHECK(params.c1 > 0 && params.c2 > 0, "multi_tensor_adam",
              "bias corrections must be positive, got c1=", params.c1, " c2=", params.c2);
  DeviceList l{};
  const std::int64_t chunks = upload_list(stream, entries, count, scratch, l);
  if (chunks == 0) return;
  if (dtype == DType::f64)
    launch_adam<double>(stream, l, chunks, params);
  else
    launch_adam<float>(stream, l, chunks, params);
}

namespace {
// Enqueues both passes; the sum goes to *result (+= with `accumulate`). False: nothing to sum.
bool enqueue_sum_squares(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries,
                         int count, void* scratch, double* result, bool accumulate) {
  DeviceList l{};
  const std::int64_t chunks = upload_list(stream, entries, count, scratch, l);
  if (chunks == 0) return false;
  double* partial =
      reinterpret_cast<double*>(static_cast<std::int64_t*>(scratch) + table_words(count));
  const int grid = grid_for(chunks);
  if (dtype == DType::f64)
    sum_squares_kernel<double><<<grid, kThreads, 0, stream>>>(l, chunks, partial);
  else
    sum_squares_kernel<float><<<grid, kThreads, 0, stream>>>(l, chunks, partial);
  ANVIL_CUDA_CHECK(cudaGetLastError());
  sum_partials_kernel<<<1, kThreads, 0, stream>>>(
      partial, grid, result != nullptr ? result : partial + kMaxBlocks, accumulate);
  ANVIL_CUDA_CHECK(cudaGetLastError());
  return true;
}
}  // namespace

double multi_tensor_sum_squares(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries,
                                int count, void* scratch) {
  check_dtype(dtype, "multi_tensor_sum_squares");
  if (!enqueue_sum_squares(stream, dtype, entries, count, scratch, nullptr, false)) return 0.0;
  const double* result =
      reinterpret_cast<double*>(static_cast<std::int64_t*>(scratch) + table_words(count)) +
      kMaxBlocks;
  double host = 0.0;
  ANVIL_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
  ANVIL_CUDA_CHECK(cudaStreamSynchronize(stream));
  note_host_wait();
  note_readback();
  return host;
}

void multi_tensor_sum_squares_into(cudaStream_t stream, DType dtype,
                                   const MultiTensorEntry* entries, int count, void* scratch,
                                   double* sum_device) {
  check_dtype(dtype, "multi_tensor_sum_squares_into");
  ANVIL_CHECK(sum_device != nullptr, "multi_tensor_sum_squares_into", "null device sum");
  (void)enqueue_sum_squares(stream, dtype, entries, count, scratch, sum_device, true);
}

void multi_tensor_clip(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries, int count,
                       void* scratch, const double* sum_squares, double max_norm) {
  check_dtype(dtype, "multi_tensor_clip");
  ANVIL_CHECK(sum_squares != nullptr && max_norm > 0, "multi_tensor_clip",
              "needs a device sum of squares and max_norm > 0, got ", max_norm);
  DeviceList l{};
  const std::int64_t chunks = upload_list(stream, entries, count, scratch, l);
  if (chunks == 0) return;
  if (dtype == DType::f64)
    clip_scale_kernel<double>
        <<<grid_for(chunks), kThreads, 0, stream>>>(l, chunks, sum_squares, max_norm);
  else
    clip_scale_kernel<float>
        <<<grid_for(chunks), kThreads, 0, stream>>>(l, chunks, sum_squares, max_norm);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void multi_tensor_scale(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries,
                        int count, void* scratch, double scale) {
  check_dtype(dtype, "multi_tensor_scale");
  DeviceList l{};
  const std::int64_t chunks = upload_list(stream, entries, count, scratch, l);
  if (chunks == 0) return;
  if (dtype == DType::f64)
    scale_kernel<double><<<grid_for(chunks), kThreads, 0, stream>>>(l, chunks, scale);
  else
    scale_kernel<float>
        <<<grid_for(chunks), kThreads, 0, stream>>>(l, chunks, static_cast<float>(scale));
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

void multi_tensor_scale_check(cudaStream_t stream, DType dtype, const MultiTensorEntry* entries,
                              int count, void* scratch, double scale, float* found_inf) {
  check_dtype(dtype, "multi_tensor_scale_check");
  ANVIL_CHECK(found_inf != nullptr, "multi_tensor_scale_check", "null found_inf flag");
  DeviceList l{};
  const std::int64_t chunks = upload_list(stream, entries, count, scratch, l);
  if (chunks == 0) return;
  if (dtype == DType::f64)
    scale_check_kernel<double>
        <<<grid_for(chunks), kThreads, 0, stream>>>(l, chunks, scale, found_inf);
  else
    scale_check_kernel<float><<<grid_for(chunks), kThreads, 0, stream>>>(
        l, chunks, static_cast<float>(scale), found_inf);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace anvil::cuda
