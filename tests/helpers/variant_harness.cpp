// SPDX-License-Identifier: Apache-2.0
// The comparison helpers and the non-template parts of VariantHarness
// (tests/helpers/variant_harness.h).
#include "helpers/variant_harness.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "helpers/gradcheck.h"

namespace anvil::test {

namespace {
// Any dtype, any device (copied to the host).
std::vector<double> host_values(const Tensor& t) { return values_f64(t); }
}  // namespace

MaxError max_error(const std::vector<double>& got, const std::vector<double>& want) {
  MaxError e;
  if (got.size() != want.size()) {
    e.size_mismatch = true;
    e.worst = std::numeric_limits<double>::infinity();
    return e;
  }
  e.worst = got.empty() ? 0.0 : -1.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double d = std::fabs(got[i] - want[i]);
    if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
    if (d > e.worst) {
      e.worst = d;
      e.at = i;
    }
  }
  if (!got.empty()) {
    e.got = got[e.at];
    e.want = want[e.at];
  }
  return e;
}

MaxError max_error(const Tensor& got, const Tensor& want) {
  return max_error(host_values(got), host_values(want));
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::fabs(x));
  return m;
}
double max_abs(const Tensor& t) { return max_abs(host_values(t)); }

std::string compare(const std::string& what, const std::vector<double>& got,
                    const std::vector<double>& want, double tol) {
  const MaxError e = max_error(got, want);
  if (e.size_mismatch) {
    std::ostringstream os;
    os << what << ": size mismatch (got " << got.size() << " elements, ref " << want.size()
       << "); ";
    return os.str();
  }
  if (e.worst <= tol) return {};
  std::ostringstream os;
  os << what << ": worst |got - ref| = " << e.worst << " > tol " << tol << " at flat index " << e.at
     << " (got " << e.got << ", ref " << e.want << "); ";
  return os.str();
}

std::string compare(const std::string& what, const Tensor& got, const Tensor& want, double tol) {
  return compare(what, host_values(got), host_values(want), tol);
}

double scaled_error(const Tensor& got, const Tensor& want, bool nan_matches_nan) {
  const auto g = host_values(got), w = host_values(want);
  if (g.size() != w.size()) return std::numeric_limits<double>::infinity();
  double scale = 1.0, worst = 0.0;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (nan_matches_nan && std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (g[i] == w[i]) continue;  // also equal infinities
    double e = std::fabs(g[i] - w[i]);
    if (std::isnan(e)) e = std::numeric_limits<double>::infinity();
    worst = std::max(worst, e);
  }
  return worst / scale;
}

std::string compare_scaled(const std::string& what, const Tensor& got, const Tensor& want,
                           double tol, bool nan_matches_nan) {
  const double e = scaled_error(got, want, nan_matches_nan);
  if (e <= tol) return {};
  std::ostringstream os;
  os << what << ": max |got - ref| / max(1, max |ref|) = " << e << " > tol " << tol << "; ";
  return os.str();
}

double dtype_eps(DType dtype) {
  return dtype == DType::f64 ? std::numeric_limits<double>::epsilon()
                             : std::numeric_limits<float>::epsilon();
}

void VariantHarness::run(const harness::OpDriver& driver, const OpProblem& problem,
                         const std::string& label,
                         const std::function<std::string(const std::string&)>& check) {
  const auto variants = driver.table().list();
  const std::string repr = std::visit([](const auto& q) { return q.repr(); }, problem);
  run_answers(variants, {{"", driver.candidates(problem)}}, repr, label,
              [&](std::size_t i) { return check(variants[i].name); });
}

void VariantHarness::run_answers(
    const std::vector<VariantTableBase::Info>& variants,
    const std::vector<std::pair<std::string, std::vector<Candidate>>>& answers,
    const std::string& repr, const std::string& label,
    const std::function<std::string(std::size_t)>& check) {
  ++problems_;
  std::vector<std::string> declined(variants.size());
  for (const auto& [pass, cands] : answers) {
    REQUIRE(cands.size() == variants.size());
    for (std::size_t i = 0; i < variants.size(); ++i)
      if (!cands[i].support.ok && declined[i].empty()) {
        const std::string& why = cands[i].support.reason;
        INFO(op_ << " variant " << variants[i].name << " declined " << pass);
        CHECK_FALSE(why.empty());  // a variant that declines says why
        declined[i] = (pass.empty() ? "" : pass + ": ") + (why.empty() ? "<no reason>" : why);
      }
  }
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    if (v.device != device_) continue;
    const std::string where = describe(v.name, repr, label);
    if (!declined[i].empty()) {
      INFO(where << " declined: " << declined[i]);
      CHECK(v.name != "ref");
      ++tally_.skipped[v.name][declined[i].substr(0, 160)];
      continue;
    }
    if (v.name == "ref" && !run_ref_) continue;
    ++tally_.ran[v.name];
    std::string bad;
    {
      ForceVariant force(op_, v.name);
      try {
        tally_.seconds[v.name] +=  // host clock: check() waits for its results
            time_trial(
                Device::cpu(), [&] { bad = check(i); }, "variant harness");
      } catch (const std::exception& e) {
        bad = std::string("threw: ") + e.what();
      }
    }
    INFO(where);
    INFO(bad);
    CHECK(bad.empty());
  }
}

int VariantHarness::ran(const std::string& variant) const {
  const auto it = tally_.ran.find(variant);
  return it == tally_.ran.end() ? 0 : it->second;
}

std::string VariantHarness::describe(const std::string& variant, const std::string& repr,
                                     const std::string& label) const {
  std::ostringstream os;
  os << op_ << " variant " << variant << " on " << repr;
  if (!label.empty()) os << " [" << label << "]";
  return os.str();
}

}  // namespace anvil::test
