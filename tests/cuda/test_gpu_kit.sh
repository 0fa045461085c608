#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/gpu_kit.sh packs this build and runs it from the kit alone (CTest: gpu_kit, registered
# when the CUDA backend and anvil_bench are built):
#   test_gpu_kit.sh SOURCE_DIR BUILD_DIR [--with-mpi]
# Packs into a temporary folder, runs `gpu_kit.sh run --tests-only` there and checks its summary:
# every library resolves, oneDNN and Google Benchmark come from the kit (not from this machine),
# the lazy-load test passes, and the GPU test binaries pass with a GPU or report themselves
# skipped (exit 77) without one, which must then make the run's status non-zero; the run's
# provenance.json (and with --with-mpi dist/provenance.json) has every field and the kit's revision.
# This keeps the kit working for a GPU machine that has none of the Debian packages (a new shared library the
# build starts to need is packed or shows up here as unresolved on such a machine's list).
# --with-mpi (registered when the MPI backend is built): packs the kit's Open MPI too and runs
# `gpu_kit.sh run --dist-only` (2 ranks, mlp_mnist, small) with this machine's Open MPI hidden in a
# private mount namespace (gpu_kit_mpi.sh without-system-mpi; needs root and unshare, and FAILS
# when they are not available): libmpi comes from the kit, the MPI check and the 2-rank scaling
# run pass, and the NCCL part passes with a GPU or reports itself skipped (exit 77) without one.
set -uo pipefail
src=$1 build=$2 with_mpi=()
[ "${3:-}" = --with-mpi ] && with_mpi=(--with-mpi)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/pack.log "$tmp"/run.log; do [ -f "$f" ] && sed 's/^/  /' "$f"; done; exit 1; }
export ANVIL_GPU_KIT_DIR="$tmp/kit" ANVIL_BUILD_DIR="$build"
# prov_problems FILE: the provenance problems of FILE's "provenance" object (tests/provenance_check.py),
# nothing when it has every field (Note [Provenance]); exit 1 when it has problems.
prov_problems() {
  python3 - "$1" "$src/tests" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
from provenance_check import provenance_problems
problems = provenance_problems(json.load(open(sys.argv[1])).get("provenance", {}))
print("; ".join(problems))
sys.exit(1 if problems else 0)
PY
}

ANVIL_GPU_KIT_XZ_LEVEL=0 bash "$src/scripts/gpu_kit.sh" pack --allow-dirty "${with_mpi[@]}" > "$tmp/pack.log" 2>&1 || fail "gpu_kit.sh pack exited non-zero"
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
[ -f "$tmp/out/provenance.json" ] || fail "no provenance.json"
why=$(prov_problems "$tmp/out/provenance.json") || fail "provenance.json: $why"
kit_rev=$(sed -n 's/^revision: //p' "$summary" | head -1)
grep -q "\"git_revision\": \"$kit_rev\"" "$tmp/out/provenance.json" ||
  fail "provenance.json does not name the kit's revision $kit_rev"
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
if [ ${#with_mpi[@]} -gt 0 ]; then
  grep -Eq "^\./mpi/lib/(libc\.so|libstdc\+\+|libcudart|libnccl)" "$tmp/list.txt" && fail "mpi/lib packs the C/C++ runtime or CUDA's"
  grep -q "^\./mpi/bin/orterun$" "$tmp/list.txt" || fail "no mpi/bin/orterun in the kit"
  ANVIL_GPU_DIST_RANKS=1,2 ANVIL_GPU_DIST_MODELS=mlp_mnist ANVIL_GPU_DIST_BATCHES=8 ANVIL_GPU_DIST_PLAIN_RANKS=none \
  ANVIL_GPU_DIST_MAX_BYTES=4096 ANVIL_GPU_DIST_BUDGET=150 bash "$src/scripts/gpu_kit_mpi.sh" without-system-mpi \
    bash "$src/scripts/gpu_kit.sh" run --dist-only --out "$tmp/dist" > "$tmp/run.log" 2>&1
  rc=$?
  grep -q "^without-system-mpi: hidden: " "$tmp/run.log" ||
    fail "could not hide this machine's Open MPI (a private mount namespace needs root and unshare)"
  s="$tmp/dist/summary.txt"
  [ -f "$s" ] || fail "no summary.txt from run --dist-only"
  grep -q "^dist: libraries: all resolve; libmpi.so.40 => $tmp/kit/root/mpi/lib/libmpi.so.40$" "$s" ||
    fail "libmpi does not come from the kit: $(grep '^dist: lib' "$s")"
  why=$(prov_problems "$tmp/dist/dist/provenance.json") || fail "dist/provenance.json: $why"
  grep -q "^dist mpi_check: exit 0 " "$s" || fail "the 2-rank MPI check failed from the kit"
  grep -q "^dist mpi_check: All tests passed" "$s" || fail "the MPI check's tests did not all pass"
  grep -q "^dist scaling: exit 0 " "$s" || fail "dist_bench.sh --ranks 1,2 failed from the kit"
  grep -q "^| mlp_mnist | 8 | 2 | " "$tmp/dist/dist/scaling/scaling.md" || fail "no 2-rank row in scaling.md"
  for f in triad_np1 triad_np2 steps_np1_unfolded steps_np2_uncoupled allreduce_np2_bf16 steps_np2_weak_bf16; do
    [ -s "$tmp/dist/dist/scaling/$f.json" ] || fail "no $f.json (baselines, bf16 buckets) from the kit's scaling"
  done
  if grep -q "^GPU tests run on" "$s"; then
    grep -q "^dist nccl_test: exit 0 " "$s" || fail "test_cuda_runtime [nccl] under mpirun -np 1 failed on this GPU machine"
  else
    grep -q "^dist nccl: SKIPPED (exit 77): " "$s" || fail "test_cuda_runtime [nccl] did not report itself skipped without a GPU"
    [ "$rc" != 0 ] || fail "run --dist-only exited 0 although the NCCL part was skipped"
  fi
  echo "PASS: Open MPI from the kit with this machine's hidden: $(grep '^dist mpi_check: All' "$s" | cut -d' ' -f3-)"
fi
echo "PASS: the GPU kit packs $(du -m "$kit" | cut -f1) MiB and runs from the kit alone; $(grep -c '^test_' "$summary") test binaries ran"
