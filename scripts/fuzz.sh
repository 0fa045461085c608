#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets of every reader (tests/fuzz/fuzz_<target>.cpp: IDX raw and gzip,
# CIFAR-10, safetensors/checkpoint, PTB, IMDB) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each for a bounded time over a copy of its committed seed
# corpus (tests/fuzz/corpus/<target>/), so new inputs never dirty the repository. Exits non-zero
# when a target crashes, leaks, trips a sanitizer, throws anything but anvil::Error, or hangs;
# the input that did it is kept in <build>/artifacts/<target>/.
#
#   scripts/fuzz.sh [--seconds N | --long] [--build-dir DIR] [--keep-corpus] [TARGET ...]
#     --seconds N     fuzzing time per target (default 30)
#     --long          10 million executions per target (-runs=10000000, no time limit), for the
#                     periodic long run recorded in docs/testing.md; prints a summary table.
#                     With --seconds N as well, each target also stops after N s (status
#                     "time cap" when it ran fewer than 10 million). A target stopped by SIGINT
#                     (kill -INT its fuzz_<target> process) is "interrupted", not a crash: the
#                     table keeps its count and the next target runs; the script then exits 3
#     --build-dir DIR where the binaries and artifacts go (default build-fuzz)
#     --keep-corpus   keep the working corpus (printed) instead of deleting it
#     TARGET          idx, cifar, safetensors, ptb, imdb (default: all)
#   ANVIL_FUZZ_CXX    the compiler (default: clang++, else the newest clang++-N found)
#   ANVIL_FUZZ_US_PER_BYTE  the performance guard: an input taking longer than 1 s + this many
#                     microseconds per byte fails (default 10; see "Performance guard" below)
#
# Reproduce a finding:  <build>/fuzz_<target> <build>/artifacts/<target>/crash-...
#
# The targets are built from the readers' sources and engine/core only, not from the whole of
# libanvil (tests/fuzz/fuzz_support.cpp says which two engine symbols it stands in for), so the
# build takes seconds. Needs clang and its libFuzzer runtime (Debian 12: the packages clang and
# libclang-rt-14-dev, which clang only recommends) and zlib (zlib1g-dev).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=30
seconds_given=0
long=0
build=build-fuzz
keep=0
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds=$2; seconds_given=1; shift 2 ;;
    --seconds=*) seconds=${1#*=}; seconds_given=1; shift ;;
    --build-dir) build=$2; shift 2 ;;
    --build-dir=*) build=${1#*=}; shift ;;
    --keep-corpus) keep=1; shift ;;
    --long) long=1; shift ;;
    -h|--help) sed -n '3,30p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=(idx cifar safetensors ptb imdb)
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 1 ]] || { echo "fuzz: --seconds must be a positive integer" >&2; exit 2; }
for t in "${targets[@]}"; do
  [[ -f tests/fuzz/fuzz_$t.cpp ]] || { echo "fuzz: no target '$t' (tests/fuzz/fuzz_$t.cpp)" >&2; exit 2; }
done

cxx=${ANVIL_FUZZ_CXX:-}
if [[ -z "$cxx" ]]; then
  if command -v clang++ >/dev/null; then
    cxx=clang++
  else
    cxx=$(compgen -c clang++- | grep -E '^clang\+\+-[0-9]+$' | sort -t- -k2 -n | tail -1 || true)
  fi
fi
[[ -n "$cxx" ]] && command -v "$cxx" >/dev/null ||
  { echo "fuzz: clang++ not found (Debian: apt-get install clang)" >&2; exit 2; }

mkdir -p "$build/obj"
# The libFuzzer runtime is a separate package on Debian (libclang-rt-<N>-dev, only recommended by
# clang, so an install with --no-install-recommends lacks it): probe for it.
echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' >"$build/obj/probe.cpp"
if ! "$cxx" -fsanitize=fuzzer "$build/obj/probe.cpp" -o "$build/obj/probe" 2>"$build/obj/probe.err"; then
  version=$("$cxx" --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p')
  echo "fuzz: $cxx cannot link -fsanitize=fuzzer (Debian: apt-get install libclang-rt-${version:-N}-dev):" >&2
  head -5 "$build/obj/probe.err" >&2
  exit 2
fi
flags=(-std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
       -fno-sanitize-recover=undefined -I.)
# Everything but the targets' entry files is compiled once, instrumented for coverage
# (fuzzer-no-link), and linked into each target.
sources=(data/idx.cpp data/cifar.cpp data/file_bytes.cpp data/ptb.cpp data/imdb.cpp
         engine/core/safetensors.cpp engine/core/json_reader.cpp engine/core/reader_budget.cpp
         engine/core/random.cpp engine/core/tensor.cpp
         engine/core/transpose.cpp engine/core/cpu_allocator.cpp engine/core/views.cpp
         tests/fuzz/fuzz_support.cpp)
echo "=== fuzz: building with $cxx ($("$cxx" --version | head -1))"
objects=()
for src in "${sources[@]}"; do
  obj="$build/obj/$(echo "$src" | tr '/' '_').o"
  "$cxx" "${flags[@]}" -fsanitize=fuzzer-no-link -c "$src" -o "$obj"
  objects+=("$obj")
done
for t in "${targets[@]}"; do
  "$cxx" "${flags[@]}" -fsanitize=fuzzer "tests/fuzz/fuzz_$t.cpp" "${objects[@]}" -lz -o "$build/fuzz_$t"
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
work=$(mktemp -d "${TMPDIR:-/tmp}/anvil_fuzz.XXXXXX")
[[ $keep == 1 ]] || trap 'rm -rf "$work"' EXIT

# Inputs up to this many bytes per target. The compressed reader (IDX, which gunzips) gets more
# room, so that a gzip stream can carry a real header and several deflate blocks. The JSON
# readers (safetensors header, IMDB word index) get 1 MiB: room for headers thousands of entries
# wide and nesting far past the depth cap of 64 (Note [Linear JSON]), the inputs on which a
# quadratic parser or a recursive message took minutes or crashed.
max_len_of() {
  case "$1" in
    idx) echo 262144 ;;
    safetensors | imdb) echo 1048576 ;;
    *) echo 16384 ;;
  esac
}

# Performance guard: the readers are linear in their input. Two bounds, both failures:
#   - in the harnesses (tests/fuzz/fuzz_guard.h), an input of n bytes that takes longer than
#     1 s + ANVIL_FUZZ_US_PER_BYTE microseconds per byte (default 10: 11.5 s for 1 MiB; the
#     readers need about 1 us per byte under ASan + UBSan: 6.4 s for a 5.8 MB header) traps;
#     IDX is left out there, as 1 byte of gzip may inflate to 1000 (bounded by max_bytes);
#   - libFuzzer's -timeout, the same bound at the target's -max_len and at least 10 s, for any
#     input that never returns (IDX included).
us_per_byte=${ANVIL_FUZZ_US_PER_BYTE:-10}
[[ "$us_per_byte" =~ ^[0-9]+$ && "$us_per_byte" -ge 1 ]] ||
  { echo "fuzz: ANVIL_FUZZ_US_PER_BYTE must be a positive integer" >&2; exit 2; }
export ANVIL_FUZZ_US_PER_BYTE=$us_per_byte
timeout_of() {
  local t=$(( $(max_len_of "$1") * us_per_byte / 1000000 + 2 ))
  echo $(( t < 10 ? 10 : t ))
}

failed=()
summary="$build/fuzz_summary.txt"
printf '%-12s %12s %8s %10s %8s  %s\n' target executions crashes seconds peak_MB status >"$summary"
interrupted=()
for t in "${targets[@]}"; do
  corpus="$work/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  if [[ -d tests/fuzz/corpus/$t ]]; then cp tests/fuzz/corpus/"$t"/* "$corpus"/; fi
  if [[ $long == 1 ]]; then
    budget=(-runs=10000000)
    [[ $seconds_given == 1 ]] && budget+=(-max_total_time="$seconds")
    echo "=== fuzz: $t for 10000000 executions$([[ $seconds_given == 1 ]] && echo " (at most ${seconds} s)") over $(ls "$corpus" | wc -l) seed inputs"
  else
    budget=(-max_total_time="$seconds")
    echo "=== fuzz: $t for ${seconds} s over $(ls "$corpus" | wc -l) seed inputs"
  fi
  # -timeout: the performance guard above (an input slower than us_per_byte per byte fails).
  start=$(date +%s)
  # A run stopped by SIGINT exits 72 after "libFuzzer: run interrupted" (clang 14's libFuzzer has
  # no flag to change that code); findings exit 1 (sanitizers), 70 (timeout), 71 (out of memory)
  # or 77, and print no such line.
  rc=0
  "$build/fuzz_$t" "$corpus" "${budget[@]}" -max_len="$(max_len_of "$t")" -timeout="$(timeout_of "$t")" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    >"$build/fuzz_$t.log" 2>&1 || rc=$?
  status=done
  if [[ $rc == 72 ]] && grep -q 'libFuzzer: run interrupted' "$build/fuzz_$t.log"; then
    crashes=0
    status=interrupted
    interrupted+=("$t")
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)' "$build/fuzz_$t.log" || true
    echo "=== fuzz: $t interrupted (no finding; corpus now $(ls "$corpus" | wc -l) inputs)"
  elif [[ $rc == 0 ]]; then
    crashes=0
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$build/fuzz_$t.log" || true
    echo "=== fuzz: $t passed (corpus now $(ls "$corpus" | wc -l) inputs)"
  else
    crashes=1
    tail -n 60 "$build/fuzz_$t.log"
    echo "=== fuzz: $t FAILED: log $build/fuzz_$t.log, input in $artifacts/" >&2
    failed+=("$t")
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz_$t.log" | tail -1)
  peak=$(sed -n 's/^stat::peak_rss_mb: *//p' "$build/fuzz_$t.log" | tail -1)
  [[ $crashes == 1 ]] && status=FAILED
  [[ $long == 1 && $status == done && ${execs:-0} -lt 10000000 ]] && status="time cap"
  printf '%-12s %12s %8s %10s %8s  %s\n' "$t" "${execs:-?}" "$crashes" "$(($(date +%s) - start))" \
    "${peak:-?}" "$status" >>"$summary"
done
cat "$summary"
[[ $keep == 1 ]] && echo "fuzz: working corpus kept in $work"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
if [[ ${#interrupted[@]} -gt 0 ]]; then
  echo "fuzz: no finding, but interrupted: ${interrupted[*]} (see the table)" >&2
  exit 3
fi
if [[ $long == 1 ]]; then
  echo "fuzz: all targets passed (${targets[*]}; executions in the table)"
else
  echo "fuzz: all targets passed (${targets[*]}, ${seconds} s each)"
fi
