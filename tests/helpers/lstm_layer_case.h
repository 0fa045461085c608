// SPDX-License-Identifier: Apache-2.0
#pragma once
// One LSTM layer's test problem, shared by the CPU variant tests (tests/test_lstm.cpp) and the
// GPU ones (tests/cuda/test_cuda_lstm.cpp): the case's sizes, its leaves drawn from a seed (on the
// host, then moved, so both devices see the same values), a scalar loss that weighs every
// output, and the layer call. Header-only, so that every test target can use it.
#include <cmath>
#include <cstdint>
#include <vector>

#include "anvil/anvil.h"
#include "engine/nn/recurrent.h"

namespace anvil::test {

struct LayerCase {
  std::int64_t T, B, I, H;
  bool state, two_biases;
};

// Leaves x, h0, c0, w_ih, w_hh, b_ih, b_hh (undefined where absent) on `device`.
inline std::vector<Tensor> layer_leaves(const LayerCase& c, DType dt, std::uint64_t seed,
                                        Device device = Device::cpu()) {
  Generator g(seed);
  auto leaf = [&](const Shape& s, double a) {
    Tensor t = uniform(s, -a, a, dt, &g);
    if (device.is_cuda()) t = t.to(device);
    return t.set_requires_grad(true);
  };
  const double k = 1.0 / std::sqrt(static_cast<double>(c.H));
  std::vector<Tensor> v;
  v.push_back(leaf({c.T, c.B, c.I}, 1.0));
  v.push_back(c.state ? leaf({c.B, c.H}, 0.5) : Tensor());
  v.push_back(c.state ? leaf({c.B, c.H}, 0.5) : Tensor());
  v.push_back(leaf({4 * c.H, c.I}, 2 * k));
  v.push_back(leaf({4 * c.H, c.H}, 2 * k));
  v.push_back(leaf({4 * c.H}, k));
  v.push_back(c.two_biases ? leaf({4 * c.H}, k) : Tensor());
  return v;
}

// A scalar that weighs every output with fixed random values (y, h_n and c_n all matter).
inline Tensor weighted_loss(const LstmLayerOutput& o, std::uint64_t seed) {
  Generator g(seed);
  const DType dt = o.y.dtype();
  const Device d = o.y.device();
  Tensor ry = uniform(o.y.sizes(), -1, 1, dt, &g).to(d);
  Tensor rh = uniform(o.h_n.sizes(), -1, 1, dt, &g).to(d);
  Tensor rc = uniform(o.c_n.sizes(), -1, 1, dt, &g).to(d);
  return sum(o.y * ry) + sum(o.h_n * rh) + sum(o.c_n * rc);
}

inline LstmLayerOutput run_layer(const std::vector<Tensor>& in) {
  return lstm_layer(in[0], in[1], in[2], in[3], in[4], in[5], in[6]);
}

inline constexpr const char* kLeafNames[] = {"x", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"};

}  // namespace anvil::test
