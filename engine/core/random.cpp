// Random tensor factories (engine/core/random.h).
#include "engine/core/random.h"

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
// Fills a contiguous CPU tensor from draw() (a double), then places it on t.
template <typename Draw>
void fill_random(Tensor& t, const char* where, bool integers, Draw&& draw) {
  ANVIL_CHECK(is_floating(t.dtype()) || integers, where, "needs a float tensor, got ",
              dtype_name(t.dtype()));
  if (shapes_only()) return;  // Note [Shapes-only construction]
  Tensor host = (t.device().is_cpu() && t.is_contiguous()) ? t : Tensor::empty(t.sizes(), t.dtype());
  visit_dtype(host.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* p = static_cast<T*>(host.data_ptr());
    for (std::int64_t i = 0, n = host.numel(); i < n; ++i) p[i] = static_cast<T>(draw());
  });
  if (!host.is_same(t)) t.copy_(host);
}
Generator& pick(Generator* g) { return g ? *g : default_generator(); }
}  // namespace

void uniform_(Tensor& t, double low, double high, Generator* gen) {
  ANVIL_CHECK(low <= high, "uniform_", "low ", low, " > high ", high);
  std::uniform_real_distribution<double> dist(low, high);
  auto& eng = pick(gen).engine();
  fill_random(t, "uniform_", false, [&] { return dist(eng); });
}

void normal_(Tensor& t, double mean, double std, Generator* gen) {
  ANVIL_CHECK(std >= 0, "normal_", "std must be >= 0, got ", std);
  std::normal_distribution<double> dist(mean, std);
  auto& eng = pick(gen).engine();
  fill_random(t, "normal_", false, [&] { return dist(eng); });
}

Tensor uniform(const Shape& shape, double low, double high, DType dtype, Generator* gen, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  uniform_(t, low, high, gen);
  return t;
}

Tensor normal(const Shape& shape, double mean, double std, DType dtype, Generator* gen, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  normal_(t, mean, std, gen);
  return t;
}

Tensor randint(const Shape& shape, std::int64_t low, std::int64_t high, DType dtype,
               Generator* gen, Device device) {
  ANVIL_CHECK(low < high, "randint", "empty range [", low, ", ", high, ")");
  ANVIL_CHECK(dtype == DType::i64 || dtype == DType::i32, "randint", "needs an integer dtype, got ",
              dtype_name(dtype));
  std::uniform_int_distribution<std::int64_t> dist(low, high - 1);
  auto& eng = pick(gen).engine();
  Tensor t = Tensor::empty(shape, dtype, device);
  fill_random(t, "randint", true, [&] { return static_cast<double>(dist(eng)); });
  return t;
}

}  // namespace anvil
