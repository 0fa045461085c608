#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Before/after benchmark comparison of two git refs: builds anvil_bench for each (one source
# tree and one build directory per commit, through ccache), runs the same benchmarks of both in
# interleaved rounds (A B, B A, A B, ...) so that the shared host's noise falls on both alike,
# and prints per benchmark the paired per-round ratios after/before (B/A) of the real time:
# median, min-max.
#
#   scripts/compare_builds.sh [--base REF] [--head REF] [--filter REGEX] [--rounds N]
#                             [--dir DIR] [--cuda] [--jobs J] [--build-only] [--dry-run]
#                             [-- BENCH_ARGS...]
#
#   --base REF    "before" (default: main)          --head REF   "after" (default: HEAD)
#   --filter RE   --benchmark_filter of anvil_bench (default: one GEMM size and one model
#                 step at 1 thread: ^(gemm/default/NN/fcn5_b64_64x2048x26752|model/fcn5/train_step/batch:64)/threads:1/)
#   --rounds N    rounds: A then B in odd rounds, B then A in even ones (default 5)
#   --dir DIR     where sources, builds and results go (default build-compare/, gitignored);
#                 DIR/<commit>/src is a checkout of the commit, DIR/<commit>/build its build
#   --cuda        build with the CUDA backend (default: -DANVIL_WITH_CUDA=OFF, CPU benchmarks)
#   --jobs J      build parallelism (default 1)
#   --build-only  build both, run nothing (e.g. to prepare the base while working on the head)
#   --dry-run     print the resolved commits and commands, build and run nothing
#   BENCH_ARGS    passed to every anvil_bench run (e.g. --benchmark_min_time=0.5)
#
# Builds reuse DIR/<commit> when present, so rerunning costs only the rounds. ccache's base_dir
# is DIR, so identical files of the two commits hit the same cache entries. The raw JSON of every
# run is kept in DIR/results-<time>/; the table goes to stdout and to DIR/results-<time>/ratios.md.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base=main head=HEAD rounds=5 jobs=1 cuda=OFF dry=0 build_only=0 dir="$repo/build-compare"
filter='^(gemm/default/NN/fcn5_b64_64x2048x26752|model/fcn5/train_step/batch:64)/threads:1/'
bench_args=()
usage() { sed -n '3,28p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base | --head | --filter | --rounds | --dir | --jobs)  # the variable of the same name
      [[ $# -ge 2 ]] || { echo "compare_builds.sh: $1 needs a value" >&2; exit 2; }
      printf -v "${1#--}" '%s' "$2"
      shift 2 ;;
    --cuda) cuda=ON; shift ;;
    --dry-run) dry=1; shift ;;
    --build-only) build_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; bench_args=("$@"); break ;;
    *) echo "compare_builds.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "compare_builds.sh: --rounds needs a positive integer, got '$rounds'" >&2; exit 2; }
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "compare_builds.sh: --jobs needs a positive integer, got '$jobs'" >&2; exit 2; }
commit_of() {
  git -C "$repo" rev-parse --verify --quiet "$1^{commit}" ||
    { echo "compare_builds.sh: '$1' is not a commit of $repo" >&2; exit 2; }
}
a=$(commit_of "$base")
b=$(commit_of "$head")
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
echo "before (A): $base = ${a:0:12}   after (B): $head = ${b:0:12}"
echo "filter: $filter   rounds: $rounds   bench args: ${bench_args[*]:-(none)}"
[[ "$a" == "$b" ]] && echo "note: both refs are the same commit (an A/A run: ratios show the noise)"

# Builds anvil_bench of commit $1 under $dir/$1 (once) and prints the binary's path.
build() {
  local c="$1" src="$dir/$1/src" bld="$dir/$1/build"
  if [[ ! -f "$src/CMakeLists.txt" ]]; then
    # A checkout of its own (objects shared with the repository, nothing copied), so that the
    # benchmark context's git revision (cmake/WriteGitRevision.cmake) names this commit.
    rm -rf "$src.tmp"
    git clone -q --shared --no-checkout "$repo" "$src.tmp"
    git -C "$src.tmp" checkout -q --detach "$c"
    mv "$src.tmp" "$src"
  fi
  # Relative paths from build to source are the same for every commit: with base_dir = $dir,
  # ccache hashes them alike, so unchanged files hit across commits.
  CCACHE_BASEDIR="$dir" cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DANVIL_WITH_CUDA="$cuda" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >"$bld.configure.log" 2>&1 ||
    { echo "compare_builds.sh: configuring ${c:0:12} failed, see $bld.configure.log" >&2; exit 1; }
  CCACHE_BASEDIR="$dir" cmake --build "$bld" -j "$jobs" --target anvil_bench >"$bld.build.log" 2>&1 ||
    { echo "compare_builds.sh: building ${c:0:12} failed, see $bld.build.log" >&2; exit 1; }
  echo "$bld/bench/anvil_bench"
}

out="$dir/results-$(date +%Y%m%d-%H%M%S)"
if [[ $dry == 1 ]]; then
  echo "would build: a checkout of <commit> in $dir/<commit>/src, then cmake --build $dir/<commit>/build --target anvil_bench (CUDA $cuda)"
  echo "would run: anvil_bench --benchmark_filter='$filter' --benchmark_out=$out/<A|B>-<round>.json --benchmark_out_format=json ${bench_args[*]:-}"
  exit 0
fi
echo "building ${a:0:12} ..."
bench_a=$(build "$a")
echo "building ${b:0:12} ..."
bench_b=$(build "$b")
[[ $build_only == 1 ]] && { echo "built: $bench_a $bench_b"; exit 0; }
mkdir -p "$out"

# One run of side $1 (A or B) in round $2.
run() {
  local side="$1" round="$2" bin
  bin=$([[ $side == A ]] && echo "$bench_a" || echo "$bench_b")
  "$bin" --benchmark_filter="$filter" --benchmark_out="$out/$side-$round.json" \
    --benchmark_out_format=json "${bench_args[@]}" >"$out/$side-$round.log" 2>&1 ||
    { echo "compare_builds.sh: $side round $round failed, see $out/$side-$round.log" >&2; exit 1; }
}
for ((r = 1; r <= rounds; ++r)); do
  if ((r % 2)); then run A "$r"; run B "$r"; else run B "$r"; run A "$r"; fi
  echo "round $r/$rounds done"
done

python3 - "$out" "$rounds" "$base ${a:0:12}" "$head ${b:0:12}" <<'EOF' | tee "$out/ratios.md"
import json, statistics, sys
out, rounds, label_a, label_b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def times(side, r):
    with open(f"{out}/{side}-{r}.json") as f:
        data = json.load(f)
    res = {}
    for bm in data["benchmarks"]:
        if bm.get("run_type", "iteration") != "iteration" or bm.get("error_occurred"):
            continue  # aggregates are recomputed here; skipped runs have no time
        res.setdefault(bm["name"], []).append(bm["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[bm["time_unit"]])
    return {k: statistics.median(v) for k, v in res.items()}

a = [times("A", r) for r in range(1, rounds + 1)]
b = [times("B", r) for r in range(1, rounds + 1)]
names = sorted(set().union(*a, *b))
print(f"A = {label_a}, B = {label_b}; real time per iteration, {rounds} interleaved rounds\n")
print("| benchmark | A median (ms) | B median (ms) | B/A per round: median | min | max |")
print("|---|---:|---:|---:|---:|---:|")
for n in names:
    pairs = [(x[n], y[n]) for x, y in zip(a, b) if n in x and n in y]
    if not pairs:
        print(f"| {n} | - | - | missing on one side | | |")
        continue
    ratios = [y / x for x, y in pairs]
    ma = statistics.median(x for x, _ in pairs) * 1e3
    mb = statistics.median(y for _, y in pairs) * 1e3
    print(f"| {n} | {ma:.4g} | {mb:.4g} | {statistics.median(ratios):.3f} | {min(ratios):.3f} | "
          f"{max(ratios):.3f} |")
EOF
echo "raw results: $out"
