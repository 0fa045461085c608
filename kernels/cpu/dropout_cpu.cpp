// SPDX-License-Identifier: Apache-2.0
// CPU variants of the dropout table (engine/dispatch/dropout_problem.h): y = x * mask with
// mask = keep ? 1/(1-p) : 0, dense buffers of numel elements.
//   cpu.mt19937  the CPU default: one Bernoulli draw per element from the Generator's mt19937_64
//                (what dropout() always did on the CPU, so CPU runs keep their masks)
//   ref          serial Philox4x32-10 of Note [Dropout counter RNG]: the stream that
//                cuda.custom.dropout draws too, so a CPU run forced to `ref` matches a GPU run
#include <random>

#include "engine/core/random.h"
#include "engine/dispatch/floating_variant.h"
#include "engine/dispatch/dropout_problem.h"
#include "kernels/cpu/optimizer_register.h"
#include "kernels/dropout_philox.h"

namespace anvil::kernels {
namespace {

template <typename T>
void dropout_mt19937(const DropoutArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  T* m = static_cast<T*>(a.mask);
  const double p = a.problem.p;
  const T scale = static_cast<T>(1.0 / (1.0 - p));
  std::bernoulli_distribution keep(1.0 - p);
  auto& eng = a.gen->engine();
  const std::int64_t n = a.problem.numel;
  for (std::int64_t i = 0; i < n; ++i) m[i] = keep(eng) ? scale : T(0);
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * m[i];
}

template <typename T>
void dropout_philox(const DropoutArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  T* m = static_cast<T*>(a.mask);
  const T scale = static_cast<T>(1.0 / (1.0 - a.problem.p));
  const std::uint64_t threshold = dropout_keep_threshold(a.problem.p);
  const std::uint64_t seed = a.gen->next();
  const std::int64_t n = a.problem.numel;
  for (std::int64_t i = 0; i < n; ++i) {
    const Philox4 w = dropout_words(static_cast<std::uint64_t>(i) / 4, seed, /*offset=*/0);
    const bool kept = static_cast<std::uint64_t>(w.x[i % 4]) < threshold;
    m[i] = kept ? scale : T(0);
    y[i] = x[i] * m[i];
  }
}

}  // namespace

void register_dropout_cpu() {
  dropout_table().add(floating_variant("cpu.mt19937", dropout_mt19937<float>,
                                       dropout_mt19937<double>,
                                       "Bernoulli draw per element from the mt19937_64 Generator"));
  dropout_table().add(floating_variant("ref", dropout_philox<float>, dropout_philox<double>,
                                       "serial Philox4x32-10, the stream of cuda.custom.dropout"));
}

}  // namespace anvil::kernels
