#!/usr/bin/env bash
# Builds anvil with AddressSanitizer + UndefinedBehaviorSanitizer (ANVIL_SANITIZE=ON) in its own
# build directory and runs every test under them. CUDA is off (the sanitizers and the CUDA
# runtime do not mix, and no GPU is here anyway); benchmarks are off (not tests).
#   ANVIL_ASAN_BUILD_DIR  build directory (default: build-asan)
#   ANVIL_JOBS=N          parallel jobs (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ANVIL_ASAN_BUILD_DIR:-build-asan}
jobs=${ANVIL_JOBS:-$(nproc)}

# Exported before the build too: catch_discover_tests runs every test binary at build time.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DANVIL_SANITIZE=ON -DANVIL_WITH_CUDA=OFF -DANVIL_BUILD_BENCH=OFF
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
