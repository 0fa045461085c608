// SPDX-License-Identifier: Apache-2.0
// The host profile's counters (Note [Host profile], engine/dispatch/host_profile.h): calls,
// inclusive and exclusive time per (op, variant), nesting, reset, the table. The wrapping of
// registered variants under ANVIL_VERBOSE=host_profile is checked end to end by the CTest
// bench_host_profile (tests/bench/test_host_profile.py).
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "engine/dispatch/host_profile.h"

using namespace anvil;

namespace {
void busy_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {}
}
const HostProfileRow* find(const std::vector<HostProfileRow>& rows, const char* op) {
  for (const auto& r : rows)
    if (r.op == op) return &r;
  return nullptr;
}
}  // namespace

TEST_CASE("host profile: nested scopes count calls, inclusive and exclusive time", "[dispatch]") {
  host_profile_reset();
  HostProfileSlot* outer = host_profile_slot("test_outer", "v");
  HostProfileSlot* inner = host_profile_slot("test_inner", "w");
  CHECK(host_profile_slot("test_outer", "v") == outer);  // one slot per (op, variant)
  for (int i = 0; i < 3; ++i) {
    const HostProfileScope a(outer);
    busy_for(std::chrono::microseconds(200));
    {
      const HostProfileScope b(inner);
      busy_for(std::chrono::microseconds(2000));
    }
  }
  const std::vector<HostProfileRow> rows = host_profile_rows();
  const HostProfileRow* o = find(rows, "test_outer");
  const HostProfileRow* in = find(rows, "test_inner");
  REQUIRE(o != nullptr);
  REQUIRE(in != nullptr);
  CHECK(o->calls == 3);
  CHECK(in->calls == 3);
  // The inner scope is a leaf: exclusive = inclusive. The outer one excludes the inner's time.
  CHECK(in->exclusive_s == in->inclusive_s);
  CHECK(in->inclusive_s >= 3 * 2000e-6);
  CHECK(o->inclusive_s >= in->inclusive_s + 3 * 200e-6);
  CHECK(o->exclusive_s == Approx(o->inclusive_s - in->inclusive_s).margin(1e-9));
  CHECK(o->exclusive_s < in->exclusive_s);
  // Most exclusive time first.
  CHECK(rows.front().exclusive_s >= rows.back().exclusive_s);
  const std::string table = host_profile_table(rows, 3.0);
  CHECK(table.find("test_inner") != std::string::npos);
  CHECK(table.find("total exclusive host time in variants") != std::string::npos);
  host_profile_reset();
  CHECK(find(host_profile_rows(), "test_outer") == nullptr);
}

TEST_CASE("host profile: scopes on two threads do not nest into each other", "[dispatch]") {
  host_profile_reset();
  HostProfileSlot* a = host_profile_slot("test_thread_a", "v");
  HostProfileSlot* b = host_profile_slot("test_thread_b", "v");
  std::thread other([b] {
    const HostProfileScope s(b);
    busy_for(std::chrono::microseconds(3000));
  });
  {
    const HostProfileScope s(a);
    busy_for(std::chrono::microseconds(3000));
  }
  other.join();
  const auto rows = host_profile_rows();
  const HostProfileRow* ra = find(rows, "test_thread_a");
  REQUIRE(ra != nullptr);
  // Had b nested into a, a's exclusive time would have lost b's 3 ms.
  CHECK(ra->exclusive_s == ra->inclusive_s);
  host_profile_reset();
}
