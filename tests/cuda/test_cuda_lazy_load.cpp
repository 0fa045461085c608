// SPDX-License-Identifier: Apache-2.0
// Note [Lazy CUDA loading] from the outside: CPU work never loads the CUDA backend or cudart,
// and without a usable GPU every CUDA request fails with an anvil::Error that says why, after
// which the engine keeps working on the CPU. Runs everywhere (no GPU needed).
#include <catch2/catch.hpp>

#include <link.h>

#include <string>

#include "engine/core/allocator.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/gemm_problem.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {
// True when a shared object whose path contains `part` is mapped into this process.
bool is_mapped(const std::string& part) {
  struct Query {
    const std::string* part;
    bool found;
  } q{&part, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* query = static_cast<Query*>(data);
        if (info->dlpi_name != nullptr &&
            std::string(info->dlpi_name).find(*query->part) != std::string::npos)
          query->found = true;
        return 0;
      },
      &q);
  return q.found;
}
}  // namespace

TEST_CASE("CPU work loads neither the CUDA backend nor cudart", "[cuda][lazy]") {
  Tensor a = Tensor::arange(12).reshape({3, 4});
  Tensor b = a.t().contiguous();
  b.copy_(a.t());
  CHECK(b.to(DType::f64).select(0, 1).select(0, 2).item() == 9.0);
  CHECK(memory_stats(Device::cpu()).current > 0);
  CHECK_FALSE(is_mapped("libanvil_cuda"));
  CHECK_FALSE(is_mapped("libcudart"));
}

TEST_CASE("CUDA requests without a usable GPU fail with the reason", "[cuda][lazy]") {
  if (cuda_available()) {
    CHECK(cuda_unavailable_reason().empty());
    CHECK(Tensor::ones({2}, DType::f32, Device::cuda()).device() == Device::cuda());
    return;
  }
  const std::string reason = cuda_unavailable_reason();
  CHECK_FALSE(reason.empty());
#if ANVIL_TEST_CUDA_BUILT
  // The backend was built: it must load on a GPU-less machine (it must not link the driver
  // stub) and then report that there is no device, with the runtime's explanation.
  CHECK_THAT(reason, Contains("no CUDA device") && Contains("CUDA runtime"));
  CHECK(is_mapped("libanvil_cuda"));
#endif
  CHECK_THROWS_AS(Tensor::empty({4}, DType::f32, Device::cuda()), Error);
  CHECK_THROWS_WITH(Tensor::zeros({4}, DType::f32, Device::cuda()),
                    Contains("CUDA is not available") && Contains(reason));
  CHECK_THROWS_WITH(memory_stats(Device::cuda()), Contains("CUDA is not available"));
  // The CPU still works after the failed requests.
  Tensor c = Tensor::full({3}, 1.5);
  CHECK(c.select(0, 2).item() == 1.5);
}

TEST_CASE("the CUDA GEMM variants join the gemm table once the backend was asked for",
          "[cuda][lazy][gemm]") {
  // The backend registers its variants in its entry point, before it counts devices, so they
  // are listed on a machine without a GPU too (and never run there: no problem is on cuda).
  (void)cuda_backend();
#if ANVIL_TEST_CUDA_BUILT
  for (const char* name : {"cuda.cublas", "cuda.cublas.tf32", "cuda.custom.gemm_tiled"}) {
    INFO(name);
    const auto* v = gemm_table().find(name);
    REQUIRE(v != nullptr);
    CHECK(v->device == DeviceType::cuda);
  }
  CHECK(gemm_table().find("cuda.cublas")->priority >
        gemm_table().find("cuda.cublas.tf32")->priority);
#else
  for (const auto& v : gemm_table().variants()) CHECK(v.device == DeviceType::cpu);
#endif
}
