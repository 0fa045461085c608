// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the op drivers (harness/drivers/*_driver.cpp) share: the table-typed base that answers
// the support questions, the operand maker (a device tensor and the same values in f64 on the
// host for ref) and the scaled comparison of Note [Op drivers]. Internal to harness/.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/random.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/trial_timer.h"
#include "harness/op_driver.h"

namespace anvil::harness {

// The (problem, pass) pairs every CUDA variant must run of a driver's group: the floor of the
// GPU variant tests before the drivers (tests/cuda/), since cuDNN's algorithms decline by shape
// and dtype in ways the CPU counts do not predict.
inline constexpr int kCudaMinimumPairs = 3;

// The minimum of a driver whose every CPU variant runs every problem of a group in every pass:
// the group's (problem, pass) pairs; kCudaMinimumPairs on the GPU.
int every_pair(const OpDriver& driver, const std::string& group, DeviceType device);

// A driver of a VariantTable<Problem, Args>.
template <typename Problem, typename Table>
class TableDriver : public OpDriver {
 public:
  explicit TableDriver(Table& table) : table_(table) {}
  std::string op() const override { return table_.op(); }
  const VariantTableBase& table() const override { return table_; }
  std::vector<Candidate> candidates(const OpProblem& p) const override {
    return table_.candidates(std::get<Problem>(p));
  }
  std::string select(const OpProblem& p) const override {
    return table_.select(std::get<Problem>(p)).name;
  }
  std::string select_tuned(const OpProblem& p, OpCase& c) const override {
    const Problem& problem = std::get<Problem>(p);
    const std::string op = table_.op();
    auto trial = [&](const typename Table::Variant& v) {
      c.prepare(v.name);
      return time_trial(
          problem.device, [&c] { c.run(); }, op.c_str());
    };
    return table_.select(problem, trial).name;
  }

 protected:
  // tolerance(variant, dtype) as a case's bound per variant (Note [Op drivers]).
  std::function<double(const std::string&)> bound_of(DType dtype) const {
    return [this, dtype](const std::string& v) { return tolerance(v, dtype); };
  }
  Table& table_;
};

// The variant `name` of `table`; throws naming the op when there is none or it declines p.
template <typename Table, typename Problem>
const typename Table::Variant& supported_variant(const Table& table, const std::string& name,
                                                 const Problem& p) {
  const auto* v = table.find(name);
  ANVIL_CHECK(v != nullptr, table.op().c_str(), "no variant named '", name, "'");
  for (const auto& c : table.candidates(p))
    if (c.name == name)
      ANVIL_CHECK(c.support.ok, table.op().c_str(), "variant ", name, " does not support ",
                  p.repr(), ": ", c.support.reason);
  return *v;
}

// One operand: `dev` on the problem's device, `f64` the same values on the host.
struct Operand {
  Tensor dev, f64;
};
// U(low, high) in `dtype`, on `device`.
Operand uniform_operand(const Shape& shape, double low, double high, DType dtype,
                        const Device& device, Generator& gen);
// Values in [-1, 1) pairwise distinct within 2^22 consecutive elements (no ties in a max-pool
// window, so every variant routes the gradient to the same element).
Operand distinct_operand(const Shape& shape, DType dtype, const Device& device, std::uint64_t seed);
// A tensor of `dtype` on `device` filled with NaN.
Tensor nan_tensor(const Shape& shape, DType dtype, const Device& device);
// A tensor of `dtype` on `device` filled with `value` (a sentinel where NaN cannot be stored).
Tensor filled_tensor(const Shape& shape, double value, DType dtype, const Device& device);
// A host tensor on `device` (itself on the CPU).
Tensor placed_on(const Tensor& host, const Device& device);
// The same values on the host, contiguous.
Tensor on_host(const Tensor& t);
// n class ids (or embedding ids) in [0, classes) as `dtype` (i32 or i64) on the host, skewed
// towards small ids (the smaller of two uniform draws): many repeats, some ids never drawn.
Tensor skewed_ids(std::int64_t n, std::int64_t classes, DType dtype, std::uint64_t seed);

// "" when max |got - want| / max(1, max finite |want|) <= bound (NaN or a size mismatch fails;
// with nan_matches_nan, an element NaN on both sides agrees), else
// "<what>: scaled error E > bound B (worst at flat i: got g, ref r); ".
std::string compare_scaled(const std::string& what, const Tensor& got, const Tensor& want,
                           double bound, bool nan_matches_nan = false);
// "" when got and want have the same dtype, shape and bytes (any devices), else
// "<what>: differs from ref's bits (first at flat i: got g, ref r); ".
std::string compare_bits(const std::string& what, const Tensor& got, const Tensor& want);

}  // namespace anvil::harness
