// SPDX-License-Identifier: Apache-2.0
#pragma once
// Parameter initialisers, seeded through a Generator (default: anvil::default_generator()).
// fan_in/fan_out follow PyTorch: for a [out, in, ...] weight, fan_in = in * receptive field.
#include "engine/core/random.h"

namespace anvil::nn::init {

void zeros_(Tensor& t);
void constant_(Tensor& t, double value);
void uniform_(Tensor& t, double low, double high, Generator* gen = nullptr);
void normal_(Tensor& t, double mean, double std, Generator* gen = nullptr);
// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
void xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// N(0, gain^2 * 2 / (fan_in + fan_out)).
void xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// He init for ReLU nets (fan_in mode): U(-b, b), b = sqrt(6 / ((1 + a^2) * fan_in)).
void kaiming_uniform_(Tensor& t, double a = 0.0, Generator* gen = nullptr);
// N(0, 2 / ((1 + a^2) * fan_in)).
void kaiming_normal_(Tensor& t, double a = 0.0, Generator* gen = nullptr);

std::pair<std::int64_t, std::int64_t> fan_in_and_out(const Tensor& t);

}  // namespace anvil::nn::init
