#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds anvil with AddressSanitizer + UndefinedBehaviorSanitizer (ANVIL_SANITIZE=ON) in its own
# build directory and runs every test under them. CUDA is off (the CUDA runtime needs
# ASAN_OPTIONS=protect_shadow_gap=0 to start under ASan, and without a GPU its code paths do not
# run anyway), and so are the GPU test binaries (without a device they only report themselves
# skipped) and the benchmarks (not tests). The tests compile at -O1, the library at -O2
# (tests/CMakeLists.txt; docs/testing.md, "CI time").
#   ANVIL_ASAN_BUILD_DIR  build directory (default: build-asan)
#   ANVIL_JOBS=N          parallel jobs (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ANVIL_ASAN_BUILD_DIR:-build-asan}
jobs=${ANVIL_JOBS:-$(nproc)}

# Leak checking stays on. Measured (2026-11, Debian 12, gcc 12): neither libgomp's thread pool
# nor oneDNN 2.6.3 (dnnl_sgemm, matmul primitive, CPU engine, even a GPU engine count through
# the OpenCL loader) produces a LeakSanitizer report: what they keep at exit is still reachable
# from globals. Should a future dependency leak on purpose, suppress it by name in a
# LSAN_OPTIONS=suppressions file rather than turning detect_leaks off for everything.
# The one reason to turn it off is an environment where LeakSanitizer cannot run at all (it
# stops the process's threads with ptrace, which some container seccomp profiles forbid); a
# tiny probe finds that out.
leaks=1
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
echo 'int main() { return 0; }' > "$probe_dir/probe.cpp"
if c++ -fsanitize=address "$probe_dir/probe.cpp" -o "$probe_dir/probe" 2>/dev/null &&
   ! ASAN_OPTIONS=detect_leaks=1 "$probe_dir/probe" 2>"$probe_dir/err"; then
  echo "sanitize: LeakSanitizer cannot run here ($(head -c 200 "$probe_dir/err")); detect_leaks=0"
  leaks=0
fi

# Exported before the build too: catch_discover_tests runs every test binary at build time.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=$leaks:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "sanitize: ASAN_OPTIONS=$ASAN_OPTIONS UBSAN_OPTIONS=$UBSAN_OPTIONS"

# -O2 keeps the sanitized tests fast; -g1 (line tables) is all the reports need for file:line
# and compiles about 20 % faster than -g.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DANVIL_SANITIZE=ON -DANVIL_WITH_CUDA=OFF -DANVIL_BUILD_BENCH=OFF -DANVIL_BUILD_GPU_TESTS=OFF
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
