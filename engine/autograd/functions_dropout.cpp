// SPDX-License-Identifier: Apache-2.0
// Dropout: a Bernoulli keep-mask scaled by 1/(1-p), drawn from a seeded Generator, through the
// dropout table (engine/dispatch/dropout_problem.h): on the CPU by default the mt19937_64 mask
// of cpu.mt19937, on a GPU the Philox mask of cuda.custom.dropout (Note [Dropout counter RNG]).
// The forward writes y and the mask in one pass; the backward multiplies by the same mask.
#include "engine/autograd/autograd_meta.h"
#include "engine/autograd/functions.h"
#include "engine/dispatch/dropout_problem.h"
#include "engine/ops/elementwise.h"

namespace anvil {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_defined(x, "dropout", "input");
  ANVIL_CHECK(p >= 0.0 && p < 1.0, "dropout", "probability must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  // A 16-bit input (an autocast activation, Note [Autocast policy]) is dropped in f32, as the
  // other 16-bit pointwise ops compute: the same mask as an f32 run draws, the result rounded
  // to the input's type, and through the casts the gradient comes back in that type.
  if (is_half(x.dtype())) return dropout(x.to(DType::f32), p, training, gen).to(x.dtype());
  ANVIL_CHECK(is_floating(x.dtype()), "dropout", "needs a floating-point tensor, got ",
              dtype_name(x.dtype()));
  const Tensor xc = x.detach().contiguous();
  Tensor mask = Tensor::empty(x.sizes(), x.dtype(), x.device());
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  DropoutArgs args;
  args.problem.dtype = x.dtype();
  args.problem.device = x.device();
  args.problem.numel = x.numel();
  args.problem.p = p;
  args.x = xc.data_ptr();
  args.y = out.data_ptr();
  args.mask = mask.data_ptr();
  args.gen = gen ? gen : &default_generator();
  dropout_table().run(args);
  if (any_requires_grad({&x}))
    record("DropoutBackward", {x}, {out}, [mask](const std::vector<Tensor>& g) {
      return std::vector<Tensor>{ops::mul(g[0], mask)};
    });
  return out;
}

}  // namespace anvil
