// SPDX-License-Identifier: Apache-2.0
#pragma once
// Seeded random numbers: a Generator (64-bit mt19937) and the random tensor factories.
// Every random thing in anvil (initialisers, dropout masks, synthetic data) draws from a
// Generator passed in or from the default one, so manual_seed(s) makes a run repeatable.
#include <cstdint>
#include <random>
#include <string>

#include "engine/core/tensor.h"

namespace anvil {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 5489u) : engine_(seed) {}
  void seed(std::uint64_t s) { engine_.seed(s); }
  std::mt19937_64& engine() { return engine_; }
  std::uint64_t next() { return engine_(); }
  // The full engine state as text (the standard's operator<< of mt19937_64: 313 numbers, about
  // 6 KB), for checkpoints; set_state(state()) continues the exact same stream of numbers.
  // set_state throws anvil::Error and leaves the generator unchanged when the text is not a state.
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
};

// The process-wide default generator (not thread-safe: seed and draw from one thread).
Generator& default_generator();
void manual_seed(std::uint64_t seed);

// U(low, high) and N(mean, std) tensors, float types only; CPU-generated, then moved. Each fill
// takes one number from the generator and computes its elements from it in parallel, the same
// values for any thread count (Note [Counter-based random fills] in random.cpp).
Tensor uniform(const Shape& shape, double low = 0.0, double high = 1.0, DType dtype = DType::f32,
               Generator* gen = nullptr, Device device = Device::cpu());
Tensor normal(const Shape& shape, double mean = 0.0, double std = 1.0, DType dtype = DType::f32,
              Generator* gen = nullptr, Device device = Device::cpu());
// Uniform integers in [low, high), int64 unless dtype says i32.
Tensor randint(const Shape& shape, std::int64_t low, std::int64_t high, DType dtype = DType::i64,
               Generator* gen = nullptr, Device device = Device::cpu());

// In place on an existing float tensor (used by the nn initialisers).
void uniform_(Tensor& t, double low, double high, Generator* gen = nullptr);
void normal_(Tensor& t, double mean, double std, Generator* gen = nullptr);

}  // namespace anvil
