// SPDX-License-Identifier: Apache-2.0
// The shared embedding variant check (tests/helpers/embedding_cases.h).
#include "helpers/embedding_cases.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "engine/core/random.h"
#include "engine/dispatch/selection.h"
#include "engine/ops/lstm.h"

namespace anvil::test {

Tensor random_ids(std::int64_t n, std::int64_t rows, DType dtype, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) {
    const auto a = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
    const auto b = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(rows));
    x = std::min(a, b);  // skewed: many repeats, some rows unused
  }
  const Tensor t = Tensor::from_vector(v, {n});
  return dtype == DType::i64 ? t : t.to(DType::i32);
}

bool bit_equal(const Tensor& a_any, const Tensor& b_any) {
  const Tensor a = a_any.to(Device::cpu()).contiguous(), b = b_any.to(Device::cpu()).contiguous();
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

namespace {

// Runs `v` on one pass: src is the weight (forward) or dy (backward), all on the variant's device.
Tensor run_variant(const EmbeddingTable::Variant& v, const EmbeddingProblem& p, const Tensor& ids,
                   const Tensor& src) {
  EmbeddingArgs a;
  a.problem = p;
  a.ids = ids.data_ptr();
  const Shape shape = p.pass == EmbeddingPass::forward ? Shape{p.n, p.dim} : Shape{p.rows, p.dim};
  Tensor out = Tensor::full(shape, 7.0, p.dtype).to(p.device);
  if (p.pass == EmbeddingPass::forward) {
    a.weight = src.data_ptr();
    a.out = out.data_ptr();
  } else {
    a.dy = src.data_ptr();
    a.grad = out.data_ptr();
  }
  v.fn(a);
  return out;
}

}  // namespace

void check_embedding_variants(VariantHarness& harness, DType dtype, DType index_dtype,
                              std::int64_t rows, std::int64_t dim, std::int64_t n, Device device,
                              std::uint64_t seed, bool repeat) {
  Generator gen(seed);
  const Tensor ids = random_ids(n, rows, index_dtype, static_cast<std::uint64_t>(dim));
  const Tensor w = normal({rows, dim}, 0, 1, dtype, &gen);
  const Tensor dy = normal({n, dim}, 0, 1, dtype, &gen);
  Tensor ref_out, ref_grad;
  {
    ForceVariant f("embedding", "ref");
    ref_out = ops::embedding(w, ids);
    ref_grad = ops::embedding_backward(dy, ids, rows);
  }
  const Tensor ids_d = ids.to(device), w_d = w.to(device), dy_d = dy.to(device);
  for (EmbeddingPass pass : {EmbeddingPass::forward, EmbeddingPass::backward}) {
    const EmbeddingProblem p{pass, dtype, index_dtype, device, rows, dim, n};
    const bool fwd = pass == EmbeddingPass::forward;
    harness.run(embedding_table(), p, "", [&](const EmbeddingTable::Variant& v) {
      const Tensor got = run_variant(v, p, ids_d, fwd ? w_d : dy_d);
      std::string bad;
      if (!bit_equal(got, fwd ? ref_out.reshape({n, dim}) : ref_grad))
        bad += std::string(fwd ? "out" : "grad") + " differs from ref's bits; ";
      if (repeat && !bit_equal(run_variant(v, p, ids_d, fwd ? w_d : dy_d), got))
        bad += "a second run gave other bits; ";
      return bad;
    });
  }
}

}  // namespace anvil::test
