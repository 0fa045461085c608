#!/usr/bin/env bash
# The main job: set up, build, run the default benchmark sweep, write JSON results and a report.
#   bash scripts/bench.sh [--out DIR] [--threads 1,2] [--models fcn5,...] [--filter REGEX]
#                         [--variant op=name] [--reps N] [--kernels] [--no-install] [--with-pytorch]
#                         [--batches 16,32,64] [--batch-sweep] [--phases] [--full]
# Defaults: GEMM variants x NN/NT/TN/TT on the DLBench shape and the FCN-5 batch-64 shapes, and
# the training and inference step of fcn5, alexnet, resnet50, vgg16, lstm32 and lstm64 at the
# paper's CPU batch, threads 1..hardware. The GEMM part and FCN-5 took 9 minutes on the quiet
# 2-core development machine; the CNN/LSTM steps add an estimated 3 minutes (about three steps
# each: 1-8 s per step there). --kernels adds the per-layer conv/pool/batch-norm/LSTM variant
# benchmarks of the chosen models (long: ~9 minutes per thread count for the three CNNs' convs
# alone). --with-pytorch adds the side-by-side PyTorch comparison. --batches runs the model steps at
# these mini-batch sizes instead of the paper's CPU batch; --batch-sweep at networks.md's sweep of
# each model (CPU batch + GPU batch list); --phases also times forward/backward/update apart.
# The GEMM remedies (gemm_remedy/, DLBench's transpose-then-NN and SGD folded through beta) run on
# the DLBench shape by default and on every shape with --full or a --filter that asks for them.
# --full is the long sweep: all DLBench models (fcn5,fcn8,alexnet,resnet50,vgg16,lstm32,lstm64;
# --models overrides), --batch-sweep, --phases, threads 1,2,4,.. up to the hardware (an estimated
# 3 hours on the 2-core machine, most of it the phases: 18 whole steps per batch and thread count).
set -euo pipefail
cd "$(dirname "$0")/.."

out="results/$(date +%Y%m%d-%H%M%S)"
threads=""
models="fcn5,alexnet,resnet50,vgg16,lstm32,lstm64"
kernels=off
filter=""
variant=""
reps=1
batches=""
batch_sweep=off
phases=off
full=0
models_given=0
install=1
with_pytorch=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --models) models="$2"; models_given=1; shift 2 ;;
    --batches) batches="$2"; shift 2 ;;
    --batch-sweep) batch_sweep=on; shift ;;
    --phases) phases=on; shift ;;
    --full) full=1; shift ;;
    --filter) filter="$2"; shift 2 ;;
    --variant) variant="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --kernels) kernels=on; shift ;;
    --no-install) install=0; shift ;;
    --with-pytorch) with_pytorch=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$full" = 1 ]; then
  [ "$models_given" = 1 ] || models="fcn5,fcn8,alexnet,resnet50,vgg16,lstm32,lstm64"
  batch_sweep=on
  phases=on
fi

[ "$install" = 1 ] && bash scripts/install_deps.sh
build="${ANVIL_BUILD_DIR:-build}"
echo "== configure and build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target anvil_bench

mkdir -p "$out"
args=(--anvil_models="$models" --anvil_kernels="$kernels" --anvil_batch_sweep="$batch_sweep"
      --anvil_phases="$phases" --benchmark_counters_tabular=false)
[ -n "$threads" ] && args+=(--anvil_threads="$threads")
[ -n "$batches" ] && args+=(--anvil_batches="$batches")
if [ -n "$filter" ]; then
  args+=(--benchmark_filter="$filter")
elif [ "$full" != 1 ]; then
  args+=(--benchmark_filter='^(peak|gemm|model|kernel)/|^gemm_remedy/.*/dlbench_')
fi
[ -n "$variant" ] && args+=(--anvil_variant="$variant")
if [ "$reps" -gt 1 ]; then
  args+=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true)
fi
count=$("$build/bench/anvil_bench" "${args[@]}" --benchmark_list_tests | wc -l)
echo "== anvil_bench -> $out/anvil_bench.json ($count benchmarks; progress below, one line per benchmark)"
# Passive waiting: idle OpenMP threads sleep instead of spinning on a shared 2-core machine.
OMP_WAIT_POLICY=PASSIVE "$build/bench/anvil_bench" "${args[@]}" \
  --benchmark_out="$out/anvil_bench.json" --benchmark_out_format=json

if [ "$with_pytorch" = 1 ]; then
  echo "== side by side with PyTorch"
  ANVIL_BUILD_DIR="$build" bash scripts/compare_pytorch.sh --models "$models" \
    ${threads:+--threads "$threads"} --out "$out"
fi

echo "== report"
# The plots need Debian's python3-matplotlib, which belongs to the system interpreter; a python3
# earlier on the PATH (pyenv, venv) may lack it.
py=python3
for cand in python3 /usr/bin/python3; do
  if "$cand" -c 'import matplotlib' 2>/dev/null; then py=$cand; break; fi
done
"$py" scripts/report.py "$out"
