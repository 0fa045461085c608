#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# clang-tidy (the root .clang-tidy: bugprone-*, performance-*, the house naming) over the C++
# sources of a build's compile_commands.json: every .cpp under ANVIL_TIDY_DIRS (default: the whole
# tree) plus the .cpp files changed against the base (a changed header brings the .cpp beside it).
# --dirs checks only the folders (what CI runs, scripts/test.sh: about 15 CPU-minutes for the
# whole tree, docs/style.md); --changed only the changed files (quick, before a commit); --all
# every .cpp of the database. The .cu files are not checked (nvcc's commands; docs/style.md).
#   scripts/tidy.sh [--all|--dirs|--changed] [--build DIR] [--base REF] [--jobs N] [--dry-run]
#                   [--cache FILE] [--record]
#   --cache FILE      skip the units whose key (scripts/tidy_cache.py, Note [Tidy cache]) FILE lists
#                     as clean: what CI does with .ci/tidy_clean.txt
#   --record          after a clean run, write the keys of every unit checked or skipped to the
#                     cache file (default .ci/tidy_clean.txt): run `scripts/tidy.sh --dirs --record`
#                     before a commit so that CI checks only what changed after it
#   ANVIL_TIDY_DIRS   folders always checked in full (default: all of them)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ANVIL_TEST_BUILD_DIR:-build}
base=${ANVIL_TIDY_BASE:-}
jobs=${ANVIL_JOBS:-$(nproc)}
all=0
dirs_only=0
dry_run=0
cache=""
record=0
# Every folder with C++ sources: the whole tree passes.
dirs=${ANVIL_TIDY_DIRS:-"engine kernels data models harness tools bench tests"}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --all) all=1 ;;
    --dirs) dirs_only=1 ;;
    --changed) dirs="" ;;
    --build) build=$2; shift ;;
    --base) base=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --dry-run) dry_run=1 ;;
    --cache) cache=$2; shift ;;
    --record) record=1 ;;
    -h|--help) sed -n '3,16p' "$0"; exit 0 ;;
    *) echo "tidy.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

if [[ "$dirs_only" = 1 ]]; then
  base=""
elif [[ -z "$base" ]]; then
  for ref in origin/main main; do
    if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then base=$ref; break; fi
  done
fi
if [[ "$all" = 0 && -z "$dirs" && -z "$base" ]]; then
  echo "tidy.sh: --changed needs a base branch (origin/main, main or --base REF)" >&2; exit 2
fi
if [[ "$dry_run" = 1 ]]; then
  echo "tidy.sh plan (--dry-run): clang-tidy over $([[ $all = 1 ]] && echo "every file" ||
    echo "$([[ -n $base ]] && echo "the files changed against $base")$([[ -n $base && -n $dirs ]] &&
      echo " and ")$dirs") of $build/compile_commands.json"
  exit 0
fi
command -v clang-tidy >/dev/null ||
  { echo "tidy.sh: clang-tidy is not installed (scripts/install_deps.sh)" >&2; exit 2; }
db="$build/compile_commands.json"
[[ -f "$db" ]] || { echo "tidy.sh: $db is missing: configure $build/ first" >&2; exit 2; }
# The one generated header the sources include (CMakeLists.txt), in case $build is not built.
if [[ ! -f "$build/generated/anvil_git_rev.h" ]]; then
  cmake --build "$build" --target anvil_git_revision >/dev/null
fi

# Every .cpp of the compilation database, relative to the repository.
mapfile -t known < <(python3 -c '
import json, os, sys
root = os.getcwd()
for e in json.load(open(sys.argv[1])):
    f = os.path.relpath(os.path.join(e["directory"], e["file"]), root)
    if f.endswith(".cpp") and not f.startswith(".."):
        print(f)' "$db" | sort -u)

if [[ "$all" = 1 ]]; then
  files=("${known[@]}")
else
  want=()
  for d in $dirs; do want+=("$d/"); done
  if [[ -n "$base" ]]; then
    echo "tidy.sh: files changed against $base ($(git rev-parse --short "$(git merge-base HEAD "$base")"))"
    while IFS= read -r f; do
      case "$f" in
        *.cpp) want+=("$f") ;;
        *.h) want+=("${f%.h}.cpp") ;;
      esac
    done < <(git diff --name-only --diff-filter=d "$(git merge-base HEAD "$base")" -- \
               '*.cpp' '*.h'; git ls-files --others --exclude-standard -- '*.cpp' '*.h')
  else
    echo "tidy.sh: checking $dirs$([[ $dirs_only = 1 ]] || echo " (no base branch: origin/main, main)")"
  fi
  files=()
  for f in "${known[@]}"; do
    for w in "${want[@]}"; do
      if [[ "$f" == "$w" || ( "$w" == */ && "$f" == "$w"* ) ]]; then files+=("$f"); break; fi
    done
  done
fi
[[ "$record" = 1 && -z "$cache" ]] && cache=.ci/tidy_clean.txt
all_files=("${files[@]}")
keyed=()
declare -A cached_file=()
if [[ -n "$cache" && ${#files[@]} -gt 0 ]]; then
  # Note [Tidy cache]: the units whose key the cache lists were found clean as they are now.
  mapfile -t keyed < <(python3 scripts/tidy_cache.py keys "$build" "${files[@]}")
  declare -A clean=()
  if [[ -f "$cache" ]]; then
    while read -r k _; do [[ -n "$k" ]] && clean[$k]=1; done < "$cache"
  fi
  for line in "${keyed[@]}"; do
    [[ -n "${clean[${line%% *}]:-}" ]] && cached_file[${line#* }]=1
  done
  files=()
  for f in "${all_files[@]}"; do [[ -n "${cached_file[$f]:-}" ]] || files+=("$f"); done
  echo "tidy.sh: $((${#all_files[@]} - ${#files[@]})) of ${#all_files[@]} files unchanged since" \
    "$cache recorded them clean (Note [Tidy cache]); checking the other ${#files[@]}"
fi
passed=$(mktemp)
trap 'rm -f "$passed"' EXIT
# With --record, the keys of the units found clean: those checked clean now and those the cache
# already held. A unit with findings is left out, so the next run checks it again.
record_clean() {
  [[ "$record" = 1 ]] || return 0
  declare -A ok=()
  for f in "${all_files[@]}"; do [[ -n "${cached_file[$f]:-}" ]] && ok[$f]=1; done
  while IFS= read -r f; do ok[$f]=1; done < "$passed"
  for line in "${keyed[@]}"; do [[ -n "${ok[${line#* }]:-}" ]] && echo "$line"; done |
    sort -k2 > "$cache"
  echo "tidy.sh: recorded $(wc -l < "$cache") clean units in $cache"
}
echo "tidy.sh: ${#files[@]} files, $jobs jobs ($(clang-tidy --version | grep -o 'version [0-9.]*'))"
[[ ${#files[@]} -gt 0 ]] || { record_clean; exit 0; }
start=$SECONDS
# One clang-tidy per unit; a clean unit's name goes to $passed (short appends do not interleave).
printf '%s\n' "${files[@]}" |
  xargs -P "$jobs" -I{} sh -c 'clang-tidy -p "$1" --quiet --extra-arg=-Wno-error \
    --extra-arg=-Wno-unknown-warning-option "$2" 2>/dev/null && echo "$2" >> "$3"' \
    tidy "$build" {} "$passed" || true
record_clean
if [[ $(wc -l < "$passed") -eq ${#files[@]} ]]; then
  echo "tidy.sh: clean, $((SECONDS - start)) s"
else
  echo "tidy.sh: clang-tidy found problems (above) in $((${#files[@]} - $(wc -l < "$passed")))" \
    "of ${#files[@]} files, $((SECONDS - start)) s" >&2
  exit 1
fi
