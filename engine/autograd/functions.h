#pragma once
// Differentiable functions: each computes its forward with engine/ops/ and, when grad mode is
// on and an input requires grad, records a node whose backward is written beside it (one file
// per op family: functions_*.cpp).
#include <cstdint>
#include <vector>

#include "engine/core/random.h"
#include "engine/core/tensor.h"

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

// ---- dropout ----------------------------------------------------------------------------------
// Zeroes each element with probability p and scales the rest by 1/(1-p) when training;
// identity otherwise.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

}  // namespace anvil
