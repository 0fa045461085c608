// SPDX-License-Identifier: Apache-2.0
// Tensor views, strides, factories and copies (engine/core).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <catch2/catch.hpp>

#include "engine/core/config.h"
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

TEST_CASE("copies of transposed matrices hold every element", "[tensor][views]") {
  // The tiled transpose path of the CPU copy (engine/core/transpose.h): odd sizes around its
  // 16-wide tiles, one above its threading grain, a source whose rows are padded (a transposed
  // column slice), f32 and f64; and layouts it must not take (3-D, a dtype change).
  const int saved = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (DType dt : {DType::f32, DType::f64}) {
      for (auto [r, c] : {std::pair{2, 3}, std::pair{17, 33}, std::pair{300, 1000}}) {
        Tensor base =
            Tensor::empty({static_cast<std::int64_t>(c), static_cast<std::int64_t>(r) + 5}, dt);
        std::vector<double> v(static_cast<std::size_t>(base.numel()));
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 9973) - 17.5;
        base.copy_(Tensor::from_vector(v, base.sizes()));
        const Tensor src =
            raw::transpose(raw::slice(base, 1, 2, 2 + r, 1), 0, 1);  // [r, c], strides (1, r + 5)
        const Tensor dst = src.contiguous();
        REQUIRE(dst.is_contiguous());
        const std::int64_t ld = r + 5;
        bool all = true;
        for (std::int64_t i = 0; i < r && all; ++i)
          for (std::int64_t j = 0; j < c && all; ++j) {
            const double want = v[static_cast<std::size_t>(j * ld + 2 + i)];
            const double got =
                dt == DType::f32 ? dst.data<float>()[i * c + j] : dst.data<double>()[i * c + j];
            all = got == want;
            if (!all)
              FAIL_CHECK("element (" << i << ", " << j << ") of " << r << "x" << c << " is " << got
                                     << ", not " << want);
          }
        CHECK(all);
      }
    }
  }
  set_num_threads(saved);
  Tensor cube = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}, {2, 2, 2});
  const Tensor p = raw::transpose(cube, 0, 2).contiguous();
  CHECK(p.data<float>()[1] == 4.0f);  // p[0][0][1] = cube[1][0][0]
  const Tensor m = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor d = Tensor::empty({3, 2}, DType::f64);
  d.copy_(raw::transpose(m, 0, 1));
  CHECK(d.data<double>()[1] == 4.0);  // d[0][1] = m[1][0]
  CHECK(d.data<double>()[2] == 2.0);  // d[1][0] = m[0][1]
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

// See Note [Counter-based random fills]: parallel fills, so check what a parallel bug would break:
// the values must not depend on the thread count, every fill must take a fresh key, and the
// distributions must still be right (moments within ~6 standard errors for n = 2^20).
TEST_CASE("random fills are the same for any thread count and have the right moments",
          "[tensor][random]") {
  const int threads_before = get_num_threads();
  const std::int64_t n = 1 << 20;
  auto draw = [&](int threads) {
    set_num_threads(threads);
    Generator g(11);
    return std::vector<Tensor>{normal({n}, 0, 1, DType::f32, &g),
                               uniform({n}, -1, 3, DType::f64, &g),
                               randint({n}, -3, 7, DType::i64, &g)};
  };
  const auto one = draw(1);
  const auto two = draw(2);
  set_num_threads(threads_before);
  for (std::size_t k = 0; k < one.size(); ++k)
    CHECK(std::memcmp(one[k].data_ptr(), two[k].data_ptr(), one[k].nbytes()) == 0);

  double sum = 0, sum2 = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = one[0].data<float>()[i];
    sum += v;
    sum2 += v * v;
  }
  CHECK(std::abs(sum / n) < 6.0 / std::sqrt(double(n)));               // mean 0
  CHECK(std::abs(sum2 / n - 1.0) < 6.0 * std::sqrt(2.0 / double(n)));  // variance 1

  double usum = 0, umin = 3, umax = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = one[1].data<double>()[i];
    umin = std::min(umin, v);
    umax = std::max(umax, v);
    usum += v;
  }
  CHECK(umin >= -1);
  CHECK(umax < 3);
  CHECK(std::abs(usum / n - 1.0) < 6.0 * (4.0 / std::sqrt(12.0)) / std::sqrt(double(n)));

  std::vector<std::int64_t> counts(10, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t v = one[2].data<std::int64_t>()[i];
    if (v < -3 || v >= 7) FAIL("randint(-3, 7) drew " << v);
    ++counts[v + 3];
  }
  for (std::int64_t c : counts) CHECK(std::abs(double(c) - n / 10.0) < 6.0 * std::sqrt(n * 0.09));

  // A second fill from the same generator is a different stream, not a repeat.
  Generator g(11);
  Tensor a = normal({64}, 0, 1, DType::f32, &g);
  Tensor b = normal({64}, 0, 1, DType::f32, &g);
  CHECK(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) != 0);
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

TEST_CASE("CPU allocator: huge-page blocks are aligned and usable", "[memory]") {
  // See Note [CPU huge pages]: blocks of >= 2 MiB start on a 2 MiB boundary (Linux, unless
  // ANVIL_CPU_HUGE_PAGES=0) and must hold their whole size, odd tails included.
  empty_cache();
  const std::int64_t n = (3 << 20) / 4 + 1001;  // 3 MiB + a partial page
  Tensor t = Tensor::empty({n});
  float* p = t.data<float>();
#if defined(__linux__)
  const char* env = std::getenv("ANVIL_CPU_HUGE_PAGES");
  if (env == nullptr || std::string(env) != "0")
    CHECK(reinterpret_cast<std::uintptr_t>(p) % (2u << 20) == 0);
#endif
  for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 977);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += p[i];
  double want = 0;
  for (std::int64_t i = 0; i < n; ++i) want += static_cast<double>(i % 977);
  CHECK(sum == want);
}

TEST_CASE("CPU allocator: the cache stays under the live high-water mark", "[memory]") {
  // See Note [CPU cache bound]: sizes that peak at different moments share the memory instead of
  // each keeping its own blocks. Sizes in MiB (never touched, so only address space is used),
  // chosen around the 128 MiB slack.
  REQUIRE(kCpuCacheSlackBytes == (128u << 20));
  empty_cache();
  const auto base = memory_stats();
  const std::int64_t mib = (1 << 20) / 4;  // floats per MiB
  const std::int64_t M = 1 << 20;
  { Tensor a = Tensor::empty({400 * mib}); }  // 400 MiB live at most, then cached
  CHECK(memory_stats().reserved - base.current >= 400 * M);
  { Tensor b = Tensor::empty({300 * mib}); }  // 400 + 300 > 400 + 128: the cached block serves
  CHECK(memory_stats().reserved - base.current <= 400 * M + 4096);
  { Tensor c = Tensor::empty({150 * mib}); }  // over the bound, 400 > 2 x 150: the 400 goes back
  const auto after = memory_stats();
  CHECK(after.reserved - base.current <= 150 * M + 4096);
  CHECK(after.current == base.current);
  // A larger live set raises the mark: two blocks live at once are both kept.
  {
    Tensor d = Tensor::empty({300 * mib});
    Tensor e = Tensor::empty({300 * mib});
    CHECK(memory_stats().current - base.current >= 600 * M);
  }
  CHECK(memory_stats().reserved - base.current >= 600 * M);
  empty_cache();
  CHECK(memory_stats().reserved == memory_stats().current);
}
