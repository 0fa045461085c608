// SPDX-License-Identifier: Apache-2.0
// Helpers of the distributed tests (dist_test_util.h).
#include "tests/distributed/dist_test_util.h"

#include <algorithm>

namespace anvil::test {

nn::ModulePtr small_mlp(std::uint64_t seed) {
  manual_seed(seed);
  auto net = std::make_shared<nn::Sequential>();
  net->add(std::make_shared<nn::Linear>(12, 32));
  net->add(nn::ReLU());
  net->add(std::make_shared<nn::Linear>(32, 24));
  net->add(nn::Tanh());
  net->add(std::make_shared<nn::Linear>(24, 5));
  return net;
}

Synthetic synthetic_data(std::int64_t n, std::uint64_t seed) {
  manual_seed(seed);
  Synthetic s;
  s.x = Tensor::empty({n, 12});
  normal_(s.x, 0.0, 1.0);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(n));
  const float* x = s.x.data<float>();
  for (std::int64_t i = 0; i < n; ++i)  // a learnable rule: the arg-max of 5 input features
    labels[static_cast<std::size_t>(i)] =
        std::max_element(x + i * 12, x + i * 12 + 5) - (x + i * 12);
  s.y = Tensor::from_vector(labels, {n});
  return s;
}

Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t count) {
  return t.slice(0, begin, begin + count).clone();
}

std::vector<double> flat_values(const nn::Module& net) {
  std::vector<double> out;
  for (const Tensor& p : net.parameters()) {
    const Tensor c = p.detach().contiguous();
    const float* v = c.data<float>();
    out.insert(out.end(), v, v + c.numel());
  }
  return out;
}

}  // namespace anvil::test
