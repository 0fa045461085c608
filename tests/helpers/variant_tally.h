// SPDX-License-Identifier: Apache-2.0
#pragma once
// VariantTally: what a variant harness ran, per variant of one table, so that no variant can
// pass by declining every problem. A harness counts each problem a variant ran (or skipped, with
// the supports() reason); check() prints one line per variant and fails the test for every
// registered variant of the harness's device (CPU unless told) other than `ref` that ran fewer
// problems than the harness's stated minimum. The one exemption: a variant that declined every
// problem it was offered for a reason naming this machine ("... this CPU ...", e.g. no AVX-512),
// which it reports and the log shows; and a variant for other dtypes that declined every problem
// with "<variant> handles <dtype> only, not <dtype>" or "needs f32 or f64, got <dtype>" (the
// bf16/f16 GEMMs in an f32 harness: their own file, tests/test_gemm_half_variants.cpp, checks
// them; the f32 convolutions in the conv2d driver's "half" group).
#include <map>
#include <string>

#include "engine/dispatch/variant_table.h"

namespace anvil::test {

class VariantTally {
 public:
  // `minimum`: problems every non-ref variant of `table` on `device` must run.
  VariantTally(const VariantTableBase& table, int minimum, DeviceType device = DeviceType::cpu)
      : table_(table), minimum_(minimum), device_(device) {}
  VariantTally(const VariantTally&) = delete;
  VariantTally& operator=(const VariantTally&) = delete;
  // check() at the end of the harness: prints the tallies (Catch WARN) and fails (Catch CHECK)
  // for each variant under the minimum. Returns the number of variants under it.
  int check() const;
  // Changes the minimum (a harness that states it only once it knows its problems).
  void set_minimum(int minimum) { minimum_ = minimum; }

  std::map<std::string, int> ran;                             // variant -> problems run
  std::map<std::string, double> seconds;                      // variant -> time (optional)
  std::map<std::string, std::map<std::string, int>> skipped;  // variant -> reason -> count

 private:
  const VariantTableBase& table_;
  int minimum_;
  DeviceType device_;
};

}  // namespace anvil::test
