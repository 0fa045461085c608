#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The data-parallel "done" check (docs/distributed.md): installs the dependencies, builds the
# `anvil` CLI and the MPI backend, then trains mlp_mnist on Fashion-MNIST on 1 rank and on 2 ranks
# (mpirun -np 2, one thread per rank) with the same global batch and seed, prints both test
# accuracies and fails when they differ by more than the tolerance (default 1 percentage point:
# the two runs draw different dropout masks, Note [Dropout under data parallelism]).
#   scripts/dist_train_check.sh [--build DIR] [--no-build] [--epochs N] [--tolerance PP] [--out DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build epochs=3 tol=1.0 do_build=1 out=
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --epochs) epochs=$2; shift 2 ;;
    --tolerance) tol=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n 3,8p "$0"; exit 0 ;;
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
for np in 1 2; do
  echo "== $np rank(s)"
  mpirun --allow-run-as-root --oversubscribe --bind-to none -np $np -x OMP_NUM_THREADS=1 \
    "$build/bin/anvil" train --model mlp_mnist --dataset fashion-mnist --optimizer adam --lr 1e-3 \
    --batch 80 --epochs "$epochs" --threads 1 --seed 1 --json-log "$out/np$np.json" \
    > "$out/np$np.log" 2>&1 || { tail -n 20 "$out/np$np.log"; exit 1; }
  grep -E "^(distributed|throughput|communication wait|test accuracy|training time)" "$out/np$np.log"
done
a1=$(acc "$out/np1.json") a2=$(acc "$out/np2.json")
python3 - "$a1" "$a2" "$tol" <<'PY'
import sys
a1, a2, tol = map(float, sys.argv[1:])
ok = abs(a1 - a2) <= tol
print(f"test accuracy: 1 rank {a1:.2f} %, 2 ranks {a2:.2f} %, difference {abs(a1 - a2):.2f} "
      f"percentage points (tolerance {tol}): {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
