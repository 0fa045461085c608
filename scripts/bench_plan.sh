# SPDX-License-Identifier: Apache-2.0
# bench.sh --dry-run (sourced by scripts/bench.sh after it parsed its options): checks the options
# that bench.sh would otherwise only find wrong minutes into a run, then prints the plan, the
# benchmark count, a time estimate and the apt/pip actions. Installs, builds and runs nothing.
# A bad option is one line on stderr and exit 2, as for every usage error of bench.sh.

case "$peers" in
  auto|none) ;;
  *) for p in ${peers//,/ }; do
       case "$p" in pytorch|tensorflow) ;; *) usage_error "--peers: auto, none or pytorch,tensorflow, not '$p'" ;; esac
     done ;;
esac

# --models against the model zoo of the anvil binary (`anvil models`: a header line, then one
# model per line, its name first).
anvil_cli="${ANVIL_CLI:-$build/bin/anvil}"
if [ -x "$anvil_cli" ]; then
  zoo=" $("$anvil_cli" models | awk 'NR > 1 { printf "%s ", $1 }')"
  for m in ${models//,/ }; do
    [[ "$zoo" == *" $m "* ]] || usage_error "--models: unknown model '$m' (anvil models:$zoo)"
  done
  models_checked="checked against \`anvil models\`"
else
  models_checked="NOT checked: no $anvil_cli yet (cmake --build $build --target anvil_cli; or set ANVIL_CLI)"
fi

n_models=$(tr ',' '\n' <<< "$models" | grep -c .)
n_threads=$(tr ',' '\n' <<< "$sweep_threads" | grep -c .)
echo "bench.sh plan (--dry-run):"
echo "  out=$out models=$models threads=$sweep_threads devices=$devices peers=$peers"
echo "  models: $models_checked"
echo "  filter=${filter:-<default sweep>} variant=${variant:-<default>} reps=$reps kernels=$kernels"
echo "  batches=${batches:-<paper CPU batch>} batch_sweep=$batch_sweep phases=$phases gemm_shapes=$gemm_shapes precision=$precisions"
echo "  install=$install build=$build_it with_pytorch=$with_pytorch full=$full"
echo "  anvil_bench flags after --: ${passthrough[*]:-<none>}"

# Benchmark count: what anvil_bench lists for the run's filters (bench.sh's own count line).
bench_bin="$build/bench/anvil_bench"
count=""
if [ -x "$bench_bin" ]; then
  what="${filter:-$(default_filter)|^model/}"
  count=$("$bench_bin" "${args[@]}" --benchmark_filter="$what" --benchmark_list_tests 2>/dev/null | wc -l) || count=""
fi
echo "  benchmarks: ${count:-unknown until $bench_bin is built}"

# Time estimate, from the default run of docs/results/default_run_2026-11-22 on a 2-core VM:
# set-up checks 0:21, build 2:37, its 174 anvil benchmarks in 6:16 (about 2.2 s each with their
# warm-up, per repetition), PyTorch 3:47 and TensorFlow 4:15 over 6 models x 2 thread counts
# (about 19 s and 21 s per model and thread count, both phases). A rough guide: larger
# machines run the same benchmarks in less time, --kernels and --phases in much more.
est=21
if [ "$build_it" = 1 ]; then
  if [ -x "$bench_bin" ]; then est=$((est + 30)); else est=$((est + 157)); fi
fi
if [ -n "$count" ]; then
  est=$((est + count * 22 * reps / 10))
  anvil_part="$count benchmarks x $reps repetition(s) x ~2.2 s"
else
  est=$((est + 376 * n_models * n_threads / 12))
  anvil_part="scaled from the default sweep's 6:16 by models and threads"
fi
peer_runs=0
if [ "$peers" != none ]; then
  n_batches=$(tr ',' '\n' <<< "${batches:-0}" | grep -c .)
  peer_names="${peers/auto/pytorch,tensorflow}"
  for p in ${peer_names//,/ }; do
    case "$p" in pytorch) per=19 ;; *) per=21 ;; esac
    est=$((est + per * n_models * n_threads * n_batches))
    peer_runs=$((peer_runs + 1))
  done
fi
[ "$phases" = on ] && note=" (--phases: several times more)" || note=""
[ "$kernels" = on ] && note="$note (--kernels: ~9 min more per thread count)"
printf '  time estimate: ~%d min (anvil: %s; %d peer(s); build and set-up)%s\n' \
  $(((est + 59) / 60)) "$anvil_part" "$peer_runs" "$note"

# The apt and pip actions the set-up stage would take here (nothing with --no-install).
if [ "$install" = 1 ]; then
  echo "  set-up actions:"
  bash scripts/install_deps.sh --dry-run | sed 's/^/    /'
  if [ "$peers" != none ]; then
    bash scripts/install_peers.sh --dry-run "$([ "$peers" = auto ] && echo pytorch,tensorflow || echo "$peers")" |
      sed 's/^/    /'
  fi
else
  echo "  set-up actions: none (--no-install)"
fi
