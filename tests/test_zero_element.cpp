// SPDX-License-Identifier: Apache-2.0
// Zero-element tensors on the CPU and on "CUDA" tensors made of host memory (no GPU needed):
// they are contiguous whatever their strides (Note [Empty tensors are contiguous],
// engine/core/tensor.cpp), and copies into or out of them make no device call. Before that fix,
// copying into a [3, 0] CUDA tensor staged the source into another non-contiguous [3, 0] tensor
// and recursed without end (the H100 hang of issue 20); here the same path would have asked for
// the CUDA backend, which this machine lacks, and thrown.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/core/tensor.h"
#include "engine/core/views.h"

using namespace anvil;

namespace {
const Device kGpu = Device::cuda(0);
}  // namespace

TEST_CASE("tensors without elements are contiguous", "[core][zero]") {
  for (const Shape& s : {Shape{0}, Shape{3, 0}, Shape{0, 3}, Shape{2, 0, 5}, Shape{4, 5, 0}}) {
    INFO(shape_str(s));
    const Tensor t = Tensor::empty(s);
    CHECK(t.numel() == 0);
    CHECK(t.is_contiguous());
    // A view with arbitrary strides too.
    const Tensor v = raw::make_view(t, s, Shape(s.size(), 7), 0);
    CHECK(v.is_contiguous());
  }
  // Non-empty tensors keep the stride rule.
  CHECK_FALSE(Tensor::empty({3, 4}).t().is_contiguous());
  CHECK(Tensor::empty({3, 1}).t().is_contiguous());
}

TEST_CASE("copies into and out of zero-element CUDA tensors make no device call", "[cuda][zero]") {
  // Host memory posing as cuda:0 (as in test_device_refusals.cpp): any device call would throw
  // here, since this machine has no GPU backend loaded, or would touch the buffer.
  std::vector<float> buffer(4, 0.0f);
  for (const Shape& s : {Shape{3, 0}, Shape{0, 3}, Shape{0}}) {
    INFO(shape_str(s));
    Tensor dev = Tensor::from_blob(buffer.data(), s, DType::f32, kGpu);
    CHECK_NOTHROW(dev.copy_(Tensor::zeros(s)));              // host -> device
    CHECK_NOTHROW(dev.copy_(Tensor::zeros(s, DType::f64)));  // with a dtype change
    CHECK_NOTHROW(dev.copy_(dev));                           // device -> same device
    CHECK_NOTHROW(Tensor::empty(s).copy_(dev));              // device -> host
    CHECK_NOTHROW(dev.copy_(Tensor::zeros({1}).expand(s)));  // broadcast source
    CHECK_NOTHROW(dev.fill_(3.0));
  }
  CHECK(buffer == std::vector<float>(4, 0.0f));
}
