// SPDX-License-Identifier: Apache-2.0
// Note [Lazy CUDA loading] from the outside: CPU work never loads the CUDA backend or cudart,
// and without a usable GPU every CUDA request fails with an anvil::Error that says why, after
// which the engine keeps working on the CPU. Runs everywhere (no GPU needed).
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/tensor.h"
#include "engine/dispatch/batch_norm_problem.h"
#include "engine/dispatch/gemm_problem.h"
#include "engine/dispatch/pool_problem.h"
#include "engine/dispatch/selection.h"
#include "kernels/register.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {
// The path of the first mapped shared object whose path contains `part` ("" when none).
std::string mapped_path(const std::string& part) {
  struct Query {
    const std::string* part;
    std::string path;
  } q{&part, ""};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* query = static_cast<Query*>(data);
        if (query->path.empty() && info->dlpi_name != nullptr &&
            std::string(info->dlpi_name).find(*query->part) != std::string::npos)
          query->path = info->dlpi_name;
        return 0;
      },
      &q);
  return q.path;
}

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
  std::vector<std::string> order;  // the registered names in the table's order
  for (const auto& v : gemm_table().variants()) order.push_back(v.name);
  auto at = [&](const char* n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
  CHECK(at("cuda.cublas") < at("cuda.cublas.tf32"));
  CHECK(at("cuda.cublas.tf32") < at("cuda.custom.gemm_tiled"));
#else
  for (const auto& v : gemm_table().variants()) CHECK(v.device == DeviceType::cpu);
#endif
}

TEST_CASE("the CUDA pooling and batch-norm variants join their tables and select as documented",
          "[cuda][lazy][pool][batch_norm]") {
  (void)cuda_backend();
  register_builtin_kernels();
#if ANVIL_TEST_CUDA_BUILT
  // Selection is pure (nothing runs), so the registered supports() and the priorities of
  // docs/cuda.md are checked here without a GPU.
  const Device gpu = Device::cuda(0);
  for (PoolKind kind : {PoolKind::max, PoolKind::avg, PoolKind::adaptive_avg})
    for (const char* name : {"cuda.custom", "cuda.cudnn"}) {
      INFO(pool_op_name(kind) << " " << name);
      const auto* v = pool_table(kind).find(name);
      REQUIRE(v != nullptr);
      CHECK(v->device == DeviceType::cuda);
    }
  const PoolProblem max = make_pool_problem(PoolKind::max, {2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0},
                                            false, true, DType::f32, gpu, "test");
  CHECK(max_pool2d_table().select(max).name == "cuda.custom");  // the default
  {
    ForceVariant force("max_pool2d", "cuda.cudnn");
    CHECK(max_pool2d_table().select(max).name == "cuda.cudnn");  // inference
    CHECK_THROWS_WITH(max_pool2d_table().select(max.with_pass(PoolPass::forward_training)),
                      Contains("cuda.cudnn") && Contains("first-maximum index"));
  }
  const PoolProblem ceil = make_pool_problem(PoolKind::avg, {1, 2, 7, 9}, {2, 2}, {2, 2}, {0, 0},
                                             true, true, DType::f64, gpu, "test");
  {
    ForceVariant force("avg_pool2d", "cuda.cudnn");
    CHECK_THROWS_WITH(avg_pool2d_table().select(ceil), Contains("no ceil mode"));
  }
  for (const char* name : {"cuda.custom", "cuda.cudnn"}) {
    const auto* v = batch_norm2d_table().find(name);
    REQUIRE(v != nullptr);
    CHECK(v->device == DeviceType::cuda);
  }
  const BatchNormProblem bn =
      make_batch_norm_problem({2, 3, 4, 4}, true, 0.1, 1e-5, DType::f32, gpu, "test");
  CHECK(batch_norm2d_table().select(bn).name == "cuda.cudnn");  // the default
  CHECK(batch_norm2d_table().select(bn.with_pass(BatchNormPass::backward)).name == "cuda.cudnn");
  // Eval-mode backward: cuDNN declines, cuda.custom takes it.
  const BatchNormProblem eval_bwd =
      bn.with_pass(BatchNormPass::forward_inference).with_pass(BatchNormPass::backward);
  CHECK(batch_norm2d_table().select(eval_bwd).name == "cuda.custom");
#else
  for (const auto& v : batch_norm2d_table().variants()) CHECK(v.device == DeviceType::cpu);
#endif
}

// Note [Lazy NCCL loading] without a GPU: the backend's NCCL table (dlopen of libnccl.so.2, then
// every dlsym) is what --dist nccl runs first on a GPU machine; a wrong symbol name or an
// unloadable library shows here. Where the toolkit has no NCCL the test says so and checks the
// refusal's text instead.
TEST_CASE("the backend's NCCL table resolves from libnccl.so.2", "[cuda][lazy][nccl]") {
#if !ANVIL_TEST_CUDA_BUILT
  WARN("the CUDA backend is not built: its NCCL table is not checked");
#else
  (void)cuda_available();  // loads libanvil_cuda.so, GPU or not
  const std::string path = mapped_path("libanvil_cuda");
  REQUIRE_FALSE(path.empty());
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(handle != nullptr);
  using Probe = int (*)(char*, int);
  auto probe = reinterpret_cast<Probe>(dlsym(handle, "anvil_nccl_library_version"));
  REQUIRE(probe != nullptr);
  char text[1024] = {0};
  const int rc = probe(text, sizeof text);
  dlclose(handle);
  if (rc != 0) {
    CHECK_THAT(std::string(text), Contains("built without NCCL") || Contains("cannot load"));
    WARN("NCCL is not usable here, the table is not checked: " << text);
    return;
  }
  CHECK_THAT(std::string(text), Catch::Matchers::StartsWith("NCCL 2."));
  CHECK(is_mapped("libnccl"));
#endif
}
