// SPDX-License-Identifier: Apache-2.0
// Parameter initialisers (engine/nn/init.h).
#include "engine/nn/init.h"

#include <cmath>

namespace anvil::nn::init {

std::pair<std::int64_t, std::int64_t> fan_in_and_out(const Tensor& t) {
  ANVIL_CHECK(t.dim() >= 2, "init.fan_in_and_out", "needs a tensor with at least 2 dims, got ",
              shape_str(t.sizes()));
  std::int64_t receptive = 1;
  for (std::int64_t d = 2; d < t.dim(); ++d) receptive *= t.sizes()[d];
  return {t.sizes()[1] * receptive, t.sizes()[0] * receptive};
}

void zeros_(Tensor& t) { t.zero_(); }
void constant_(Tensor& t, double v) { t.fill_(v); }
void uniform_(Tensor& t, double low, double high, Generator* gen) {
  anvil::uniform_(t, low, high, gen);
}
void normal_(Tensor& t, double mean, double std, Generator* gen) {
  anvil::normal_(t, mean, std, gen);
}

void xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  const auto [fi, fo] = fan_in_and_out(t);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(fi + fo));
  anvil::uniform_(t, -a, a, gen);
}

void xavier_normal_(Tensor& t, double gain, Generator* gen) {
  const auto [fi, fo] = fan_in_and_out(t);
  anvil::normal_(t, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fi + fo)), gen);
}

void kaiming_uniform_(Tensor& t, double a, Generator* gen) {
  const auto [fi, fo] = fan_in_and_out(t);
  const double b = std::sqrt(6.0 / ((1.0 + a * a) * static_cast<double>(fi)));
  anvil::uniform_(t, -b, b, gen);
}

void kaiming_normal_(Tensor& t, double a, Generator* gen) {
  const auto [fi, fo] = fan_in_and_out(t);
  anvil::normal_(t, 0.0, std::sqrt(2.0 / ((1.0 + a * a) * static_cast<double>(fi))), gen);
}

}  // namespace anvil::nn::init
