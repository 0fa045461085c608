// SPDX-License-Identifier: Apache-2.0
// One conv2d output entry from the definition (harness/drivers/conv2d_entries.h): the sums of
// conv_problem.h written out for a single index, so that checking a few entries costs a few
// reductions instead of the whole pass.
#include "harness/drivers/conv2d_entries.h"

#include <algorithm>

namespace anvil::harness {
namespace {

double forward_entry(const ConvProblem& p, const ConvOperandsF64& in, std::int64_t flat) {
  const std::int64_t P = p.p(), Q = p.q(), cpg = p.c_per_group(), kpg = p.k_per_group();
  const std::int64_t q = flat % Q, i = flat / Q % P, k = flat / (Q * P) % p.k,
                     n = flat / (Q * P * p.k);
  const std::int64_t g = k / kpg;
  double sum = 0;
  for (std::int64_t c = 0; c < cpg; ++c)
    for (std::int64_t r = 0; r < p.r; ++r) {
      const std::int64_t h = i * p.stride_h - p.pad_h + r * p.dil_h;
      if (h < 0 || h >= p.h) continue;
      for (std::int64_t s = 0; s < p.s; ++s) {
        const std::int64_t w = q * p.stride_w - p.pad_w + s * p.dil_w;
        if (w < 0 || w >= p.w) continue;
        sum += in.x[((n * p.c + g * cpg + c) * p.h + h) * p.w + w] *
               in.w[((k * cpg + c) * p.r + r) * p.s + s];
      }
    }
  if (p.has_bias) sum += in.b[k];
  return p.fuse_relu ? std::max(sum, 0.0) : sum;
}

double backward_data_entry(const ConvProblem& p, const ConvOperandsF64& in, std::int64_t flat) {
  const std::int64_t P = p.p(), Q = p.q(), cpg = p.c_per_group(), kpg = p.k_per_group();
  const std::int64_t w = flat % p.w, h = flat / p.w % p.h, c = flat / (p.w * p.h) % p.c,
                     n = flat / (p.w * p.h * p.c);
  const std::int64_t g = c / cpg;
  double sum = 0;
  for (std::int64_t k = g * kpg; k < (g + 1) * kpg; ++k)
    for (std::int64_t r = 0; r < p.r; ++r) {
      const std::int64_t hh = h + p.pad_h - r * p.dil_h;  // = i * stride_h for output row i
      if (hh < 0 || hh % p.stride_h != 0 || hh / p.stride_h >= P) continue;
      for (std::int64_t s = 0; s < p.s; ++s) {
        const std::int64_t ww = w + p.pad_w - s * p.dil_w;
        if (ww < 0 || ww % p.stride_w != 0 || ww / p.stride_w >= Q) continue;
        sum += in.dy[((n * p.k + k) * P + hh / p.stride_h) * Q + ww / p.stride_w] *
               in.w[((k * cpg + (c - g * cpg)) * p.r + r) * p.s + s];
      }
    }
  return sum;
}

double backward_weights_entry(const ConvProblem& p, const ConvOperandsF64& in, std::int64_t flat) {
  const std::int64_t P = p.p(), Q = p.q(), cpg = p.c_per_group(), kpg = p.k_per_group();
  const std::int64_t s = flat % p.s, r = flat / p.s % p.r, c = flat / (p.s * p.r) % cpg,
                     k = flat / (p.s * p.r * cpg);
  const std::int64_t g = k / kpg;
  double sum = 0;
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t i = 0; i < P; ++i) {
      const std::int64_t h = i * p.stride_h - p.pad_h + r * p.dil_h;
      if (h < 0 || h >= p.h) continue;
      for (std::int64_t j = 0; j < Q; ++j) {
        const std::int64_t w = j * p.stride_w - p.pad_w + s * p.dil_w;
        if (w < 0 || w >= p.w) continue;
        sum += in.dy[((n * p.k + k) * P + i) * Q + j] *
               in.x[((n * p.c + g * cpg + c) * p.h + h) * p.w + w];
      }
    }
  return sum;
}

}  // namespace

double conv_output_entry(const ConvProblem& p, const ConvOperandsF64& in, std::int64_t flat) {
  switch (p.pass) {
    case ConvPass::forward:
      return forward_entry(p, in, flat);
    case ConvPass::backward_data:
      return backward_data_entry(p, in, flat);
    case ConvPass::backward_weights:
      return backward_weights_entry(p, in, flat);
  }
  return 0;
}

double conv_bias_grad_entry(const ConvProblem& p, const ConvOperandsF64& in, std::int64_t k) {
  const std::int64_t pixels = p.p() * p.q();
  double sum = 0;
  for (std::int64_t n = 0; n < p.n; ++n)
    for (std::int64_t j = 0; j < pixels; ++j) sum += in.dy[(n * p.k + k) * pixels + j];
  return sum;
}

}  // namespace anvil::harness
