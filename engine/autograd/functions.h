// SPDX-License-Identifier: Apache-2.0
#pragma once
// Differentiable functions: each computes its forward with engine/ops/ and, when grad mode is
// on and an input requires grad, records a node whose backward is written beside it (one file
// per op family: functions_*.cpp).
#include <array>
#include <cstdint>
#include <vector>

#include "engine/core/random.h"
#include "engine/core/tensor.h"
#include "engine/ops/conv_options.h"

namespace anvil {

// ---- pointwise (broadcasting) ------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor pow(const Tensor& x, const Tensor& exponent);
Tensor add_scalar(const Tensor& x, double s);
Tensor mul_scalar(const Tensor& x, double s);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);

// ---- activations ---------------------------------------------------------------------------
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);

// ---- reductions ------------------------------------------------------------------------------
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// Max over `dim`; the gradient flows to the (first) maximal element.
Tensor max(const Tensor& x, std::int64_t dim, bool keepdim = false);
// Index of the max over `dim` (int64; not differentiable).
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);

// ---- linear algebra ----------------------------------------------------------------------
// 2-D @ 2-D, batched 3-D @ 3-D, or N-D @ 2-D (leading dims flattened).
Tensor matmul(const Tensor& a, const Tensor& b);
// y = x @ weight^T + bias; weight is [out, in] (the PyTorch layout), bias [out] or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- softmax family (dim = -1 or any dim) ----------------------------------------------------
Tensor softmax(const Tensor& x, std::int64_t dim = -1);
Tensor log_softmax(const Tensor& x, std::int64_t dim = -1);
// Fused softmax cross-entropy, mean over the batch: logits [N, C], target class ids [N].
Tensor cross_entropy(const Tensor& logits, const Tensor& target);
// cross_entropy(linear(x, weight, bias), target) as one node: x [N, in], weight [C, in], bias
// [C] or undefined. Same value and gradients; on the CPU with a gradient to compute it keeps one
// [N, C] buffer instead of two and passes over it once (Note [Linear cross-entropy]).
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& target);

// ---- dropout ----------------------------------------------------------------------------------
// Zeroes each element with probability p and scales the rest by 1/(1-p) when training;
// identity otherwise.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

// ---- convolution (NCHW, float32/float64) -------------------------------------------------------
// x [N, C, H, W], weight [K, C/groups, R, S], bias [K] or undefined -> [N, K, P, Q].
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              const Conv2dOptions& options = {});
// relu(conv2d(...)): one fused kernel where the selected variant offers it (oneDNN post-op),
// otherwise the convolution followed by relu. Same result and gradients either way.
Tensor conv2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                   const Conv2dOptions& options = {});

// ---- pooling (NCHW) ---------------------------------------------------------------------------
struct Pool2dOptions {
  std::array<std::int64_t, 2> kernel{2, 2};
  std::array<std::int64_t, 2> stride{0, 0};  // 0 = same as kernel
  std::array<std::int64_t, 2> padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;  // average pooling only (PyTorch's default)
};
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options);
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options);
// Output [N, C, OH, OW] with PyTorch's adaptive bin edges (floor/ceil).
Tensor adaptive_avg_pool2d(const Tensor& x, std::array<std::int64_t, 2> output_size);
// Mean over H and W: [N, C, H, W] -> [N, C].
Tensor global_avg_pool2d(const Tensor& x);

// ---- batch normalisation (NCHW, per channel) -------------------------------------------------
// training: normalises with the batch statistics (biased variance) and updates running_mean and
// running_var in place (running = (1 - momentum) * running + momentum * batch, unbiased variance),
// as PyTorch does; eval: normalises with the running statistics. weight/bias [C] (the affine
// parameters), running_mean/running_var [C], never differentiated.
Tensor batch_norm2d(const Tensor& x, const Tensor& weight, const Tensor& bias,
                    const Tensor& running_mean, const Tensor& running_var, bool training,
                    double momentum = 0.1, double eps = 1e-5);

// ---- embedding and recurrent layers ----------------------------------------------------------
// weight [V, D], ids int64/int32 of any shape -> [ids..., D]. The gradient goes only into the
// rows that were used. Out-of-range ids throw.
Tensor embedding(const Tensor& weight, const Tensor& ids);

// One LSTM layer over a whole sequence. Gates in PyTorch's order (input, forget, cell, output):
//   x [T, B, I]; w_ih [4H, I]; w_hh [4H, H]; b_ih [4H] (the one bias vector of networks.md);
//   b_hh [4H] or undefined (PyTorch's second bias); h0, c0 [B, H] or undefined (zeros).
// Returns y [T, B, H] and the final h_n, c_n [B, H].
struct LstmLayerOutput {
  Tensor y, h_n, c_n;
};
LstmLayerOutput lstm_layer(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                           const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh = Tensor());

// Mean of the binary cross-entropy between sigmoid(logits) and targets in [0, 1] (same shape),
// computed stably from the logits.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target);

}  // namespace anvil
