// SPDX-License-Identifier: Apache-2.0
// main() of the GPU test binaries: runs the Catch2 tests when a CUDA device is usable, and
// otherwise prints "SKIPPED: <reason>" and exits with 77, which CTest maps to "Skipped"
// (SKIP_RETURN_CODE, tests/cuda/CMakeLists.txt). Catch2 v2 has no SKIP macro, so skipping is
// decided per process, before any test runs.
//
// Listing requests run normally without touching CUDA: catch_discover_tests runs the binary
// with --list-test-names-only at build time, on machines with no GPU.
// CTest shows a skipped test only as "***Skipped", so the reason also goes into a note that
// CTest prints when it loads the tests (--anvil-skip-reason, see CMakeLists.txt).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <iostream>

#include "engine/core/cuda_backend.h"

namespace {
bool is_listing(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--list", 6) == 0 || std::strcmp(a, "-l") == 0 ||
        std::strcmp(a, "-t") == 0 || std::strcmp(a, "-h") == 0 || std::strcmp(a, "-?") == 0 ||
        std::strcmp(a, "--help") == 0)
      return true;
  }
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  // For the note CTest prints before running (gpu_skip_note.cmake.in): one line, exit 0.
  if (argc == 2 && std::strcmp(argv[1], "--anvil-skip-reason") == 0) {
    if (anvil::cuda_available())
      std::cout << "GPU tests run on: " << anvil::cuda_backend()->version() << std::endl;
    else
      std::cout << "GPU tests SKIPPED: " << anvil::cuda_unavailable_reason() << std::endl;
    return 0;
  }
  if (!is_listing(argc, argv) && !anvil::cuda_available()) {
    std::cout << "SKIPPED: " << anvil::cuda_unavailable_reason() << std::endl;
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
