#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the threaded tests with ThreadSanitizer in their own build directory and runs them:
# dispatch under concurrency (tests/test_dispatch_stress.cpp: selection while variants are
# registered, forcing and autotune across threads, ops run from several threads) and the data
# loader's background thread (tests/test_data_loader.cpp). CUDA, benchmarks and the other tests
# are not built, so the stage costs one sanitized build of libanvil plus two test binaries.
#   ANVIL_TSAN_BUILD_DIR  build directory (default: build-tsan)
#   ANVIL_JOBS=N          parallel jobs (default: nproc)
#   ANVIL_TSAN_TIMEOUT=S  per-test time limit in seconds (default: 300)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ANVIL_TSAN_BUILD_DIR:-build-tsan}
jobs=${ANVIL_JOBS:-$(nproc)}
timeout_s=${ANVIL_TSAN_TIMEOUT:-300}
targets=(test_dispatch_stress test_data_loader)

# Note [TSan and OpenMP]
# gcc's libgomp (and oneDNN, which runs on it) is not built with ThreadSanitizer: TSan cannot see
# the happens-before edges of its barriers and task queues, so every parallel region with two or
# more threads reports races that are not there (checked with gcc 12: two `omp parallel for`
# loops over one vector, one a sum reduction, report a race at OMP_NUM_THREADS=2, none at 1).
# The threaded tests therefore run with one OpenMP thread: the kernels still run through their
# OpenMP code on the calling thread, and what TSan checks is everything between the threads
# anvil itself starts or is called from (dispatch tables, forcing, autotune cache, the loader's
# producer thread, kernel-level caches such as the oneDNN primitive cache), which is where the
# races of shared engine state would be. The OpenMP parallelism inside kernels is covered by the
# ordinary tests (results against `ref` at 2 threads) and by ASan/UBSan (scripts/sanitize.sh).
export OMP_NUM_THREADS=1
export ANVIL_NUM_THREADS=1
# halt_on_error: the first report fails the test (exit code 66), with both stacks.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:exitcode=66:second_deadlock_stack=1}
echo "tsan: TSAN_OPTIONS=$TSAN_OPTIONS OMP_NUM_THREADS=$OMP_NUM_THREADS"

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# -O1 -g1: TSan slows code 5-15x whatever the level; -O1 compiles fastest of the levels that keep
# the tests quick, and line tables are all the reports need.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DANVIL_WITH_CUDA=OFF -DANVIL_BUILD_BENCH=OFF
cmake --build "$build" -j "$jobs" --target "${targets[@]}"
filter="^($(IFS='|'; echo "${targets[*]}")):"
ctest --test-dir "$build" --output-on-failure -j "$jobs" -R "$filter" --timeout "$timeout_s" \
  --no-tests=error
