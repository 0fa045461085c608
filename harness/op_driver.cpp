// SPDX-License-Identifier: Apache-2.0
// The driver list and the problem sources shared by every driver (harness/op_driver.h,
// Note [Op drivers]).
#include "harness/op_driver.h"

#include <limits>
#include <set>
#include <type_traits>

#include "engine/core/error.h"
#include "harness/drivers/drivers.h"
#include "harness/problem_descriptor.h"
#include "models/registry.h"

namespace anvil::harness {

double OpDriver::flops(const OpProblem& p) const {
  return std::visit(
      [this](const auto& q) -> double {
        if constexpr (requires { q.flops(); })
          return q.flops();
        else
          fail(op().c_str(), "the driver does not count the FLOPs of ", q.repr());
      },
      p);
}
double OpDriver::bytes(const OpProblem& p) const {
  return std::visit(
      [this](const auto& q) -> double {
        if constexpr (requires { q.bytes(); })
          return q.bytes();
        else
          fail(op().c_str(), "the driver does not count the bytes of ", q.repr());
      },
      p);
}

const std::vector<const OpDriver*>& drivers() {
  static const std::vector<std::unique_ptr<OpDriver>> owned = [] {
    std::vector<std::unique_ptr<OpDriver>> v;
    v.push_back(make_gemm_driver());
    v.push_back(make_conv2d_driver());
    v.push_back(make_pool_driver(PoolKind::max));
    v.push_back(make_pool_driver(PoolKind::avg));
    v.push_back(make_pool_driver(PoolKind::adaptive_avg));
    v.push_back(make_batch_norm_driver());
    v.push_back(make_lstm_driver());
    v.push_back(make_elementwise_driver());
    v.push_back(make_reduce_driver());
    v.push_back(make_softmax_driver());
    v.push_back(make_embedding_driver());
    v.push_back(make_dropout_driver());
    for (OptimOp op : {OptimOp::sgd, OptimOp::adam, OptimOp::grad_norm, OptimOp::grad_scale})
      v.push_back(make_optimizer_driver(op));
    return v;
  }();
  static const std::vector<const OpDriver*> list = [] {
    std::vector<const OpDriver*> v;
    v.reserve(owned.size());
    for (const auto& d : owned) v.push_back(d.get());
    return v;
  }();
  return list;
}

const OpDriver* find_driver(const std::string& op) {
  for (const OpDriver* d : drivers())
    if (d->op() == op) return d;
  return nullptr;
}

std::vector<nn::NamedProblem> model_problems(const OpDriver& driver, const std::string& model,
                                             std::int64_t batch) {
  std::vector<nn::NamedProblem> out;
  std::set<std::string> seen;
  for (auto& np : models::problems(model, batch))
    if (op_name(np.problem) == driver.op() && seen.insert(descriptor(np.problem)).second)
      out.push_back(std::move(np));
  return out;
}

std::vector<nn::NamedProblem> problems_from(const OpDriver& driver, const std::string& source) {
  if (source.rfind("model:", 0) == 0) {
    const std::string model = source.substr(6);
    return model_problems(driver, model, models::info(model).cpu_batch);
  }
  if (source.rfind("group:", 0) == 0) return driver.group(source.substr(6));
  return {{driver.op() + ":" + source, parse_problem(driver.op(), source)}};
}

std::string pass_label(const OpProblem& problem) {
  return std::visit(
      []<typename P>(const P& q) -> std::string {
        if constexpr (std::is_same_v<P, ConvProblem>)
          return std::string(conv_pass_name(q.pass)) +
                 (q.fuse_relu && q.pass == ConvPass::forward ? "_relu" : "");
        else if constexpr (std::is_same_v<P, PoolProblem>)
          return pool_pass_name(q.pass);
        else if constexpr (std::is_same_v<P, BatchNormProblem>)
          return batch_norm_pass_name(q.pass);
        else if constexpr (std::is_same_v<P, LstmProblem>)
          return lstm_pass_name(q.pass);
        else if constexpr (std::is_same_v<P, EmbeddingProblem>)
          return q.pass == EmbeddingPass::forward ? "forward" : "backward";
        else if constexpr (std::is_same_v<P, ElementwiseProblem>)
          return ew_name(q.op);
        else if constexpr (std::is_same_v<P, ReduceProblem>)
          return reduce_op_name(q.op);
        else if constexpr (std::is_same_v<P, SoftmaxProblem>)
          return softmax_op_name(q.op);
        else if constexpr (std::is_same_v<P, GemmProblem>)
          return std::string(q.trans_a ? "T" : "N") + (q.trans_b ? "T" : "N");
        else if constexpr (std::is_same_v<P, DropoutProblem>)
          return "forward";
        else
          return "step";  // the optimizer tables
      },
      problem);
}

OpProblem on_device(OpProblem p, const Device& device) {
  std::visit([&device](auto& q) { q.device = device; }, p);
  return p;
}

double rounding_of(const std::string& variant, DType dtype) {
  // TF32 keeps 10 explicit mantissa bits: each operand of a product is rounded by up to 2^-11.
  if (variant.find("tf32") != std::string::npos) return 1.0 / 1024.0;
  return dtype == DType::f64 ? std::numeric_limits<double>::epsilon()
                             : std::numeric_limits<float>::epsilon();
}

}  // namespace anvil::harness
