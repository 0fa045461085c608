// Tensor views, strides, factories and copies (engine/core).
#include <catch2/catch.hpp>

#include "engine/core/random.h"
#include "engine/core/tensor.h"
#include "engine/core/views.h"

using namespace anvil;

TEST_CASE("factories give contiguous tensors with the right values", "[tensor]") {
  Tensor z = Tensor::zeros({2, 3});
  CHECK(z.sizes() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.is_contiguous());
  CHECK(z.dtype() == DType::f32);
  Tensor a = Tensor::arange(6, DType::i64);
  CHECK(a.data<std::int64_t>()[5] == 5);
  Tensor f = Tensor::full({4}, 2.5, DType::f64);
  CHECK(f.data<double>()[3] == 2.5);
}

TEST_CASE("transpose and slice share storage", "[tensor][views]") {
  Tensor a = Tensor::arange(12).reshape({3, 4});
  Tensor t = a.t();
  CHECK(t.sizes() == Shape{4, 3});
  CHECK(t.strides() == Shape{1, 4});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.shares_storage_with(a));
  Tensor s = a.slice(1, 1, 4, 2);  // columns 1 and 3
  CHECK(s.sizes() == Shape{3, 2});
  CHECK(s.select(0, 2).select(0, 1).item() == 11.0);
  a.data<float>()[11] = 42.0f;
  CHECK(s.select(0, 2).select(0, 1).item() == 42.0);
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.shares_storage_with(a));
  CHECK(c.select(0, 3).select(0, 2).item() == 42.0);
}

TEST_CASE("view follows strides, reshape copies only when it must", "[tensor][views]") {
  Tensor a = Tensor::arange(24).reshape({2, 3, 4});
  Tensor p = a.permute({0, 2, 1});  // [2,4,3]
  CHECK_THROWS_WITH(p.view({2, 12}), Catch::Contains("cannot view"));
  Tensor r = p.reshape({2, 12});
  CHECK_FALSE(r.shares_storage_with(a));
  CHECK(r.select(0, 0).select(0, 1).item() == 4.0);  // p[0,0,1] = a[0,1,0]
  Tensor v = a.view({6, -1});
  CHECK(v.sizes() == Shape{6, 4});
  CHECK(v.shares_storage_with(a));
  // A slice along the outer dim stays viewable.
  Tensor s = a.slice(1, 0, 2);  // [2,2,4], strides [12,4,1]
  Tensor sv = raw::try_view(s, {2, 8});
  REQUIRE(sv.defined());
  CHECK(sv.strides() == Shape{12, 1});
  CHECK_THROWS_WITH(a.view({5, -1}), Catch::Contains("view"));
}

TEST_CASE("expand broadcasts with zero strides", "[tensor][views]") {
  Tensor b = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor e = b.expand({2, 3});
  CHECK(e.strides() == Shape{0, 1});
  CHECK(e.select(0, 1).select(0, 2).item() == 3.0);
  CHECK_THROWS_WITH(b.expand({2, 4}), Catch::Contains("expand"));
}

TEST_CASE("copy_ converts dtypes and broadcasts", "[tensor]") {
  Tensor d = Tensor::zeros({2, 3}, DType::f64);
  d.copy_(Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}));
  CHECK(d.select(0, 1).select(0, 2).item() == 3.0);
  Tensor i = d.to(DType::i32);
  CHECK(i.dtype() == DType::i32);
  CHECK(i.data<std::int32_t>()[5] == 3);
}

TEST_CASE("seeded random factories repeat", "[tensor][random]") {
  Generator g1(7), g2(7);
  Tensor a = normal({100}, 0, 1, DType::f32, &g1);
  Tensor b = normal({100}, 0, 1, DType::f32, &g2);
  for (int k = 0; k < 100; ++k) CHECK(a.data<float>()[k] == b.data<float>()[k]);
  Tensor u = uniform({1000}, -2, 3, DType::f64, &g1);
  for (int k = 0; k < 1000; ++k) {
    CHECK(u.data<double>()[k] >= -2);
    CHECK(u.data<double>()[k] < 3);
  }
}

TEST_CASE("bad tensor input throws with the function name", "[tensor][errors]") {
  Tensor a = Tensor::zeros({2, 3});
  CHECK_THROWS_WITH(a.data<double>(), Catch::Contains("Tensor::data") && Catch::Contains("f32"));
  CHECK_THROWS_WITH(a.transpose(0, 5), Catch::Contains("dimension 5 out of range"));
  CHECK_THROWS_WITH(a.item(), Catch::Contains("item"));
  CHECK_THROWS_WITH(Tensor::empty({-1}), Catch::Contains("negative"));
}

TEST_CASE("CPU allocator caches large blocks and counts bytes", "[memory]") {
  empty_cache();
  const auto before = memory_stats();
  {
    Tensor big = Tensor::empty({1 << 20});  // 4 MiB
    CHECK(memory_stats().current >= before.current + (4 << 20));
  }
  const auto mid = memory_stats();
  CHECK(mid.current == before.current);
  CHECK(mid.reserved >= mid.current + (4 << 20));  // cached, not returned
  Tensor again = Tensor::empty({1 << 20});
  CHECK(memory_stats().cache_hits == mid.cache_hits + 1);
  CHECK(reinterpret_cast<std::uintptr_t>(again.data_ptr()) % 64 == 0);
}
