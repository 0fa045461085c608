#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's test command (README): install the Debian dependencies (idempotent), configure
# and build build/ (Ninja, Release, warnings as errors), run clang-tidy on the whole tree
# (scripts/tidy.sh --dirs), run every test (format and layering checks included),
# check the installed package with the example, then the sanitizer build.
#   ANVIL_CI_SANITIZE=0   skip the ASan/UBSan stage (it rebuilds everything once more)
#   ANVIL_CI_TSAN=0       skip the ThreadSanitizer stage (scripts/tsan.sh: libanvil and the
#                         threaded tests only, CUDA off; killed after ANVIL_CI_TSAN_LIMIT s, 1800)
#   ANVIL_CI_FUZZ=0       skip the bounded libFuzzer run of the file readers (scripts/fuzz.sh)
#   ANVIL_CI_TIDY=0       skip the clang-tidy stage (it checks only the units that changed since
#                         .ci/tidy_clean.txt recorded them clean: Note [Tidy cache])
#   ANVIL_JOBS=N          parallel build/test jobs (default: nproc)
#   ANVIL_TEST_BUILD_DIR  build directory (default: build)
#   --quick               install_deps, configure, build and ctest only (no tidy, fuzz, install
#                         check, sanitizers): about 15 minutes cold on 2 cores
#   --dry-run             print the stages these settings run, and exit
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${ANVIL_JOBS:-$(nproc)}
build=${ANVIL_TEST_BUILD_DIR:-build}
dry_run=0
quick=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    --quick) export ANVIL_CI_TIDY=0 ANVIL_CI_FUZZ=0 ANVIL_CI_SANITIZE=0 ANVIL_CI_TSAN=0 quick=1 ;;
    -h|--help) sed -n '3,17p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done
if [ "$dry_run" = 1 ]; then
  # Every stage, in order, with whether these settings run it.
  on() { [[ "${!1:-1}" != 0 ]] && echo "run" || echo "skipped ($1=0)"; }
  echo "test.sh plan (--dry-run)$([[ $quick = 1 ]] && echo ", --quick"):"
  row() { printf '  %-40s %s\n' "$1" "$2"; }
  row "install_deps" "run (apt-get as root when packages are missing)"
  row "configure $build/ (Release, -Werror)" run
  row "build (-j $jobs)" run
  row "clang-tidy (cache .ci/tidy_clean.txt)" "$(on ANVIL_CI_TIDY)"
  row "ctest (-j $jobs)" run
  row "fuzz (12 s per reader)" "$(on ANVIL_CI_FUZZ)"
  row "check_install" "$([[ $quick = 1 ]] && echo "skipped (--quick)" || echo run)"
  row "sanitize (ASan/UBSan rebuild)" "$(on ANVIL_CI_SANITIZE)"
  row "tsan (ThreadSanitizer rebuild)" "$(on ANVIL_CI_TSAN)"
  exit 0
fi

stage_start=0
stage() { stage_name=$1; stage_start=$SECONDS; echo "=== $stage_name"; }
stage_done() { echo "=== $stage_name: $((SECONDS - stage_start)) s"; }

stage "install_deps"
bash scripts/install_deps.sh
stage_done

stage "configure $build/"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DANVIL_WERROR=ON
stage_done

stage "build"
cmake --build "$build" -j "$jobs"
stage_done

if [[ "${ANVIL_CI_TIDY:-1}" != 0 ]]; then
  stage "clang-tidy (scripts/tidy.sh --dirs: the whole tree less the units .ci/tidy_clean.txt holds clean)"
  bash scripts/tidy.sh --dirs --build "$build" --jobs "$jobs" --cache .ci/tidy_clean.txt
  stage_done
fi

stage "ctest"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
stage_done

if [[ "${ANVIL_CI_FUZZ:-1}" != 0 ]]; then
  stage "fuzz (IDX, CIFAR, safetensors, PTB and IMDB readers, 12 s each)"
  bash scripts/fuzz.sh --seconds 12
  stage_done
fi

if [[ $quick = 0 ]]; then
  stage "check_install"
  ANVIL_BUILD_DIR="$(cd "$build" && pwd)" bash scripts/check_install.sh
  stage_done
fi

if [[ "${ANVIL_CI_SANITIZE:-1}" != 0 ]]; then
  stage "sanitize"
  bash scripts/sanitize.sh
  stage_done
fi
if [[ "${ANVIL_CI_TSAN:-1}" != 0 ]]; then
  stage "tsan (threaded tests under ThreadSanitizer)"
  timeout "${ANVIL_CI_TSAN_LIMIT:-1800}" bash scripts/tsan.sh
  stage_done
fi
echo "=== all stages passed in $SECONDS s"
