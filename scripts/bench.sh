#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: set up, build, run the default benchmark sweep, write JSON results and a report.
#   bash scripts/bench.sh [--out DIR] [--threads 1,2] [--models fcn5,...] [--filter REGEX]
#                         [--variant op=name] [--reps N] [--kernels] [--no-install] [--with-pytorch]
#                         [--batches 16,32,64] [--batch-sweep] [--phases] [--full]
#                         [--peers auto|none|pytorch,tensorflow] [--devices auto|cpu|cuda|cpu,cuda]
#                         [--precision fp32|bf16|fp16[,...]] [--no-build] [--dry-run]
#                         [-- <anvil_bench flags>]
# Defaults: GEMM variants x NN/NT/TN/TT on the DLBench shape and FCN-5's M = 64 GEMMs, and the
# training and inference step of DLBench's six networks (fcn5, fcn8, alexnet, resnet50, lstm32,
# lstm64) at the paper's CPU batch, threads 1..hardware, then the same steps in PyTorch and
# TensorFlow. Measured on the 2-core development machine
# (docs/results/default_run_2026-11-22/README.md): build 2.6 min, peak + GEMM + remedies 4.2,
# the model steps 2.1, PyTorch 3.8, TensorFlow 4.3 (17.3 min in all; --peers none leaves about
# 9.3). The LSTM models' steps once per LSTM variant come with --full. Progress: one line per benchmark, and a timed line per stage (also in stages.txt). --kernels adds the per-layer conv/pool/batch-norm/LSTM variant
# benchmarks of the chosen models (long: ~9 minutes per thread count for the three CNNs' convs
# alone). --with-pytorch adds the side-by-side PyTorch comparison. --batches runs the model steps at
# these mini-batch sizes instead of the paper's CPU batch; --batch-sweep at networks.md's sweep of
# each model (CPU batch + GPU batch list); --phases also times forward/backward/update apart.
# The GEMM remedies (gemm_remedy/, DLBench's transpose-then-NN and SGD folded through beta) run on
# the DLBench shape by default and on every shape with --full or a --filter that asks for them.
# --full is the long sweep: DLBench's six networks and VGG16 (fcn5,fcn8,alexnet,resnet50,vgg16,lstm32,lstm64;
# --models overrides), --batch-sweep, --phases, the GEMMs of every FCN and LSTM layer and a
# DeepBench-style training set (anvil_bench --anvil_gemm_shapes=all), threads 1,2,4,.. up to the hardware (an estimated
# 3 hours on the 2-core machine, most of it the phases: 18 whole steps per batch and thread count).
# --peers: the frameworks timed beside anvil on the same models, threads and batch (PyTorch and
# TensorFlow/Keras, bench/peers/*_models.py) for the report's anvil/peer ratios. auto (default):
# install missing ones with pip (scripts/install_peers.sh, skipped with --no-install) and run
# every one that imports; none: anvil only. --with-pytorch adds compare_pytorch.sh's careful
# interleaved anvil/PyTorch comparison on top (several rounds per side; long).
# --devices: auto (default) = the CPU, plus the GPU benchmarks (cuda GEMM variants, the FCN/MLP
# steps over the GPU batch sweep, PyTorch on the GPU) when a CUDA device is usable; cpu = CPU
# only (the CUDA backend is never loaded); cuda = only the GPU benchmarks.
# --precision: the autocast policies the model steps run under (anvil_bench --anvil_precision;
# default fp32). Each model, phase and thread count then runs one process per precision, one
# after another, and the rows of a mixed precision are named .../precision:bf16; the PyTorch peer
# runs the same CPU steps under torch.autocast("cpu", dtype=torch.bfloat16) for bf16 (its fp16
# and the TensorFlow peer's mixed precision are not wired: those rows are left out, and say so).
# --no-build: use the anvil_bench already in $ANVIL_BUILD_DIR (default build/) without running
# CMake: a machine that only runs a build made elsewhere (scripts/gpu_kit.sh).
# --dry-run: check the options (--models against `anvil models`, --threads positive integers),
# print the plan, the benchmark count, a time estimate and the apt/pip actions it would take
# (scripts/bench_plan.sh); nothing is installed, built or run.
# -- FLAGS: the rest goes to every anvil_bench process (e.g. -- --benchmark_min_time=0.5s
# --benchmark_repetitions=3); bench.sh sets --benchmark_filter and --benchmark_out itself
# (--filter chooses the benchmarks), so passing those is an error.
set -euo pipefail
cd "$(dirname "$0")/.."

out="results/$(date +%Y%m%d-%H%M%S)"
threads=""
models="fcn5,fcn8,alexnet,resnet50,lstm32,lstm64"  # DLBench's six networks
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
peers=auto
devices=auto
build_it=1
dry_run=0
precisions=fp32
passthrough=()
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
    --peers) peers="$2"; shift 2 ;;
    --no-peers) peers=none; shift ;;
    --devices) devices="$2"; shift 2 ;;
    --no-build) build_it=0; shift ;;
    --dry-run) dry_run=1; shift ;;
    --precision) precisions="$2"; shift 2 ;;
    --) shift; passthrough=("$@"); break ;;
    -h|--help) sed -n '3,47p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
usage_error() { echo "bench.sh: $*" >&2; exit 2; }
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || usage_error "--reps: a positive integer, not '$reps'"
[ -z "$threads" ] || [[ "$threads" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  usage_error "--threads: comma-separated positive integers, not '$threads'"
[[ "$precisions" =~ ^(fp32|bf16|fp16)(,(fp32|bf16|fp16))*$ ]] ||
  usage_error "--precision: comma-separated fp32, bf16 or fp16, not '$precisions'"
for flag in "${passthrough[@]}"; do
  case "$flag" in --benchmark_filter*|--benchmark_out*|--benchmark_list_tests*)
    usage_error "after --: $flag is set by bench.sh (use --filter to choose the benchmarks)" ;; esac
done
gemm_shapes="dlbench,fcn5"
build="${ANVIL_BUILD_DIR:-build}"
if [ "$full" = 1 ]; then
  gemm_shapes=all
  [ "$models_given" = 1 ] || models="fcn5,fcn8,alexnet,resnet50,vgg16,lstm32,lstm64"
  batch_sweep=on
  phases=on
fi

# The thread counts of the sweep (anvil_bench's own default: 1, 2, 4, ... and the hardware threads).
if [ -z "$threads" ]; then
  n=$(nproc); t=1; sweep_threads=""
  while [ "$t" -lt "$n" ]; do sweep_threads="$sweep_threads,$t"; t=$((t * 2)); done
  sweep_threads="${sweep_threads#,},$n"; sweep_threads="${sweep_threads#,}"
else
  sweep_threads="$threads"
fi
args=(--anvil_models="$models" --anvil_kernels="$kernels" --anvil_batch_sweep="$batch_sweep"
      --anvil_phases="$phases" --anvil_threads="$sweep_threads" --anvil_gemm_shapes="$gemm_shapes"
      --anvil_precision="$precisions" --benchmark_counters_tabular=false "${passthrough[@]}")
[ -n "$batches" ] && args+=(--anvil_batches="$batches")
[ -n "$variant" ] && args+=(--anvil_variant="$variant")
case "$devices" in
  auto|cpu,cuda|cuda,cpu) cpu_runs=1; args+=(--anvil_gpu=auto) ;;
  cpu) cpu_runs=1; args+=(--anvil_gpu=off) ;;
  cuda) cpu_runs=0; args+=(--anvil_gpu=on) ;;
  *) usage_error "--devices: auto, cpu, cuda or cpu,cuda, not '$devices'" ;;
esac
if [ "$reps" -gt 1 ]; then
  args+=(--benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true)
fi
default_filter() {  # the anvil_bench filter of the default sweep (its model steps: ^model/)
  # The default sweep keeps the GEMM part to ~4 minutes: every variant and mode on the DLBench
  # shape and on FCN-5's three M = 64 GEMMs (forward and input gradient of its layers; the K = 64
  # weight-gradient shapes come with --full or --filter), the remedies for the default selection
  # on the DLBench shape (every variant's with --full). On the FCN-5 shapes the variants only, not
  # `default` (it is one of them).
  # GPU only (--devices cuda): the GEMM variants and remedies on the DLBench shape (all 313 GEMM
  # benchmarks took 6 min 40 s on the H100; every shape comes with --full), and the per-layer conv
  # sweep (bench/kernel_bench.cpp): every CUDA variant on AlexNet's and VGG16's conv layers and
  # the default on ResNet-50's; every variant on every layer with --full.
  if [ "$cpu_runs" != 1 ]; then
    if [ "$full" = 1 ]; then echo '^(gemm|gemm_remedy|kernel)/.*/device:cuda'
    else echo '^(gemm|gemm_remedy)/.*/dlbench_[^/]*/device:cuda|^kernel/conv2d/[^/]+/[a-z_]+/(alexnet|vgg16):.*/device:cuda|^kernel/conv2d/default/.*/device:cuda'; fi
    return
  fi
  # (With a GPU, the CPU sweep takes the same GPU per-layer conv subset as the GPU-only one.)
  if [ "$full" = 1 ]; then echo '^(peak|gemm|gemm_remedy|kernel)/'
  else echo '^peak/|^kernel/.*/threads:|^kernel/conv2d/[^/]+/[a-z_]+/(alexnet|vgg16):.*/device:cuda|^kernel/conv2d/default/.*/device:cuda|^gemm/[^/]+/[NT][NT]/dlbench_|^gemm/cpu[.][^/]+/[NT][NT]/fcn5_b64_64x|^gemm_remedy/default/.*/dlbench_'; fi
}
if [ "$dry_run" = 1 ]; then  # checks and the plan; nothing is installed, built or run
  source scripts/bench_plan.sh
  exit 0
fi

mkdir -p "$out"
stage() {  # stage WHAT: progress line with the time since the start, also kept in $out/stages.txt
  local line
  line=$(printf '== [%02d:%02d] %s' $((SECONDS / 60)) $((SECONDS % 60)) "$*")
  echo "$line"
  echo "$line" >> "$out/stages.txt"
}

stage "set up"
[ "$install" = 1 ] && bash scripts/install_deps.sh
if [ "$peers" != none ] && [ "$install" = 1 ]; then
  bash scripts/install_peers.sh "$([ "$peers" = auto ] && echo pytorch,tensorflow || echo "$peers")" || true
fi
if [ "$build_it" = 1 ]; then
  stage "configure and build ($build)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target anvil_bench
elif [ ! -x "$build/bench/anvil_bench" ]; then
  echo "bench.sh: --no-build, but there is no $build/bench/anvil_bench" >&2; exit 2
fi

bench() {  # bench FILTER OUTPUT.json: one anvil_bench process (none when nothing matches)
  # wc reads the whole listing: `grep -q` would stop early, anvil_bench would die of SIGPIPE on a
  # long list, and pipefail would turn that into "nothing matches".
  local n
  n=$("$build/bench/anvil_bench" "${args[@]}" --benchmark_filter="$1" --benchmark_list_tests 2>/dev/null | wc -l) || n=0
  if [ "$n" -eq 0 ]; then
    echo "== no benchmark matches $1 here"
    return 0
  fi
  # Passive waiting: idle OpenMP threads sleep instead of spinning on a shared 2-core machine.
  OMP_WAIT_POLICY=PASSIVE "$build/bench/anvil_bench" "${args[@]}" --benchmark_filter="$1" \
    --benchmark_out="$2" --benchmark_out_format=json
}
measured_peak() {  # the per-core FMA peak anvil_bench measured into $out/anvil_bench.json, or 0
  python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['context']['anvil.peak_gflops_per_core'])" \
    "$out/anvil_bench.json" 2>/dev/null || echo 0
}
if [ -n "$filter" ]; then
  count=$("$build/bench/anvil_bench" "${args[@]}" --benchmark_filter="$filter" --benchmark_list_tests | wc -l)
  stage "anvil_bench -> $out/anvil_bench.json ($count benchmarks; one line per benchmark)"
  bench "$filter" "$out/anvil_bench.json"
else
  # Everything but the model steps in one process; then one process per model, phase and thread
  # count, so that a step's peak RSS is its own and not what earlier benchmarks left resident
  # (the peers run the same way).
  rest=$(default_filter)
  count=$("$build/bench/anvil_bench" "${args[@]}" --benchmark_filter="$rest|^model/" --benchmark_list_tests | wc -l)
  stage "anvil_bench -> $out/anvil_bench*.json ($count benchmarks; one line per benchmark)"
  bench "$rest" "$out/anvil_bench.json"
  # Every model process takes the peak the first process measured (one peak for the whole report,
  # and 0.3 s less per process).
  peak=$(measured_peak)
  [ "$peak" = 0 ] || args+=(--anvil_peak="$peak")
  stage "anvil model steps (one process per model, phase and thread count)"
  step_phases="train_step inference_step"
  [ "$phases" = on ] && step_phases="$step_phases forward backward update"
  # The GPU model steps (registered only when a CUDA device is usable), in one process.
  gpu_steps='^model/[^/]+/[a-z_]+/batch:[0-9]+/device:cuda'
  # ... and the LSTM layers of the LSTM models per CUDA variant (bench/kernel_bench.cpp).
  gpu_steps="$gpu_steps|^kernel/lstm/[^/]+/(forward_training|backward)/[^/]+/batch:[0-9]+/device:cuda"
  [ "$devices" = cpu ] || bench "$gpu_steps" "$out/anvil_bench_model_gpu.json"
  [ "$cpu_runs" = 1 ] || models=""
  # The LSTM models' steps once per LSTM variant (.../threads:T/lstm:VARIANT/...) come with
  # --full; the default sweep times the default selection (.../threads:T/iterations:1/...) only.
  variant_rows='iterations:'
  [ "$full" = 1 ] && variant_rows=''
  for m in ${models//,/ }; do
    for ph in $step_phases; do
      for t in ${sweep_threads//,/ }; do
        for p in ${precisions//,/ }; do
          if [ "$p" = fp32 ]; then  # fp32 rows keep their names (no precision part)
            bench "^model/$m/$ph/batch:[0-9]+/threads:$t/$variant_rows" "$out/anvil_bench_model_${m}_${ph}_t$t.json"
          else
            bench "^model/$m/$ph/batch:[0-9]+/threads:$t/precision:$p/$variant_rows" \
              "$out/anvil_bench_model_${m}_${ph}_t${t}_$p.json"
          fi
        done
      done
    done
  done
fi

# The peers, one process per model and thread count (a forked one per phase: fork_per_phase in
# bench/peers/pytorch_models.py), at the batch anvil ran (the model's
# CPU batch, or each of --batches); the report matches rows by model, phase, threads and batch.
if [ "$peers" != none ]; then
  [ "$peers" = auto ] && peers=pytorch,tensorflow
  peer_threads="$sweep_threads"
  # The peers' "% of peak" against the per-core FMA peak anvil_bench measured on this machine.
  # Without one (no anvil run here) the PyTorch peer measures its own and TensorFlow reports none.
  peak=$(measured_peak)
  : > "$out/peer_commands.txt"
  IFS=, read -r -a peer_list <<< "$peers"
  for peer in "${peer_list[@]}"; do
    case "$peer" in pytorch) module=torch ;; tensorflow) module=tensorflow ;;
      *) echo "bench.sh: --peers: unknown peer '$peer' (pytorch, tensorflow)" >&2; exit 2 ;; esac
    if ! python3 -c "import $module" >/dev/null 2>&1; then
      echo "== $peer: not importable by python3, no $peer column (scripts/install_peers.sh installs it)"
      continue
    fi
    # Only the models the peer defines (both peers share pytorch_models.py's tables).
    known=$(python3 -c "import sys; sys.path.insert(0, 'bench/peers'); import pytorch_models as p; print(' '.join([*p.MODELS, *p.NETS]))")
    peer_models=""
    for m in ${models//,/ }; do [[ " $known " == *" $m "* ]] && peer_models="$peer_models,$m"; done
    peer_models="${peer_models#,}"
    [ -n "$peer_models" ] || continue
    stage "$peer: $peer_models, threads $peer_threads (one process per model and thread count, forked per phase)"
    for p in ${precisions//,/ }; do
      if [ "$p" != fp32 ] && { [ "$peer" != pytorch ] || [ "$p" != bf16 ]; }; then
        echo "== $peer: no $p rows (the peer's $p is not wired: bench/peers/README.md)"
        continue
      fi
      for b in ${batches:-0}; do
        b=${b//,/ }
        for bb in $b; do
          cmd=(python3 "bench/peers/${peer}_models.py" run --models "$peer_models" --threads "$peer_threads"
               --phases train,inference --reps 1 --warmup 2 --min-steps 1 --min-time 2)
          [ "$peak" != 0 ] && cmd+=(--peak "$peak")
          [ "$bb" != 0 ] && cmd+=(--batch "$bb")
          [ "$peer" = pytorch ] && cmd+=(--config preset)
          [ "$p" != fp32 ] && cmd+=(--precision "$p")
          echo "${cmd[*]}" >> "$out/peer_commands.txt"
          "${cmd[@]}" >> "$out/peer_$peer.jsonl" || echo "bench.sh: the $peer peer failed; its column is incomplete" >&2
        done
      done
    done
  done
  # torch.mm on the GPU beside anvil's GPU GEMM rows, on the shapes those ran.
  if [ -f "$out/anvil_bench.json" ] && [[ ",$peers," == *",pytorch,"* ]] &&
     python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    gpu_gemm_shapes=$(python3 - "$out/anvil_bench.json" <<'PY'
import json, re, sys
shapes = set()
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    m = re.match(r"gemm/[^/]+/[NT][NT]/([^/]+)/device:cuda", b["name"])
    if m and not b.get("error_occurred"):
        shapes.add(m[1])
print(",".join(sorted(shapes)))
PY
)
    if [ -n "$gpu_gemm_shapes" ]; then
      stage "pytorch torch.mm on the GPU: $gpu_gemm_shapes"
      cmd=(python3 bench/peers/pytorch_gpu_gemm.py --shapes "$gpu_gemm_shapes")
      echo "${cmd[*]}" >> "$out/peer_commands.txt"
      "${cmd[@]}" > "$out/peer_pytorch_cuda_gemm.jsonl" || echo "bench.sh: torch.mm on the GPU failed" >&2
    fi
  fi
  # PyTorch's cuDNN LSTM beside anvil's GPU LSTM layers and LSTM model steps (report section
  # "LSTM fusion on the GPU").
  if [ -f "$out/anvil_bench_model_gpu.json" ] && grep -q '"kernel/lstm/' "$out/anvil_bench_model_gpu.json" &&
     [[ ",$peers," == *",pytorch,"* ]] &&
     python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    stage "pytorch cuDNN LSTM on the GPU"
    cmd=(python3 bench/peers/pytorch_gpu_lstm.py)
    echo "${cmd[*]}" >> "$out/peer_commands.txt"
    "${cmd[@]}" > "$out/peer_pytorch_cuda_lstm.jsonl" || echo "bench.sh: PyTorch's LSTM on the GPU failed" >&2
  fi
  # PyTorch on the GPU beside anvil's GPU steps, at the batches those ran.
  if [ -f "$out/anvil_bench_model_gpu.json" ] && [[ ",$peers," == *",pytorch,"* ]] &&
     python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    python3 - "$out/anvil_bench_model_gpu.json" > "$out/gpu_steps.txt" <<'PY'
import json, re, sys
seen = set()
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    m = re.match(r"model/([^/]+)/(train_step|inference_step)/batch:(\d+)/device:cuda", b["name"])
    if m and not b.get("error_occurred"):
        seen.add((m[1], m[2].split("_")[0], m[3]))
for s in sorted(seen):
    print(*s)
PY
    stage "pytorch on the GPU: $(wc -l < "$out/gpu_steps.txt") steps"
    while read -r m ph b; do
      cmd=(python3 bench/peers/pytorch_models.py run --device cuda --models "$m" --threads 1 --phases "$ph"
           --batch "$b" --reps 3 --warmup 3 --min-time 1 --config preset)
      echo "${cmd[*]}" >> "$out/peer_commands.txt"
      "${cmd[@]}" >> "$out/peer_pytorch_cuda.jsonl" || echo "bench.sh: PyTorch on the GPU failed ($m $ph $b)" >&2
    done < "$out/gpu_steps.txt"
    # Every step definition (batch copied, batch resident) and TF32 beside anvil's
    # .../[resident/][tf32/]device:cuda rows, cudnn.benchmark on: one process per model and batch.
    awk '{print $1, $3}' "$out/gpu_steps.txt" | sort -u | while read -r m b; do
      cmd=(python3 bench/peers/pytorch_gpu_models.py --model "$m" --batch "$b" --phases train,inference)
      echo "${cmd[*]}" >> "$out/peer_commands.txt"
      "${cmd[@]}" >> "$out/peer_pytorch_cuda_steps.jsonl" || echo "bench.sh: pytorch_gpu_models.py failed ($m $b)" >&2
    done
  fi
fi

if [ "$with_pytorch" = 1 ]; then
  stage "side by side with PyTorch"
  ANVIL_BUILD_DIR="$build" bash scripts/compare_pytorch.sh --models "$models" \
    ${threads:+--threads "$threads"} --out "$out"
fi

stage "report"
# The plots need Debian's python3-matplotlib, which belongs to the system interpreter; a python3
# earlier on the PATH (pyenv, venv) may lack it.
py=python3
for cand in python3 /usr/bin/python3; do
  if "$cand" -c 'import matplotlib' 2>/dev/null; then py=$cand; break; fi
done
"$py" scripts/report.py "$out"
# The per-layer GPU conv table (fastest algorithm per layer and pass, the default's distance).
if grep -q 'kernel/conv2d/.*device:cuda' "$out"/anvil_bench*.json 2>/dev/null; then
  "$py" scripts/report_gpu_conv.py "$out"/anvil_bench*.json > "$out/gpu_conv_layers.md"
  echo "== GPU conv layers: $out/gpu_conv_layers.md"
fi
# anvil's GPU steps (batch copied / resident, FP32 / TF32) beside PyTorch's.
if [ -f "$out/anvil_bench_model_gpu.json" ] && [ -f "$out/peer_pytorch_cuda_steps.jsonl" ]; then
  "$py" scripts/report_gpu_steps.py "$out/anvil_bench_model_gpu.json" "$out/peer_pytorch_cuda_steps.jsonl" \
    > "$out/gpu_steps.md"
  echo "== GPU steps beside PyTorch: $out/gpu_steps.md"
fi
stage "done: $out/report.md"
