// SPDX-License-Identifier: Apache-2.0
// Pooling layers (engine/nn/pooling.h).
#include "engine/nn/pooling.h"

#include <algorithm>

#include "engine/dispatch/pool_problem.h"

namespace anvil::nn {
namespace {

PoolProblem fixed_problem(PoolKind kind, const Shape& in, const Pool2dOptions& o,
                          const char* where) {
  return make_pool_problem(kind, in, o.kernel, o.stride, o.padding, o.ceil_mode,
                           o.count_include_pad, DType::f32, Device::cpu(), where);
}

std::string without_dot(std::string prefix) {
  if (!prefix.empty() && prefix.back() == '.') prefix.pop_back();
  return prefix;
}

std::string options_repr(const Pool2dOptions& o) {
  const auto stride = (o.stride[0] == 0 && o.stride[1] == 0) ? o.kernel : o.stride;
  return detail::str_cat("kernel=[", o.kernel[0], ",", o.kernel[1], "], stride=[", stride[0], ",",
                         stride[1], "], padding=[", o.padding[0], ",", o.padding[1],
                         "], ceil_mode=", o.ceil_mode ? "true" : "false");
}

Shape out_shape(const PoolProblem& p) { return {p.n, p.c, p.oh, p.ow}; }

void validate_options(const Pool2dOptions& o, const char* where) {
  // The input-independent checks, at construction (a dummy input large enough for the kernel).
  (void)make_pool_problem(
      PoolKind::max,
      {1, 1, std::max<std::int64_t>(o.kernel[0], 1), std::max<std::int64_t>(o.kernel[1], 1)},
      o.kernel, o.stride, o.padding, o.ceil_mode, o.count_include_pad, DType::f32, Device::cpu(),
      where);
}

}  // namespace

// ---- MaxPool2d --------------------------------------------------------------------------------
MaxPool2d::MaxPool2d(Pool2dOptions options) : options_(options) {
  validate_options(options_, "MaxPool2d");
}
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, options_); }
std::string MaxPool2d::extra_repr() const { return options_repr(options_); }
Shape MaxPool2d::output_shape(const Shape& in) const {
  return out_shape(fixed_problem(PoolKind::max, in, options_, "MaxPool2d"));
}
double MaxPool2d::forward_flops(const Shape& in) const {
  return fixed_problem(PoolKind::max, in, options_, "MaxPool2d").flops();
}
void MaxPool2d::problems(const Shape& in, const std::string& prefix,
                         std::vector<NamedProblem>& out) const {
  out.push_back({without_dot(prefix), fixed_problem(PoolKind::max, in, options_, "MaxPool2d")});
}

// ---- AvgPool2d --------------------------------------------------------------------------------
AvgPool2d::AvgPool2d(Pool2dOptions options) : options_(options) {
  validate_options(options_, "AvgPool2d");
}
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, options_); }
std::string AvgPool2d::extra_repr() const {
  return options_repr(options_) +
         (options_.count_include_pad ? ", count_include_pad=true" : ", count_include_pad=false");
}
Shape AvgPool2d::output_shape(const Shape& in) const {
  return out_shape(fixed_problem(PoolKind::avg, in, options_, "AvgPool2d"));
}
double AvgPool2d::forward_flops(const Shape& in) const {
  return fixed_problem(PoolKind::avg, in, options_, "AvgPool2d").flops();
}
void AvgPool2d::problems(const Shape& in, const std::string& prefix,
                         std::vector<NamedProblem>& out) const {
  out.push_back({without_dot(prefix), fixed_problem(PoolKind::avg, in, options_, "AvgPool2d")});
}

// ---- AdaptiveAvgPool2d ------------------------------------------------------------------------
AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::array<std::int64_t, 2> output_size)
    : output_size_(output_size) {
  ANVIL_CHECK(output_size[0] > 0 && output_size[1] > 0, "AdaptiveAvgPool2d",
              "output size must be positive, got [", output_size[0], ",", output_size[1], "]");
}
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) { return adaptive_avg_pool2d(x, output_size_); }
std::string AdaptiveAvgPool2d::extra_repr() const {
  return detail::str_cat("output_size=[", output_size_[0], ",", output_size_[1], "]");
}
Shape AdaptiveAvgPool2d::output_shape(const Shape& in) const {
  return out_shape(
      make_adaptive_pool_problem(in, output_size_, DType::f32, Device::cpu(), "AdaptiveAvgPool2d"));
}
double AdaptiveAvgPool2d::forward_flops(const Shape& in) const {
  return make_adaptive_pool_problem(in, output_size_, DType::f32, Device::cpu(),
                                    "AdaptiveAvgPool2d")
      .flops();
}
void AdaptiveAvgPool2d::problems(const Shape& in, const std::string& prefix,
                                 std::vector<NamedProblem>& out) const {
  out.push_back(
      {without_dot(prefix), make_adaptive_pool_problem(in, output_size_, DType::f32, Device::cpu(),
                                                       "AdaptiveAvgPool2d")});
}

// ---- GlobalAvgPool2d --------------------------------------------------------------------------
Tensor GlobalAvgPool2d::forward(const Tensor& x) { return global_avg_pool2d(x); }
Shape GlobalAvgPool2d::output_shape(const Shape& in) const {
  const PoolProblem p =
      make_adaptive_pool_problem(in, {1, 1}, DType::f32, Device::cpu(), "GlobalAvgPool2d");
  return {p.n, p.c};
}
double GlobalAvgPool2d::forward_flops(const Shape& in) const {
  return make_adaptive_pool_problem(in, {1, 1}, DType::f32, Device::cpu(), "GlobalAvgPool2d")
      .flops();
}
void GlobalAvgPool2d::problems(const Shape& in, const std::string& prefix,
                               std::vector<NamedProblem>& out) const {
  out.push_back(
      {without_dot(prefix),
       make_adaptive_pool_problem(in, {1, 1}, DType::f32, Device::cpu(), "GlobalAvgPool2d")});
}

}  // namespace anvil::nn
