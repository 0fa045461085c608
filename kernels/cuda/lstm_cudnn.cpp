// SPDX-License-Identifier: Apache-2.0
// `cuda.cudnn` in the LSTM table: one LSTM layer through cuDNN 9's RNN API (the v8 functions:
// cudnnSetRNNDescriptor_v8, cudnnRNNForward, cudnnRNNBackwardData_v8,
// cudnnRNNBackwardWeights_v8, cudnnGetRNNTempSpaceSizes, cudnnGetRNNWeightSpaceSize,
// cudnnGetRNNWeightParams). IEEE FP32 (mathType CUDNN_FMA_MATH) or f64; x/y in
// CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED = anvil's [T, B, *], every sequence of length T.
// Each forward packs anvil's parameters into cuDNN's weight space block by block at the
// addresses cudnnGetRNNWeightParams returns (Note [cuDNN LSTM weight space]); the packed
// weights, the reserve space and the device sequence lengths are the saved state; backward
// unpacks the weight gradient the same way.
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <memory>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/dispatch/lstm_problem.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cudnn_handle.h"
#include "kernels/cuda/cudnn_lstm_layout.h"
#include "kernels/cuda/device_guard.h"
#include "kernels/cuda/register.h"

namespace anvil::cuda {
namespace {

constexpr const char* kName = "cuda.cudnn";

struct CudnnLstmSaved final : LstmSaved {
  Tensor weights;      // cuDNN's weight space, packed by the forward
  Tensor reserve;      // the forward's reserve space (training)
  Tensor seq_lengths;  // [B] int32 on the device, all T
};

Tensor bytes_on(std::size_t bytes, Device dev) {
  const auto words = static_cast<std::int64_t>((bytes + 7) / 8);
  return Tensor::empty({words > 0 ? words : 1}, DType::i64, dev);
}

// The descriptors of one call (created, set, destroyed with it).
class Descriptors {
 public:
  Descriptors(cudnnHandle_t handle, const LstmProblem& p) {
    CudnnLstmConfig c;
    ANVIL_CHECK(cudnn_lstm_config(p.T, p.B, p.I, p.H, p.two_biases, p.dtype == DType::f64, &c),
                kName, "sizes beyond cuDNN's int arguments: ", p.repr());
    dt_ = c.f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    ANVIL_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&drop));
    ANVIL_CUDNN_CHECK(cudnnCreateRNNDescriptor(&rnn));
    ANVIL_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&x));
    ANVIL_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&y));
    ANVIL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&h));
    ANVIL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m));
    ANVIL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b));
    // No dropout (one layer): probability 0 needs no RNG state.
    ANVIL_CUDNN_CHECK(cudnnSetDropoutDescriptor(drop, handle, 0.0f, nullptr, 0, 0));
    ANVIL_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM,
        c.double_bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_SINGLE_INP_BIAS, CUDNN_UNIDIRECTIONAL,
        CUDNN_LINEAR_INPUT, dt_, dt_, CUDNN_FMA_MATH, c.input_size, c.hidden_size, c.proj_size,
        c.num_layers, drop, CUDNN_RNN_PADDED_IO_ENABLED));
    lengths_.assign(static_cast<std::size_t>(c.batch), c.max_seq_length);
    double fill64 = 0.0;
    float fill32 = 0.0f;
    void* fill = c.f64 ? static_cast<void*>(&fill64) : static_cast<void*>(&fill32);
    ANVIL_CUDNN_CHECK(cudnnSetRNNDataDescriptor(x, dt_, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                                c.max_seq_length, c.batch, c.input_size,
                                                lengths_.data(), fill));
    ANVIL_CUDNN_CHECK(cudnnSetRNNDataDescriptor(y, dt_, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                                c.max_seq_length, c.batch, c.hidden_size,
                                                lengths_.data(), fill));
    ANVIL_CUDNN_CHECK(cudnnSetTensorNdDescriptor(h, dt_, 3, c.h_dims, c.h_strides));
  }
  ~Descriptors() {
    cudnnDestroyTensorDescriptor(b);
    cudnnDestroyTensorDescriptor(m);
    cudnnDestroyTensorDescriptor(h);
    cudnnDestroyRNNDataDescriptor(y);
    cudnnDestroyRNNDataDescriptor(x);
    cudnnDestroyRNNDescriptor(rnn);
    cudnnDestroyDropoutDescriptor(drop);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;

  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnDropoutDescriptor_t drop = nullptr;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t h = nullptr;               // h and c: [1, B, H]
  cudnnTensorDescriptor_t m = nullptr, b = nullptr;  // filled by cudnnGetRNNWeightParams

 private:
  cudnnDataType_t dt_ = CUDNN_DATA_FLOAT;
  std::vector<int> lengths_;
};

std::int64_t elements_of(cudnnTensorDescriptor_t d) {
  cudnnDataType_t t;
  int nb = 0, dims[8] = {}, strides[8] = {};
  ANVIL_CUDNN_CHECK(cudnnGetTensorNdDescriptor(d, 8, &t, &nb, dims, strides));
  std::int64_t n = 1;
  for (int i = 0; i < nb; ++i) n *= dims[i];
  return n;
}

// Copies every block between anvil's parameters and a weight space (to_space: pack).
void copy_blocks(cudnnHandle_t handle, Descriptors& d, const LstmProblem& p, void* space,
                 std::size_t space_bytes, bool to_space, const void* const params_in[4],
                 void* const params_out[4], cudaStream_t s) {
  const std::size_t e = dtype_size(p.dtype);
  for (const CudnnLstmBlock& blk : cudnn_lstm_blocks(p.I, p.H, p.two_biases)) {
    void* m_addr = nullptr;
    void* b_addr = nullptr;
    ANVIL_CUDNN_CHECK(cudnnGetRNNWeightParams(handle, d.rnn, 0, space_bytes, space,
                                              blk.lin_layer_id, d.m, &m_addr, d.b, &b_addr));
    void* addr = blk.bias ? b_addr : m_addr;
    ANVIL_CHECK(addr != nullptr, kName, "cuDNN has no ", blk.bias ? "bias" : "matrix",
                " for linLayerID ", blk.lin_layer_id, " (", p.repr(), ")");
    const std::int64_t n = elements_of(blk.bias ? d.b : d.m);
    ANVIL_CHECK(n == blk.count, kName, "cuDNN's ", blk.bias ? "bias" : "matrix", " of linLayerID ",
                blk.lin_layer_id, " has ", n, " elements, anvil's block ", blk.count);
    const int k = static_cast<int>(blk.param);
    const std::size_t bytes = static_cast<std::size_t>(blk.count) * e;
    const std::size_t off = static_cast<std::size_t>(blk.offset) * e;
    if (to_space) {
      ANVIL_CHECK(params_in[k] != nullptr, kName, "parameter ", k, " missing");
      ANVIL_CUDA_CHECK(cudaMemcpyAsync(addr, static_cast<const char*>(params_in[k]) + off, bytes,
                                       cudaMemcpyDeviceToDevice, s));
    } else if (params_out[k] != nullptr) {
      ANVIL_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(params_out[k]) + off, addr, bytes,
                                       cudaMemcpyDeviceToDevice, s));
    }
  }
}

void forward(const LstmArgs& a) {
  const LstmProblem& p = a.problem;
  const Device dev = p.device;
  DeviceGuard guard(dev.index);
  cudaStream_t s = stream(dev.index);
  cudnnHandle_t handle = cudnn_handle(dev.index);
  Descriptors d(handle, p);
  auto saved = std::make_shared<CudnnLstmSaved>();
  saved->variant = kName;
  std::size_t wbytes = 0;
  ANVIL_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, d.rnn, &wbytes));
  saved->weights = bytes_on(wbytes, dev);
  const void* in[4] = {a.w_ih, a.w_hh, a.b_ih, a.b_hh};
  void* const none[4] = {nullptr, nullptr, nullptr, nullptr};
  copy_blocks(handle, d, p, saved->weights.data_ptr(), wbytes, true, in, none, s);
  const bool training = p.pass == LstmPass::forward_training;
  const cudnnForwardMode_t mode = training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  std::size_t work = 0, reserve = 0;
  ANVIL_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(handle, d.rnn, mode, d.x, &work, &reserve));
  Tensor workspace = bytes_on(work, dev);
  saved->reserve = bytes_on(reserve, dev);
  saved->seq_lengths = Tensor::full({p.B}, static_cast<double>(p.T), DType::i32, dev);
  ANVIL_CUDNN_CHECK(cudnnRNNForward(
      handle, d.rnn, mode, static_cast<const std::int32_t*>(saved->seq_lengths.data_ptr()), d.x,
      a.x, d.y, a.y, d.h, a.h0, a.h_n, d.h, a.c0, a.c_n, wbytes, saved->weights.data_ptr(), work,
      workspace.data_ptr(), reserve, reserve > 0 ? saved->reserve.data_ptr() : nullptr));
  if (training) {
    ANVIL_CHECK(a.saved != nullptr, kName, "no place for the saved state");
    *a.saved = std::move(saved);
  }
  (void)s;
}

void backward(const LstmArgs& a) {
  const LstmProblem& p = a.problem;
  ANVIL_CHECK(a.saved != nullptr && *a.saved != nullptr, kName, "no saved state for ", p.repr());
  const auto* saved = dynamic_cast<const CudnnLstmSaved*>(a.saved->get());
  ANVIL_CHECK(saved != nullptr, kName, "the saved state is not this variant's (",
              (*a.saved)->variant, ")");
  const Device dev = p.device;
  DeviceGuard guard(dev.index);
  cudaStream_t s = stream(dev.index);
  cudnnHandle_t handle = cudnn_handle(dev.index);
  Descriptors d(handle, p);
  std::size_t wbytes = 0, work = 0, reserve = 0;
  ANVIL_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, d.rnn, &wbytes));
  ANVIL_CUDNN_CHECK(
      cudnnGetRNNTempSpaceSizes(handle, d.rnn, CUDNN_FWD_MODE_TRAINING, d.x, &work, &reserve));
  Tensor workspace = bytes_on(work, dev);
  void* rs = reserve > 0 ? saved->reserve.data_ptr() : nullptr;
  const auto* lens = static_cast<const std::int32_t*>(saved->seq_lengths.data_ptr());
  Tensor dx_scratch;
  void* dx = a.dx;
  if (dx == nullptr) {  // cuDNN always writes dx
    dx_scratch = Tensor::empty({p.T, p.B, p.I}, p.dtype, dev);
    dx = dx_scratch.data_ptr();
  }
  // Data gradients first: they fill the reserve space the weight gradients read.
  ANVIL_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      handle, d.rnn, lens, d.y, a.y, a.dy, d.x, dx, d.h, a.h0, a.dh_n, a.dh0, d.h, a.c0, a.dc_n,
      a.dc0, wbytes, saved->weights.data_ptr(), work, workspace.data_ptr(), reserve, rs));
  Tensor dweights = bytes_on(wbytes, dev);
  ANVIL_CUDA_CHECK(cudaMemsetAsync(dweights.data_ptr(), 0, wbytes, s));  // ADD accumulates
  ANVIL_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(handle, d.rnn, CUDNN_WGRAD_MODE_ADD, lens, d.x, a.x,
                                               d.h, a.h0, d.y, a.y, wbytes, dweights.data_ptr(),
                                               work, workspace.data_ptr(), reserve, rs));
  const void* const none_in[4] = {nullptr, nullptr, nullptr, nullptr};
  void* const out[4] = {a.dw_ih, a.dw_hh, a.db_ih, p.two_biases ? a.db_hh : nullptr};
  copy_blocks(handle, d, p, dweights.data_ptr(), wbytes, false, none_in, out, s);
}

Support supports(const LstmProblem& p) {
  if (p.dtype != DType::f32 && p.dtype != DType::f64)
    return Support::no(detail::str_cat("needs f32 or f64, got ", dtype_name(p.dtype)));
  CudnnLstmConfig c;
  if (!cudnn_lstm_config(p.T, p.B, p.I, p.H, p.two_biases, p.dtype == DType::f64, &c))
    return Support::no(detail::str_cat("sizes beyond cuDNN's int arguments: ", p.repr()));
  return Support::yes();
}

}  // namespace

void register_cuda_lstm_cudnn() {
  lstm_table().add({.name = kName,
                    .device = DeviceType::cuda,
                    .supports = supports,
                    .fn =
                        [](const LstmArgs& a) {
                          if (a.problem.pass == LstmPass::backward)
                            backward(a);
                          else
                            forward(a);
                        },
                    .description = "cuDNN 9 RNN API (v8 functions), CUDNN_FMA_MATH (IEEE FP32); "
                                   "weights packed per call (Note [cuDNN LSTM weight space])",
                    .tags = {kTagWorkspace}});  // cuDNN's workspace and reserve space
}

}  // namespace anvil::cuda
