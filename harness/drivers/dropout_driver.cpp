// SPDX-License-Identifier: Apache-2.0
// The dropout driver (Note [Op drivers]): each variant called directly on its DropoutArgs with a
// Generator seeded afresh by prepare(), so every variant draws from the same seed. What a
// variant must give:
// * the mask holds 0 or 1/(1-p) (in the dtype) and y = x * mask exactly;
// * of a problem of 1000 elements or more, a kept fraction within 6 standard deviations (plus
//   one element) of 1 - p;
// * the mask of `ref` bit for bit: ref draws the Philox stream of Note [Dropout counter RNG],
//   which every variant draws except those listed in kOwnStream (cpu.mt19937, the CPU default,
//   keeps the mt19937_64 masks dropout always drew).
// y and the mask start as NaN. Group "sizes": 1 to 40001 elements, p from 0 to 0.9, f32 and f64.
#include <cmath>
#include <functional>
#include <set>
#include <sstream>

#include "engine/core/random.h"
#include "engine/core/views.h"
#include "engine/dispatch/dropout_problem.h"
#include "harness/drivers/driver_kit.h"
#include "harness/drivers/drivers.h"

namespace anvil::harness {
namespace {

const std::set<std::string> kOwnStream = {"cpu.mt19937"};

class DropoutCase final : public OpCase {
 public:
  DropoutCase(const DropoutTable& table, const DropoutProblem& p, std::uint64_t seed)
      : table_(table), p_(p), seed_(seed) {
    Generator gen(seed);
    x_ = uniform_operand({p.numel}, -1, 1, p.dtype, p.device, gen);
  }

  void prepare(const std::string& variant) override {
    fn_ = supported_variant(table_, variant, p_).fn;
    name_ = variant;
    gen_.seed(seed_ + 1);
    y_ = nan_tensor({p_.numel}, p_.dtype, p_.device);
    mask_ = nan_tensor({p_.numel}, p_.dtype, p_.device);
  }
  void run() override {
    ANVIL_CHECK(fn_ != nullptr, "dropout", "run() before prepare()");
    fn_(DropoutArgs{p_, x_.dev.data_ptr(), y_.data_ptr(), mask_.data_ptr(), &gen_});
  }
  std::string check() override {
    if (!ref_mask_.defined()) {
      DropoutProblem pr = p_;
      pr.device = Device::cpu();
      Generator gen(seed_ + 1);
      const Tensor x = on_host(x_.dev), y = nan_tensor({p_.numel}, p_.dtype, Device::cpu());
      ref_mask_ = nan_tensor({p_.numel}, p_.dtype, Device::cpu());
      supported_variant(table_, "ref", pr)
          .fn(DropoutArgs{pr, x.data_ptr(), y.data_ptr(), ref_mask_.data_ptr(), &gen});
    }
    if (!y_.defined()) return "no output: prepare() did not complete; ";
    std::string bad = kOwnStream.count(name_) ? "" : compare_bits("mask", mask_, ref_mask_);
    // In the dtype, as the kernels compute them.
    const Tensor x = raw::to_dtype(on_host(x_.dev), DType::f64);
    const Tensor y = raw::to_dtype(on_host(y_), DType::f64);
    const Tensor m = raw::to_dtype(on_host(mask_), DType::f64);
    const double keep = p_.dtype == DType::f32 ? double(static_cast<float>(1.0 / (1.0 - p_.p)))
                                               : 1.0 / (1.0 - p_.p);
    std::int64_t kept = 0, bad_mask = -1, bad_y = -1;
    for (std::int64_t i = 0; i < p_.numel; ++i) {
      const double mi = m.data<double>()[i], xi = x.data<double>()[i];
      kept += mi != 0.0;
      if (mi != 0.0 && mi != keep && bad_mask < 0) bad_mask = i;
      double want = xi * mi;
      if (p_.dtype == DType::f32) want = static_cast<float>(want);
      if (y.data<double>()[i] != want && bad_y < 0) bad_y = i;
    }
    std::ostringstream os;
    if (bad_mask >= 0)
      os << "mask: element " << bad_mask << " is " << m.data<double>()[bad_mask] << ", not 0 or "
         << keep << "; ";
    if (bad_y >= 0) os << "y: element " << bad_y << " is not x * mask; ";
    const double n = static_cast<double>(p_.numel);
    const double sd = std::sqrt(p_.p * (1.0 - p_.p) / std::max(1.0, n));
    if (p_.numel >= 1000 && std::fabs(double(kept) / n - (1.0 - p_.p)) > 6.0 * sd + 1.0 / n)
      os << "kept " << kept << " of " << p_.numel << ", expected about " << (1.0 - p_.p) * n
         << "; ";
    return bad + os.str();
  }

 private:
  const DropoutTable& table_;
  DropoutProblem p_;
  std::uint64_t seed_;
  Operand x_;
  Generator gen_{0};
  std::function<void(const DropoutArgs&)> fn_;
  std::string name_;
  Tensor y_, mask_, ref_mask_;
};

class DropoutDriver final : public TableDriver<DropoutProblem, DropoutTable> {
 public:
  DropoutDriver() : TableDriver(dropout_table()) {}

  std::vector<std::string> groups() const override { return {"sizes"}; }

  std::vector<nn::NamedProblem> group(const std::string& name) const override {
    ANVIL_CHECK(name == "sizes", "dropout driver", "no problem group '", name,
                "' (expected sizes)");
    std::vector<nn::NamedProblem> out;
    for (DType dtype : {DType::f32, DType::f64})
      for (std::int64_t n : {1, 7, 1000, 40001})
        for (double p : {0.0, 0.2, 0.5, 0.9}) {
          const DropoutProblem q{dtype, Device::cpu(), n, p};
          out.push_back({q.repr(), q});
        }
    return out;
  }

  std::vector<OpProblem> passes(const OpProblem& p) const override { return {p}; }

  std::unique_ptr<OpCase> make_case(const OpProblem& p, std::uint64_t seed) const override {
    return std::make_unique<DropoutCase>(table_, std::get<DropoutProblem>(p), seed);
  }

  // Exact: a product by the one scale, rounded once in the dtype.
  double tolerance(const std::string&, DType) const override { return 0.0; }

  // One multiply per element (the draw not counted); x read, y and the mask written.
  double flops(const OpProblem& p) const override {
    return static_cast<double>(std::get<DropoutProblem>(p).numel);
  }
  double bytes(const OpProblem& p) const override {
    const DropoutProblem& q = std::get<DropoutProblem>(p);
    return 3.0 * static_cast<double>(q.numel) * static_cast<double>(dtype_size(q.dtype));
  }

  // Every CPU variant runs every problem.
  int minimum_problems(const std::string& group, DeviceType device) const override {
    return every_pair(*this, group, device);
  }
};

}  // namespace

std::unique_ptr<OpDriver> make_dropout_driver() { return std::make_unique<DropoutDriver>(); }

}  // namespace anvil::harness
