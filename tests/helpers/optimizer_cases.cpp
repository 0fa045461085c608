// SPDX-License-Identifier: Apache-2.0
// The shared optimizer-table checks (tests/helpers/optimizer_cases.h).
#include "helpers/optimizer_cases.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>
#include <utility>

#include "engine/core/random.h"

namespace anvil::test {

TensorList TensorList::to(Device d) const {
  TensorList c;
  for (std::size_t i = 0; i < p.size(); ++i) {
    c.p.push_back(p[i].to(d).clone());
    c.g.push_back(g[i].to(d).clone());
    c.s1.push_back(s1[i].to(d).clone());
    c.s2.push_back(s2[i].to(d).clone());
  }
  return c;
}

std::vector<OptimTensor> TensorList::entries(bool first, bool with_state1) const {
  std::vector<OptimTensor> e;
  for (std::size_t i = 0; i < p.size(); ++i)
    e.push_back({p[i].data_ptr(), g[i].data_ptr(), with_state1 ? s1[i].data_ptr() : nullptr,
                 s2[i].data_ptr(), p[i].numel(), first});
  return e;
}

TensorList make_list(DType dtype, std::uint64_t seed, const std::vector<std::int64_t>& sizes) {
  Generator gen(seed);
  TensorList l;
  for (std::int64_t n : sizes) {
    l.p.push_back(normal({n}, 0, 1, dtype, &gen));
    l.g.push_back(normal({n}, 0, 1, dtype, &gen));
    l.s1.push_back(normal({n}, 0, 0.1, dtype, &gen));
    l.s2.push_back(uniform({n}, 0.0, 0.1, dtype, &gen));  // Adam's v must be >= 0
  }
  return l;
}

OptimizerArgs args_for(OptimOp op, DType dtype, Device device, const std::vector<OptimTensor>& e) {
  OptimizerArgs a;
  a.problem.op = op;
  a.problem.dtype = dtype;
  a.problem.device = device;
  a.problem.tensors = static_cast<std::int64_t>(e.size());
  for (const auto& t : e) a.problem.numel += t.numel;
  a.tensors = e.data();
  return a;
}

std::string compare_lists(const TensorList& want, const TensorList& got, double tol) {
  for (std::size_t i = 0; i < want.p.size(); ++i) {
    const std::string at =
        " of tensor " + std::to_string(i) + " (" + std::to_string(want.p[i].numel()) + " elements)";
    for (const auto& [what, w, g] :
         {std::tuple{"param", &want.p, &got.p}, std::tuple{"state1", &want.s1, &got.s1},
          std::tuple{"state2", &want.s2, &got.s2}, std::tuple{"grad", &want.g, &got.g}}) {
      std::string bad = compare(what + at, (*g)[i], (*w)[i], tol);
      if (!bad.empty()) return bad;
    }
  }
  return {};
}

namespace {

std::string hyper_label(DType dtype, const SgdHyper& h) {
  std::ostringstream os;
  os << dtype_name(dtype) << " lr=" << h.lr << " momentum=" << h.momentum
     << " dampening=" << h.dampening << " wd=" << h.weight_decay << " nesterov=" << h.nesterov;
  return os.str();
}

}  // namespace

void check_sgd_variants(VariantHarness& harness, DType dtype, Device device, const SgdHyper& h,
                        double tol, std::uint64_t seed) {
  const TensorList base = make_list(dtype, seed);
  const bool mom = h.momentum != 0;
  // ref on the host after each step.
  std::vector<TensorList> want;
  TensorList r = base.to(Device::cpu());
  for (bool first : {true, false}) {
    auto e = r.entries(first, mom);
    OptimizerArgs a = args_for(OptimOp::sgd, dtype, Device::cpu(), e);
    a.problem.momentum = mom;
    a.sgd = h;
    variant(sgd_update_table(), "ref").fn(a);
    want.push_back(r.to(Device::cpu()));
  }
  const TensorList dev_list = base.to(device);
  auto e0 = dev_list.entries(true, mom);
  OptimizerArgs a0 = args_for(OptimOp::sgd, dtype, device, e0);
  a0.problem.momentum = mom;
  harness.run(sgd_update_table(), a0.problem, hyper_label(dtype, h),
              [&](const OptimizerTable::Variant& v) {
                const TensorList l = base.to(device);
                for (int step = 0; step < 2; ++step) {
                  auto e = l.entries(step == 0, mom);
                  OptimizerArgs a = args_for(OptimOp::sgd, dtype, device, e);
                  a.problem.momentum = mom;
                  a.sgd = h;
                  v.fn(a);
                  const std::string bad = compare_lists(want[step], l, tol);
                  if (!bad.empty()) return "after step " + std::to_string(step + 1) + ": " + bad;
                }
                return std::string();
              });
}

void check_grad_norm_variants(VariantHarness& harness, DType dtype, Device device, double rel_tol,
                              bool deterministic, std::uint64_t seed) {
  const TensorList base = make_list(dtype, seed);
  auto ec = base.entries(false);
  double want = -1;
  OptimizerArgs nc = args_for(OptimOp::grad_norm, dtype, Device::cpu(), ec);
  nc.result = &want;
  variant(grad_norm_table(), "ref").fn(nc);
  const TensorList l = base.to(device);
  auto e = l.entries(false);
  OptimizerArgs a = args_for(OptimOp::grad_norm, dtype, device, e);
  harness.run(grad_norm_table(), a.problem, std::string(dtype_name(dtype)),
              [&](const OptimizerTable::Variant& v) {
                double got = -1, again = -1;
                a.result = &got;
                v.fn(a);
                std::ostringstream os;
                os.precision(17);
                if (!(std::fabs(got - want) <= rel_tol * std::fabs(want)))
                  os << "squared norm " << got << ", ref " << want << " (relative tolerance "
                     << rel_tol << ")";
                if (deterministic) {
                  a.result = &again;
                  v.fn(a);
                  if (again != got) os << " a second call gave " << again << ", not " << got;
                }
                return os.str();
              });
}

namespace {

// (tensor, element) of make_list's default sizes and the value put there: none, an inf in the
// last element of the 70001-element tensor (the tail of its fifth CUDA chunk), a NaN in the
// first element of the list.
std::vector<std::pair<std::pair<int, std::int64_t>, double>> poisoned_cases() {
  return {{{-1, 0}, 0.0},
          {{5, 70000}, std::numeric_limits<double>::infinity()},
          {{0, 0}, std::numeric_limits<double>::quiet_NaN()}};
}

void set_element(Tensor& t, std::int64_t i, double value) {
  if (t.dtype() == DType::f64)
    t.data<double>()[i] = value;
  else
    t.data<float>()[i] = static_cast<float>(value);
}

}  // namespace

void check_grad_scale_variants(VariantHarness& harness, DType dtype, Device device,
                               std::uint64_t seed) {
  const TensorList base = make_list(dtype, seed);
  TensorList want = base.to(Device::cpu());
  auto ec = want.entries(false);
  OptimizerArgs sc = args_for(OptimOp::grad_scale, dtype, Device::cpu(), ec);
  sc.scale = 0.37;
  variant(grad_scale_table(), "ref").fn(sc);
  const TensorList dev_list = base.to(device);
  auto e0 = dev_list.entries(false);
  const OptimizerArgs a0 = args_for(OptimOp::grad_scale, dtype, device, e0);
  harness.run(grad_scale_table(), a0.problem, std::string(dtype_name(dtype)),
              [&](const OptimizerTable::Variant& v) {
                const TensorList l = base.to(device);
                auto e = l.entries(false);
                OptimizerArgs a = args_for(OptimOp::grad_scale, dtype, device, e);
                a.scale = 0.37;
                v.fn(a);
                std::string bad = compare_lists(want, l, 0.0);  // the same products, bit for bit
                if (!bad.empty()) return bad;
                // With a found_inf flag (loss scaling's unscale pass): the same products, and
                // the flag set exactly when a result is not finite.
                for (const auto& [where, poison] : poisoned_cases()) {
                  TensorList in = base.to(Device::cpu());
                  if (where.first >= 0) set_element(in.g[where.first], where.second, poison);
                  const TensorList dl = in.to(device);
                  auto de = dl.entries(false);
                  Tensor flag = Tensor::zeros({}, DType::f32, device);
                  OptimizerArgs c = args_for(OptimOp::grad_scale, dtype, device, de);
                  c.scale = 0.37;
                  c.found_inf = flag.data_ptr();
                  v.fn(c);
                  const double expect = where.first >= 0 ? 1.0 : 0.0;
                  if (flag.item() != expect)
                    return "found_inf " + std::to_string(flag.item()) + ", expected " +
                           std::to_string(expect) + " (poison " + std::to_string(poison) +
                           " in tensor " + std::to_string(where.first) + ")";
                  if (where.first < 0) bad = compare_lists(want, dl, 0.0);
                  if (!bad.empty()) return "with found_inf: " + bad;
                }
                return std::string();
              });
}

}  // namespace anvil::test
