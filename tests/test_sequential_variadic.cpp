// SPDX-License-Identifier: Apache-2.0
// Sequential built from a plain argument list (libtorch's Sequential(a, b, c)): the same children,
// names and forward as the initializer_list constructor, and usable through std::make_shared,
// which cannot deduce a braced list.
#include <catch2/catch.hpp>

#include <memory>
#include <type_traits>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/core/random.h"
#include "engine/nn/layers.h"

using namespace anvil;
using namespace anvil::nn;

// Only module pointers make a Sequential: no conversion from anything else, and one argument
// does not turn a layer into a Sequential implicitly.
static_assert(std::is_constructible_v<Sequential, std::shared_ptr<Linear>, ModulePtr>);
static_assert(!std::is_constructible_v<Sequential, int>);
static_assert(!std::is_constructible_v<Sequential, ModulePtr, int>);
static_assert(!std::is_convertible_v<ModulePtr, Sequential>);

TEST_CASE("Sequential(a, b, c) matches Sequential{a, b, c}", "[nn][sequential]") {
  Generator gen(5);
  auto fc1 = std::make_shared<Linear>(4, 3, true, &gen);
  auto act = ReLU();
  auto fc2 = std::make_shared<Linear>(3, 2, true, &gen);

  Sequential variadic(fc1, act, fc2);
  Sequential listed{fc1, act, fc2};
  REQUIRE(variadic.size() == 3);
  REQUIRE(variadic.children()[0].first == "0");
  REQUIRE(variadic.children()[2].first == "2");
  REQUIRE(variadic.children()[1].second == act);  // the same layer, not a copy
  REQUIRE(variadic.named_parameters().size() == 4);
  REQUIRE(variadic.named_parameters()[2].first == "2.weight");

  NoGradGuard no_grad;
  std::vector<float> xs(20);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = 0.25f * static_cast<float>(i) - 2.0f;
  const Tensor x = Tensor::from_vector(xs, {5, 4});
  const Tensor a = variadic.forward(x);
  const Tensor b = listed.forward(x);
  REQUIRE(a.sizes() == Shape{5, 2});
  for (std::int64_t i = 0; i < a.numel(); ++i) REQUIRE(a.data<float>()[i] == b.data<float>()[i]);
}

TEST_CASE("std::make_shared<Sequential>(layers...) builds a model", "[nn][sequential]") {
  auto model = std::make_shared<Sequential>(std::make_shared<Linear>(8, 16), ReLU(),
                                            std::make_shared<Linear>(16, 4));
  REQUIRE(model->size() == 3);
  REQUIRE(model->num_parameters() == 8 * 16 + 16 + 16 * 4 + 4);
  REQUIRE(model->output_shape({2, 8}) == Shape{2, 4});
}

TEST_CASE("Sequential(...) refuses a null layer", "[nn][sequential]") {
  ModulePtr none;
  REQUIRE_THROWS_WITH(Sequential(std::make_shared<Linear>(2, 2), none),
                      Catch::Contains("Sequential::add") && Catch::Contains("null layer"));
}
