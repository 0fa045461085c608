// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fuzz harnesses' performance guard (scripts/fuzz.sh, "Performance guard"): the readers are
// linear in their input, so an input of n bytes may take at most 1 s + ANVIL_FUZZ_US_PER_BYTE
// (default 10) microseconds per byte. A slower one is a finding: the guard prints the time and
// the size and traps, and libFuzzer keeps the input. (A quadratic JSON parser took minutes on
// a 6 MB safetensors header; the linear one takes 6.4 s for it under ASan + UBSan.)
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace anvil_fuzz {

class TimeGuard {
 public:
  explicit TimeGuard(std::size_t size) : size_(size), start_(std::chrono::steady_clock::now()) {}
  ~TimeGuard() {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double allowed = 1.0 + static_cast<double>(size_) * us_per_byte() * 1e-6;
    if (seconds > allowed) {
      std::fprintf(stderr, "fuzz: performance guard: %zu bytes took %.2f s, more than %.2f s\n",
                   size_, seconds, allowed);
      __builtin_trap();
    }
  }
  TimeGuard(const TimeGuard&) = delete;
  TimeGuard& operator=(const TimeGuard&) = delete;

 private:
  static double us_per_byte() {
    const char* text = std::getenv("ANVIL_FUZZ_US_PER_BYTE");
    const double v = text != nullptr ? std::atof(text) : 0.0;
    return v > 0.0 ? v : 10.0;
  }
  std::size_t size_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace anvil_fuzz
