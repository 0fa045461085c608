#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The data-parallel "done" check (docs/distributed.md): installs the dependencies, builds the
# `anvil` CLI and the MPI backend, then trains mlp_mnist on Fashion-MNIST on 1 rank and on 2 ranks
# (mpirun -np 2, one thread per rank) with the same global batch and seed, prints both test
# accuracies and fails when they differ by more than the tolerance (default 1 percentage point:
# the two runs draw different dropout masks, Note [Dropout under data parallelism]). With --bf16
# it also trains on 2 ranks with --grad-bucket-dtype bf16 (Note [bf16 gradient buckets]) and
# holds that run's accuracy to the same tolerance against the 2-rank run with f32 buckets.
#   scripts/dist_train_check.sh [--build DIR] [--no-build] [--epochs N] [--tolerance PP] [--out DIR]
#                               [--bf16]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build epochs=3 tol=1.0 do_build=1 out= bf16=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --epochs) epochs=$2; shift 2 ;;
    --tolerance) tol=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --bf16) bf16=1; shift ;;
    -h|--help) sed -n 3,11p "$0"; exit 0 ;;
    *) echo "dist_train_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $do_build == 1 ]]; then
  bash "$root/scripts/install_deps.sh"
  [[ -f $build/CMakeCache.txt ]] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" --target anvil_cli anvil_mpi
fi
out=${out:-$(mktemp -d)}
mkdir -p "$out"
acc() { python3 -c "import json,sys; print(100 * json.load(open(sys.argv[1]))['result']['test_accuracy'])" "$1"; }
runs=("1 np1" "2 np2")
[[ $bf16 == 1 ]] && runs+=("2 np2_bf16 --grad-bucket-dtype bf16")
for run in "${runs[@]}"; do
  read -r np name extra <<< "$run"
  echo "== $np rank(s) ${extra:-}"
  # shellcheck disable=SC2086  # $extra: the options of this run, split on purpose
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$np" -x OMP_NUM_THREADS=1 \
    "$build/bin/anvil" train --model mlp_mnist --dataset fashion-mnist --optimizer adam --lr 1e-3 \
    --batch 80 --epochs "$epochs" --threads 1 --seed 1 ${extra:-} --json-log "$out/$name.json" \
    > "$out/$name.log" 2>&1 || { tail -n 20 "$out/$name.log"; exit 1; }
  grep -E "^(distributed|data parallel|throughput|communication wait|test accuracy|training time)" \
    "$out/$name.log"
done
compare() {  # label A, accuracy A, label B, accuracy B
  python3 - "$@" "$tol" <<'PY'
import sys
la, a, lb, b, tol = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
ok = abs(a - b) <= tol
print(f"test accuracy: {la} {a:.2f} %, {lb} {b:.2f} %, difference {abs(a - b):.2f} "
      f"percentage points (tolerance {tol}): {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
}
status=0
compare "1 rank" "$(acc "$out/np1.json")" "2 ranks" "$(acc "$out/np2.json")" || status=1
if [[ $bf16 == 1 ]]; then
  compare "2 ranks f32 buckets" "$(acc "$out/np2.json")" "2 ranks bf16 buckets" \
    "$(acc "$out/np2_bf16.json")" || status=1
fi
exit $status
