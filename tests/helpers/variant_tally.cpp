// SPDX-License-Identifier: Apache-2.0
// VariantTally::check() (tests/helpers/variant_tally.h).
#include "helpers/variant_tally.h"

#include <catch2/catch.hpp>

#include <sstream>

namespace anvil::test {

int VariantTally::check() const {
  int under = 0;
  for (const auto& info : table_.list()) {
    if (info.device != device_) continue;  // the other device's harness counts those
    const auto r = ran.find(info.name);
    const int n = r == ran.end() ? 0 : r->second;
    std::ostringstream os;
    os << table_.op() << " variant " << info.name << ": ran " << n << " problems";
    if (auto s = seconds.find(info.name); s != seconds.end()) os << " in " << s->second << " s";
    bool machine_only = false, dtype_only = false;
    if (auto s = skipped.find(info.name); s != skipped.end()) {
      machine_only = dtype_only = !s->second.empty();
      for (const auto& [reason, count] : s->second) {
        os << "; skipped " << count << " (" << reason << ")";
        machine_only = machine_only && device_ == DeviceType::cpu &&
                       reason.find("this CPU") != std::string::npos;
        // "<v> handles bf16 only, not f32"; floating_variant's "needs f32 or f64, got bf16".
        dtype_only = dtype_only && (reason.find(" only, not ") != std::string::npos ||
                                    reason.find("needs f32 or f64, got ") != std::string::npos);
      }
    }
    WARN(os.str());
    if (info.name == "ref" || n >= minimum_) continue;
    if (n == 0 && machine_only) {
      WARN(table_.op() << " variant " << info.name
                       << " cannot run on this machine (reasons above): not counted");
      continue;
    }
    if (n == 0 && dtype_only) {
      WARN(table_.op() << " variant " << info.name
                       << " takes none of the dtypes offered (reasons above): not counted here");
      continue;
    }
    ++under;
    INFO(os.str());
    INFO(table_.op() << " variant " << info.name << " ran " << n << " problems, fewer than the "
                     << minimum_ << " this harness requires of every registered variant");
    CHECK(n >= minimum_);
  }
  return under;
}

}  // namespace anvil::test
