#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/gpu_kit.sh packs this build and runs it from the kit alone (CTest: gpu_kit, registered
# when the CUDA backend and anvil_bench are built):
#   test_gpu_kit.sh SOURCE_DIR BUILD_DIR
# Packs into a temporary folder, runs `gpu_kit.sh run --tests-only` there and checks its summary:
# every library resolves, oneDNN and Google Benchmark come from the kit (not from this machine),
# the lazy-load test passes, and the GPU test binaries pass with a GPU or report themselves
# skipped (exit 77) without one, which must then make the run's status non-zero. This keeps the
# kit working for a GPU machine that has none of the Debian packages (a new shared library the
# build starts to need is packed or shows up here as unresolved on such a machine's list).
set -uo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/pack.log "$tmp"/run.log; do [ -f "$f" ] && sed 's/^/  /' "$f"; done; exit 1; }
export ANVIL_GPU_KIT_DIR="$tmp/kit" ANVIL_BUILD_DIR="$build"

bash "$src/scripts/gpu_kit.sh" pack > "$tmp/pack.log" 2>&1 || fail "gpu_kit.sh pack exited non-zero"
kit="$tmp/kit/anvil-gpu-kit.tar.xz"
[ -f "$kit" ] || fail "no $kit"
tar -tJf "$kit" > "$tmp/list.txt" || fail "cannot list $kit"  # a file: grep -q on a pipe would SIGPIPE tar
for lib in libdnnl.so.2 libbenchmark.so libgomp.so.1; do
  grep -q "syslib/$lib" "$tmp/list.txt" || fail "$lib is not in the kit"
done
if grep -Eq "syslib/(libc\.so|libstdc\+\+|libcudart|libcublas|libcudnn|libnccl)" "$tmp/list.txt"; then
  fail "the kit packs the C/C++ runtime or CUDA's libraries, which come from the GPU machine"
fi

bash "$src/scripts/gpu_kit.sh" run --tests-only --out "$tmp/out" > "$tmp/run.log" 2>&1
rc=$?
summary="$tmp/out/summary.txt"
[ -f "$summary" ] || fail "no summary.txt"
grep -q "^libraries: all resolve" "$summary" || fail "libraries did not all resolve"
grep -q "libdnnl.so.2 => $tmp/kit/root/syslib/libdnnl.so.2" "$tmp/out/ldd.txt" ||
  fail "oneDNN does not resolve from the kit: $(grep libdnnl "$tmp/out/ldd.txt" | head -1)"
grep -q "^test_cuda_lazy_load: exit 0 " "$summary" || fail "test_cuda_lazy_load did not pass from the kit"
# cuDNN 9 resolves (here from the toolkit's folder; on the GPU machine from PyTorch's wheel).
grep -q "^cuDNN: /.*libcudnn.so.9" "$summary" || fail "no cuDNN found: $(grep '^cuDNN' "$summary")"
if grep -q "^GPU tests run on" "$summary"; then
  for t in test_cuda_gemm test_cuda_runtime; do
    grep -q "^$t: exit 0 " "$summary" || fail "$t failed on this GPU machine"
  done
  [ "$rc" = 0 ] || fail "run exited $rc with a GPU"
else
  grep -q "^GPU tests SKIPPED: " "$summary" || fail "no skip reason in the summary"
  for t in test_cuda_gemm test_cuda_runtime; do
    grep -q "^$t: exit 77 " "$summary" || fail "$t did not report itself skipped (77) without a GPU"
  done
  [ "$rc" != 0 ] || fail "run exited 0 although the GPU tests were skipped"
fi
echo "PASS: the GPU kit packs $(du -m "$kit" | cut -f1) MiB and runs from the kit alone; $(grep -c '^test_' "$summary") test binaries ran"
