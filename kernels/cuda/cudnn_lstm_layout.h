// SPDX-License-Identifier: Apache-2.0
#pragma once
// The mapping between anvil's LSTM parameters and cuDNN's RNN weight space, and the descriptor
// settings of `cuda.cudnn` (kernels/cuda/lstm_cudnn.cpp). Plain C++ without cuDNN types, so that
// a CPU test can check it (tests/test_cudnn_lstm_layout.cpp). Note [cuDNN LSTM weight space].
//
// Note [cuDNN LSTM weight space]
// anvil (as PyTorch) stores w_ih [4H, I], w_hh [4H, H], b_ih [4H] (+ b_hh [4H]) with the gate
// row blocks in the order i, f, g (the cell candidate c~), o. cuDNN's LSTM numbers its eight
// matrices per layer by linLayerID: 0..3 multiply the input (W_i, W_f, W_c~, W_o), 4..7 the
// recurrent state (R_i, R_f, R_c~, R_o), the same gate order. cudnnGetRNNWeightParams returns,
// for one linLayerID, the address of its matrix ([H, I] or [H, H], row-major) and of its bias
// ([H]) inside the weight space. So linLayerID k < 4 is rows [k H, (k+1) H) of w_ih and bias
// block k of b_ih; k >= 4 is rows [(k-4) H, (k-3) H) of w_hh and block k-4 of b_hh. With one
// bias (anvil's models) the descriptor uses CUDNN_RNN_SINGLE_INP_BIAS: only IDs 0..3 have a
// bias; with two, CUDNN_RNN_DOUBLE_BIAS. The variant copies each block to the address cuDNN
// returns (and back for the gradients), never assuming cuDNN's packing, and checks that the
// sizes cuDNN reports are these.
#include <cstdint>
#include <vector>

namespace anvil::cuda {

enum class LstmParam : std::uint8_t { w_ih, w_hh, b_ih, b_hh };

// One block copied between an anvil parameter and cuDNN's weight space.
struct CudnnLstmBlock {
  int lin_layer_id = 0;  // cuDNN's linLayerID, 0..7
  bool bias = false;     // the bias of that ID (else its matrix)
  LstmParam param = LstmParam::w_ih;
  std::int64_t offset = 0;  // first element in the anvil parameter
  std::int64_t count = 0;   // elements (H*I, H*H or H)
};

// Every block of one single-direction, one-layer LSTM, matrices first, IDs in order.
inline std::vector<CudnnLstmBlock> cudnn_lstm_blocks(std::int64_t input_size,
                                                     std::int64_t hidden_size, bool two_biases) {
  const std::int64_t I = input_size, H = hidden_size;
  std::vector<CudnnLstmBlock> v;
  for (int id = 0; id < 8; ++id) {
    const bool input_side = id < 4;
    const std::int64_t gate = input_side ? id : id - 4;
    const std::int64_t cols = input_side ? I : H;
    v.push_back(
        {id, false, input_side ? LstmParam::w_ih : LstmParam::w_hh, gate * H * cols, H * cols});
  }
  for (int id = 0; id < 8; ++id) {
    const bool input_side = id < 4;
    if (!input_side && !two_biases) continue;  // CUDNN_RNN_SINGLE_INP_BIAS
    const std::int64_t gate = input_side ? id : id - 4;
    v.push_back({id, true, input_side ? LstmParam::b_ih : LstmParam::b_hh, gate * H, H});
  }
  return v;
}

// The settings cudnnSetRNNDescriptor_v8 gets from an LSTM problem (as plain values).
struct CudnnLstmConfig {
  int input_size = 0, hidden_size = 0, proj_size = 0, num_layers = 1;
  bool double_bias = false;  // CUDNN_RNN_DOUBLE_BIAS, else CUDNN_RNN_SINGLE_INP_BIAS
  bool f64 = false;          // CUDNN_DATA_DOUBLE for data and math, else CUDNN_DATA_FLOAT
  bool tf32 = false;  // always false: mathType CUDNN_FMA_MATH, IEEE FP32 (TF32 is not offered)
  // CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED ([T, B, vector], anvil's x and y) with every
  // sequence of full length T; unpacked layouts need CUDNN_RNN_PADDED_IO_ENABLED.
  int max_seq_length = 0, batch = 0;
  // hDesc / cDesc: [num_layers, batch, hidden] fully packed.
  int h_dims[3] = {0, 0, 0};
  int h_strides[3] = {0, 0, 0};
};

inline bool fits_int(std::int64_t v) { return v >= 0 && v <= 0x7fffffff; }

// Returns false (with nothing filled) when a size does not fit cuDNN's int arguments.
inline bool cudnn_lstm_config(std::int64_t T, std::int64_t B, std::int64_t I, std::int64_t H,
                              bool two_biases, bool f64, CudnnLstmConfig* out) {
  if (!fits_int(T) || !fits_int(B) || !fits_int(I) || !fits_int(H) || !fits_int(4 * H * (I + H)) ||
      !fits_int(B * H))
    return false;
  CudnnLstmConfig c;
  c.input_size = static_cast<int>(I);
  c.hidden_size = static_cast<int>(H);
  c.proj_size = static_cast<int>(H);  // no projection: projSize = hiddenSize
  c.num_layers = 1;
  c.double_bias = two_biases;
  c.f64 = f64;
  c.tf32 = false;
  c.max_seq_length = static_cast<int>(T);
  c.batch = static_cast<int>(B);
  c.h_dims[0] = 1;
  c.h_dims[1] = static_cast<int>(B);
  c.h_dims[2] = static_cast<int>(H);
  c.h_strides[0] = static_cast<int>(B * H);
  c.h_strides[1] = static_cast<int>(H);
  c.h_strides[2] = 1;
  *out = c;
  return true;
}

}  // namespace anvil::cuda
