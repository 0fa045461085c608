#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Side-by-side step timings of anvil and PyTorch (configured at its best) on the same networks,
# threads and batch: networks.md's "How a step is timed" on both sides.
#
#   scripts/compare_pytorch.sh [--models fcn5] [--threads 1,2] [--reps 3] [--rounds 3]
#                              [--phases train,inference] [--torch-config tune|preset|FILE]
#                              [--nice N] [--out DIR]
#
#   --reps R      repetitions inside each process (anvil_bench --benchmark_repetitions=R; the
#                 PyTorch peer's R timed repetitions of >= 2 s each, like anvil's MinTime(2.0))
#   --rounds K    processes per side and configuration, run interleaved anvil, torch, anvil,
#                 torch, ... so that the shared host's noise falls on both alike; the table
#                 shows the median over rounds of each process's mean step and of its
#                 median step (bench/peers/compare_report.py)
#   --nice N      run each process of both sides at scheduling priority N (e.g. -10, as root)
#                 when the host is busy. The kernel's autogroups (sched_autogroup_enabled=1)
#                 make a plain `nice` count only against processes of the same session, so each
#                 run goes into its own session (setsid) whose autogroup nice is set to N.
#                 Default: 0 (no change; other people's benchmarks on the host are not pushed aside)
#   --torch-config  tune (default): measure PyTorch's candidate settings first (MKL code path,
#                 allocator, SGD implementation, OpenMP wait policy; a few minutes) and use the
#                 fastest; preset: the choice measured when the peer was written; FILE: a JSON
#                 written by an earlier tune (DIR/pytorch_config.json)
#
# anvil_bench is taken from ${ANVIL_BUILD_DIR:-build}/bench/anvil_bench (relative to the repo
# root unless absolute). Writes DIR/compare_pytorch.json, DIR/compare_pytorch.md and the raw
# outputs under DIR/raw/. DIR defaults to compare-pytorch-<date> in the current directory.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
peer="$repo/bench/peers/pytorch_models.py"
report="$repo/bench/peers/compare_report.py"

models=fcn5 threads=1,2 reps=3 rounds=3 phases=train,inference torch_config=tune nice=0
out="compare-pytorch-$(date +%Y%m%d-%H%M%S)"
usage() { sed -n '3,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --phases) phases="$2"; shift 2 ;;
    --torch-config) torch_config="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --nice) nice="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare_pytorch.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

die() { echo "compare_pytorch.sh: $*" >&2; exit 1; }

# Runs "$@" at priority $nice (see --nice): a new session, so a new autogroup, whose nice is set.
prio() {
  if [[ "$nice" == 0 ]]; then "$@"; return; fi
  setsid --wait bash -c 'echo "$0" > /proc/self/autogroup 2>/dev/null || true; exec nice -n "$0" "$@"' "$nice" "$@"
}

# --- prerequisites ------------------------------------------------------------------------------
command -v python3 >/dev/null || die "python3 not found"
if ! python3 -c 'import torch' >/dev/null 2>&1; then
  die "PyTorch is not importable by python3. Install it with: python3 -m pip install torch"
fi
build_dir="${ANVIL_BUILD_DIR:-build}"
[[ "$build_dir" = /* ]] || build_dir="$repo/$build_dir"
bench="$build_dir/bench/anvil_bench"
[[ -x "$bench" ]] || die "anvil_bench not found at $bench; build it with
  cmake -S $repo -B $build_dir -G Ninja && cmake --build $build_dir --target anvil_bench
or point ANVIL_BUILD_DIR at a build directory that has it"

mkdir -p "$out/raw"
out="$(cd "$out" && pwd)"
log() { echo "[compare] $*" >&2; }

# --- PyTorch configuration ------------------------------------------------------------------------
case "$torch_config" in
  tune)
    log "tuning PyTorch's configuration (MKL path, allocator, SGD, wait policy) -> $out/pytorch_config.json"
    prio python3 "$peer" tune --out "$out/pytorch_config.json" >/dev/null 2>"$out/raw/tune.log" \
      || { cat "$out/raw/tune.log" >&2; die "PyTorch tuning failed"; }
    cat "$out/raw/tune.log" >&2
    cfg="$out/pytorch_config.json" ;;
  preset) cfg=preset ;;
  *) [[ -f "$torch_config" ]] || die "--torch-config: no such file '$torch_config'"
     cp "$torch_config" "$out/pytorch_config.json"; cfg="$out/pytorch_config.json" ;;
esac

# --- interleaved runs -----------------------------------------------------------------------------
commands="$out/raw/commands.txt"
echo "# each run in its own process; --nice $nice; $(nproc) CPUs; load average $(cut -d' ' -f1-3 /proc/loadavg)" > "$commands"
IFS=, read -r -a model_list <<< "$models"
IFS=, read -r -a thread_list <<< "$threads"
IFS=, read -r -a phase_list <<< "$phases"
for m in "${model_list[@]}"; do
  for t in "${thread_list[@]}"; do
    for ph in "${phase_list[@]}"; do
      case "$ph" in train|inference) ;; *) die "--phases: train or inference, not '$ph'" ;; esac
      # The default selection only (not the .../lstm:<variant> steps). One process per phase on both sides: the peak RSS (VmHWM) is a process's lifetime peak, so an
      # inference run after a training run in the same process would report the training peak.
      filter="^model/$m/${ph}_step/batch:[0-9]+/threads:$t(/iterations|/min_time|/manual_time|/real_time|\$)"
      for ((r = 1; r <= rounds; r++)); do
        tag="${m}_${ph}_t${t}_r${r}"
        acmd=(env OMP_WAIT_POLICY=PASSIVE "$bench" "--benchmark_filter=$filter" "--anvil_models=$m"
              "--anvil_threads=$t" "--benchmark_repetitions=$reps" --benchmark_report_aggregates_only=true
              --benchmark_format=json)
        echo "${acmd[*]}" >> "$commands"
        log "anvil   $m $ph threads=$t round $r/$rounds"
        prio "${acmd[@]}" > "$out/raw/anvil_$tag.json" 2> "$out/raw/anvil_$tag.err" \
          || { cat "$out/raw/anvil_$tag.err" >&2; die "anvil_bench failed ($tag)"; }
        # The PyTorch side uses the batch anvil_bench ran with (read from its benchmark name).
        batch="$(python3 "$report" batch-of "$out/raw/anvil_$tag.json")" \
          || die "anvil_bench ran no benchmark matching '$filter' (is $m registered?)"
        # ... and is scored against the per-core FMA peak that anvil_bench measured in that round
        # (one measured peak for both sides' "% of peak").
        peak="$(python3 "$report" peak-of "$out/raw/anvil_$tag.json")" \
          || die "anvil_bench recorded no measured peak in $out/raw/anvil_$tag.json"
        tcmd=(python3 "$peer" run --models "$m" --threads "$t" --phases "$ph" --batch "$batch"
              --reps "$reps" --config "$cfg" --peak "$peak")
        echo "${tcmd[*]}" >> "$commands"
        log "pytorch $m $ph threads=$t round $r/$rounds"
        prio "${tcmd[@]}" > "$out/raw/torch_$tag.jsonl" 2> "$out/raw/torch_$tag.err" \
          || { cat "$out/raw/torch_$tag.err" >&2; die "PyTorch peer failed ($tag)"; }
      done
    done
  done
done

python3 "$report" summarize --raw "$out/raw" --config "$cfg" --commands "$commands" \
  --json "$out/compare_pytorch.json" --md "$out/compare_pytorch.md"
cat "$out/compare_pytorch.md"
log "wrote $out/compare_pytorch.json and $out/compare_pytorch.md"
