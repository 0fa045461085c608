// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registration entry points and direct entry points of the OpenMP CPU kernels.
// The direct kernels take dense row-major buffers; engine/ops/ arranges that.
#include <cstdint>

namespace anvil::kernels {

void register_elementwise_omp();
void register_pool_omp();        // max_pool2d, avg_pool2d, adaptive_avg_pool2d
void register_batch_norm_omp();  // batch_norm2d
void register_reduce_omp();      // reduce (sum, max)
void register_softmax_omp();     // softmax family and cross-entropy

// The dense f32 relu and its backward of Note [ReLU selects] (elementwise_omp.cpp), one thread:
// out = relu(a); out = dy where x > 0, else 0. Exposed for the micro-benchmarks.
void relu_f32(const float* a, float* out, std::int64_t n);
void relu_backward_f32(const float* x, const float* dy, float* out, std::int64_t n);

// out[o, i] = scale * sum_r x[o, r, i]   (x viewed as [outer, reduce, inner])
template <typename T>
void reduce_sum(const T* x, T* out, std::int64_t outer, std::int64_t reduce, std::int64_t inner,
                double scale);
// out[o, i] = max_r x[o, r, i], index[o, i] = its r (first one on ties)
template <typename T>
void reduce_max(const T* x, T* out, std::int64_t* index, std::int64_t outer, std::int64_t reduce,
                std::int64_t inner);

// Row-wise (last dim) softmax or log-softmax of x[rows, cols] into y.
template <typename T>
void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols, bool log);
// Gradient of softmax_rows given its output y and dy: softmax dx = y*(dy - <dy,y>);
// log-softmax dx = dy - exp(y)*sum(dy).
template <typename T>
void softmax_backward_rows(const T* y, const T* dy, T* dx, std::int64_t rows, std::int64_t cols,
                           bool log);

// Cross-entropy of logits x[rows, cols] against class ids: loss[r] = lse_r - x[r, t_r];
// lse[r] is kept for the backward pass. Throws naming the row when a class id is out of range.
template <typename T, typename I>
void cross_entropy_forward(const T* x, const I* target, T* loss, T* lse, std::int64_t rows,
                           std::int64_t cols);
// dx[r, c] = scale * (exp(x[r,c] - lse[r]) - [c == t_r])
template <typename T, typename I>
void cross_entropy_backward(const T* x, const I* target, const T* lse, T* dx, std::int64_t rows,
                            std::int64_t cols, double scale);
// cross_entropy_forward plus g[r, c] = exp(x[r,c] - lse[r]) - [c == t_r] (g may be x) and, when
// col_sums is not null, col_sums[c] = sum_r g[r, c].
template <typename T, typename I>
void cross_entropy_forward_grad(const T* x, const I* target, T* loss, T* lse, T* g, T* col_sums,
                                std::int64_t rows, std::int64_t cols);

}  // namespace anvil::kernels

namespace anvil::kernels {

// Fused SGD step over n elements (torch.optim.SGD semantics): g' = g + wd*p; with momentum,
// buf = first ? g' : momentum*buf + (1-dampening)*g', and the step uses buf (or g' + momentum*buf
// with Nesterov); p -= lr * step. `buf` may be null when momentum == 0.
template <typename T>
void sgd_update(T* p, const T* g, T* buf, std::int64_t n, double lr, double momentum,
                double dampening, double weight_decay, bool nesterov, bool first);
// Fused Adam step (torch.optim.Adam semantics, L2 weight decay; with decoupled_decay
// torch.optim.AdamW's p *= 1 - lr * weight_decay instead) with bias corrections
// c1 = 1 - beta1^t, c2 = 1 - beta2^t.
template <typename T>
void adam_update(T* p, const T* g, T* m, T* v, std::int64_t n, double lr, double beta1,
                 double beta2, double eps, double weight_decay, double c1, double c2,
                 bool decoupled_decay);
// sum of squares, accumulated in double.
template <typename T>
double sum_squares(const T* x, std::int64_t n);

}  // namespace anvil::kernels
