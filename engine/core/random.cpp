// SPDX-License-Identifier: Apache-2.0
// Random tensor factories (engine/core/random.h).
#include "engine/core/random.h"

#include <cmath>
#include <locale>
#include <sstream>

#include "engine/core/views.h"

namespace anvil {

Generator& default_generator() {
  static Generator gen;
  return gen;
}
void manual_seed(std::uint64_t seed) { default_generator().seed(seed); }

// The classic locale: a global locale with digit grouping must not change the text.
std::string Generator::state() const {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os << engine_;
  return os.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream is(state);
  is.imbue(std::locale::classic());
  std::mt19937_64 engine;
  is >> engine;
  const bool ok = !is.fail() && (is >> std::ws).eof();
  ANVIL_CHECK(ok, "Generator::set_state", "not an mt19937_64 state (", state.size(),
              " characters, starting \"", state.substr(0, 40), "\")");
  engine_ = engine;
}

namespace {
// Note [Counter-based random fills]
// A fill takes one 64-bit key from the generator (one draw per fill, whatever its size) and
// gives element i a value computed from (key, i) alone: the splitmix64 finaliser of a Weyl
// sequence, i.e. splitmix64's stream started at the key. So a fill runs in parallel and its
// values do not depend on the thread count, and a seeded run stays repeatable. Why: drawing
// every element from mt19937_64 through the standard distributions, serially, took about 1.6 s
// per build of FCN-5's 118 million parameters (perf: 32 % of a 14.6 s benchmark process that
// built the model three times), in every benchmark process and test that builds the model. Now
// a build takes 0.2-1.4 s, most of it the first touch of the memory (1 and 2 threads).
constexpr std::uint64_t kWeyl = 0x9E3779B97F4A7C15ull;
inline std::uint64_t counter_bits(std::uint64_t key, std::uint64_t i) {
  std::uint64_t z = key + (i + 1) * kWeyl;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
constexpr double kTwoPow53 = 9007199254740992.0;
inline double unit_closed_open(std::uint64_t b) {
  return static_cast<double>(b >> 11) / kTwoPow53;
}  // [0, 1)
inline double unit_open_closed(std::uint64_t b) {
  return static_cast<double>((b >> 11) + 1) / kTwoPow53;
}  // (0, 1]

// Fills a contiguous CPU tensor with value(key, i), then places it on t.
template <typename Value>
void fill_random(Tensor& t, const char* where, bool integers, Generator& gen, Value&& value) {
  ANVIL_CHECK(is_any_floating(t.dtype()) || integers, where, "needs a float tensor, got ",
              dtype_name(t.dtype()));
  if (shapes_only()) return;  // Note [Shapes-only construction]
  Tensor host =
      (t.device().is_cpu() && t.is_contiguous()) ? t : Tensor::empty(t.sizes(), t.dtype());
  const std::uint64_t key = gen.next();
  visit_all_dtypes(host.dtype(), [&](auto zero) {  // draws in double, stored rounded (RNE)
    using T = decltype(zero);
    T* p = static_cast<T*>(host.data_ptr());
    const std::int64_t n = host.numel();
#pragma omp parallel for schedule(static) if (n >= (1 << 16))
    for (std::int64_t i = 0; i < n; ++i)
      p[i] = static_cast<T>(value(key, static_cast<std::uint64_t>(i)));
  });
  if (!host.is_same(t)) t.copy_(host);
}
Generator& pick(Generator* g) { return g ? *g : default_generator(); }
}  // namespace

void uniform_(Tensor& t, double low, double high, Generator* gen) {
  ANVIL_CHECK(low <= high, "uniform_", "low ", low, " > high ", high);
  const double width = high - low;
  fill_random(t, "uniform_", false, pick(gen), [=](std::uint64_t key, std::uint64_t i) {
    return low + width * unit_closed_open(counter_bits(key, i));
  });
}

// Box-Muller from the counters 2i and 2i + 1 (the sine half is not used).
void normal_(Tensor& t, double mean, double std, Generator* gen) {
  ANVIL_CHECK(std >= 0, "normal_", "std must be >= 0, got ", std);
  constexpr double kTwoPi = 6.283185307179586;
  fill_random(t, "normal_", false, pick(gen), [=](std::uint64_t key, std::uint64_t i) {
    const double r = std::sqrt(-2.0 * std::log(unit_open_closed(counter_bits(key, 2 * i))));
    return mean + std * r * std::cos(kTwoPi * unit_closed_open(counter_bits(key, 2 * i + 1)));
  });
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Generator* gen,
               Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  uniform_(t, low, high, gen);
  return t;
}

Tensor normal(const Shape& shape, double mean, double std, DType dtype, Generator* gen,
              Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  normal_(t, mean, std, gen);
  return t;
}

Tensor randint(const Shape& shape, std::int64_t low, std::int64_t high, DType dtype, Generator* gen,
               Device device) {
  ANVIL_CHECK(low < high, "randint", "empty range [", low, ", ", high, ")");
  ANVIL_CHECK(dtype == DType::i64 || dtype == DType::i32, "randint", "needs an integer dtype, got ",
              dtype_name(dtype));
  // The top 64 bits of bits * range: uniform up to a bias of range / 2^64 (no rejection loop).
  const auto range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  Tensor t = Tensor::empty(shape, dtype, device);
  fill_random(t, "randint", true, pick(gen), [=](std::uint64_t key, std::uint64_t i) {
    const auto wide = static_cast<unsigned __int128>(counter_bits(key, i)) * range;
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(low) +
                                     static_cast<std::uint64_t>(wide >> 64));
  });
  return t;
}

}  // namespace anvil
