// SPDX-License-Identifier: Apache-2.0
// The CUDA backend on a real device: device queries, copies through Tensor::to/copy_, the
// caching allocator's reuse and counters, and out-of-memory recovery. Runs only with a GPU
// (gpu_main.cpp reports the binary skipped otherwise).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "engine/core/allocator.h"
#include "engine/core/cuda_backend.h"
#include "engine/core/tensor.h"

using namespace anvil;
using Catch::Matchers::Contains;

namespace {
std::vector<float> host_values(const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  const float* p = c.data<float>();
  return std::vector<float>(p, p + c.numel());
}
}  // namespace

TEST_CASE("the backend reports devices and versions", "[cuda]") {
  CudaBackend& cuda = require_cuda("test");
  REQUIRE(cuda.device_count() >= 1);
  CHECK_FALSE(cuda.device_name(0).empty());
  CHECK_THAT(cuda.version(), Contains("CUDA runtime") && Contains("cuda:0"));
  CHECK_THROWS_WITH(cuda.device_name(cuda.device_count()), Contains("no CUDA device"));
  CHECK_NOTHROW(cuda.synchronize(0));
}

TEST_CASE("host -> device -> host copies keep values", "[cuda][copy]") {
  Tensor a = Tensor::arange(1000).reshape({10, 100});
  Tensor g = a.to(Device::cuda());
  CHECK(g.device() == Device::cuda());
  CHECK(g.sizes() == a.sizes());
  CHECK(host_values(g) == host_values(a));

  // Non-contiguous host source, other dtypes, device -> device.
  Tensor at = a.t();
  CHECK(host_values(at.to(Device::cuda())) == host_values(at));
  Tensor d = Tensor::arange(7, DType::f64).to(Device::cuda());
  CHECK(d.to(Device::cpu()).data<double>()[6] == 6.0);
  Tensor g2 = Tensor::empty(g.sizes(), DType::f32, Device::cuda());
  g2.copy_(g);
  CHECK(host_values(g2) == host_values(a));
  CHECK(Tensor::full({3}, 2.5, DType::f32, Device::cuda()).select(0, 2).item() == 2.5);
}

TEST_CASE("the caching allocator reuses freed blocks and counts bytes", "[cuda][allocator]") {
  Allocator& alloc = allocator_for(Device::cuda());
  CHECK(alloc.device() == Device::cuda());
  alloc.empty_cache();
  alloc.reset_peak();
  const MemoryStats s0 = alloc.stats();
  CHECK(s0.reserved == s0.current);

  const std::int64_t n = 1 << 20;  // 4 MiB of f32
  void* first = nullptr;
  {
    Tensor t = Tensor::empty({n}, DType::f32, Device::cuda());
    first = t.data_ptr();
    const MemoryStats s1 = alloc.stats();
    CHECK(s1.current >= s0.current + 4 * n);
    CHECK(s1.peak >= s1.current);
  }
  const MemoryStats s2 = alloc.stats();
  CHECK(s2.current == s0.current);            // handed back ...
  CHECK(s2.reserved >= s0.reserved + 4 * n);  // ... but kept in the cache
  {
    Tensor t = Tensor::empty({n}, DType::f32, Device::cuda());
    CHECK(t.data_ptr() == first);  // the same block again
    const MemoryStats s3 = alloc.stats();
    CHECK(s3.cache_hits == s2.cache_hits + 1);
    CHECK(s3.reserved == s2.reserved);  // no new cudaMalloc
  }
  // Requests in the same bin share blocks; raw allocate/deallocate work too.
  void* p = alloc.allocate(1000);
  alloc.deallocate(p, 1000);
  void* q = alloc.allocate(1010);
  CHECK(q == p);
  alloc.deallocate(q, 1010);
  CHECK(alloc.allocate(0) == nullptr);

  alloc.empty_cache();
  const MemoryStats s4 = alloc.stats();
  CHECK(s4.reserved == s4.current);
  CHECK(memory_stats(Device::cuda()).current == s4.current);
}

TEST_CASE("out of memory throws anvil::Error and the engine stays usable", "[cuda][allocator]") {
  { Tensor warm = Tensor::zeros({1 << 20}, DType::f32, Device::cuda()); }  // leaves a cached block
  const std::int64_t absurd = std::int64_t{1} << 40;                       // 4 TiB of f32
  CHECK_THROWS_AS(Tensor::empty({absurd}, DType::f32, Device::cuda()), Error);
  CHECK_THROWS_WITH(Tensor::empty({absurd}, DType::f32, Device::cuda()),
                    Contains("out of memory") && Contains("4398046511104 bytes"));
  const MemoryStats s = memory_stats(Device::cuda());
  CHECK(s.reserved == s.current);  // the cache was released before giving up

  // Still usable afterwards.
  Tensor a = Tensor::arange(64);
  CHECK(host_values(a.to(Device::cuda())) == host_values(a));
}
