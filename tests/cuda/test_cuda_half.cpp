// SPDX-License-Identifier: Apache-2.0
// bf16 and f16 tensors on the GPU (kernels/cuda/copy_kernels.cu): transfers, fills and
// converting copies on the device, dense and strided, must give the host's bit patterns
// (engine/core/half_types.h, round to nearest even); under autocast a 16-bit input is pooled in
// f32 on the GPU, whose pooling kernels are f32/f64 only. Runs only with a GPU (gpu_main.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "anvil/anvil.h"
#include "engine/autograd/autocast.h"
#include "engine/core/views.h"
#include "helpers/gradcheck.h"
#include "helpers/half_bits.h"

using namespace anvil;
using test::bits_of;

namespace {

const Device kGpu = Device::cuda(0);

}  // namespace

TEST_CASE("bf16/f16 tensors move to the GPU and back bit for bit", "[cuda][half]") {
  require_cuda("test_cuda_half");
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    const Tensor x = test::all_half_patterns(t);
    CHECK(bits_of(x.to(kGpu)) == bits_of(x));
    // A strided device view gathered on the device, then copied back.
    const Tensor g = x.to(kGpu);
    CHECK(bits_of(raw::transpose(g, 0, 1).contiguous()) ==
          bits_of(raw::transpose(x, 0, 1).contiguous()));
  }
}

TEST_CASE("device casts to and from bf16/f16 round as the host does", "[cuda][half]") {
  require_cuda("test_cuda_half");
  Generator gen(17);
  // Normal values, ties, subnormals, overflow, NaN, Inf and -0, in f32 and f64.
  Tensor x32 = normal({4096}, 0.0, 1000.0, DType::f32, &gen);
  const std::vector<float> special = {65520.0f,
                                      65519.0f,
                                      1e-7f,
                                      3e-8f,
                                      -0.0f,
                                      INFINITY,
                                      -INFINITY,
                                      std::nanf(""),
                                      1.0f + std::ldexp(1.0f, -11),
                                      1.0f + std::ldexp(1.0f, -8),
                                      1e-40f,
                                      3.4e38f};
  for (std::size_t i = 0; i < special.size(); ++i) x32.data<float>()[i] = special[i];
  const Tensor x64 = x32.to(DType::f64);
  for (DType t : {DType::bf16, DType::f16}) {
    INFO(dtype_name(t));
    for (const Tensor& x : {x32, x64}) {
      INFO("from " << dtype_name(x.dtype()));
      const Tensor on_host = x.to(t);
      const Tensor on_device = x.to(kGpu).to(t);  // the device's converting copy
      const std::vector<std::uint16_t> want = bits_of(on_host), got = bits_of(on_device);
      REQUIRE(want.size() == got.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        const bool nan_pair = (want[i] & 0x7fff) > (t == DType::bf16 ? 0x7f80 : 0x7c00) &&
                              (got[i] & 0x7fff) > (t == DType::bf16 ? 0x7f80 : 0x7c00);
        INFO("element " << i);
        CHECK((got[i] == want[i] || nan_pair));  // CUDA's NaN pattern may differ; still NaN
      }
    }
    // Widening on the device is exact.
    const Tensor h = test::all_half_patterns(t);
    const Tensor back = h.to(kGpu).to(DType::f32).to(Device::cpu());
    const Tensor want = h.to(DType::f32);
    for (std::int64_t i = 0; i < 65536; ++i) {
      const float a = back.data<float>()[i], b = want.data<float>()[i];
      REQUIRE(((a == b && std::signbit(a) == std::signbit(b)) || (std::isnan(a) && std::isnan(b))));
    }
    // bf16 <-> f16 on the device, and a strided fill. NaN inputs stay NaN, but CUDA writes its
    // canonical NaN (0x7fff) where the host keeps sign and payload: the H200 run of 2026-11-28
    // differed in exactly the 2030 NaN patterns of f16 whose payload survives into bf16.
    const DType other = t == DType::bf16 ? DType::f16 : DType::bf16;
    const std::vector<std::uint16_t> want_other = bits_of(h.to(other)),
                                     got_other = bits_of(h.to(kGpu).to(other));
    REQUIRE(want_other.size() == got_other.size());
    const std::uint16_t inf_bits = other == DType::bf16 ? 0x7f80 : 0x7c00;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < want_other.size(); ++i) {
      const bool nan_pair =
          (want_other[i] & 0x7fff) > inf_bits && (got_other[i] & 0x7fff) > inf_bits;
      if (got_other[i] != want_other[i] && !nan_pair) ++differ;
    }
    CHECK(differ == 0);
    Tensor z = Tensor::zeros({8, 6}, t, kGpu);
    raw::slice(z, 1, 1, 6, 2).fill_(1.0 / 3.0);
    Tensor zh = Tensor::zeros({8, 6}, t);
    raw::slice(zh, 1, 1, 6, 2).fill_(1.0 / 3.0);
    CHECK(bits_of(z) == bits_of(zh));
  }
}

TEST_CASE("under autocast a 16-bit input is pooled in f32 on the GPU", "[cuda][half][autocast]") {
  require_cuda("test_cuda_half");
  // On the CPU the pools run in their input's type (tests/test_autocast_conv.cpp); the CUDA
  // pooling kernels decline bf16/f16, so engine/autograd/functions_pool.cpp widens first.
  Generator gen(19);
  const Tensor x = uniform({2, 3, 8, 8}, -1.0, 1.0, DType::f32, &gen).to(DType::bf16);
  const Tensor xg = x.to(kGpu);
  const Pool2dOptions two{.kernel = {2, 2}};
  const Tensor want = max_pool2d(x.to(DType::f32), two);
  const AutocastGuard autocast(Precision::bf16);
  const Tensor y = max_pool2d(xg, two);
  CHECK(y.dtype() == DType::f32);
  CHECK(y.device() == kGpu);
  CHECK(test::values_f64(y.to(Device::cpu())) == test::values_f64(want));
  CHECK(avg_pool2d(xg, two).dtype() == DType::f32);
  CHECK(global_avg_pool2d(xg).dtype() == DType::f32);
}
