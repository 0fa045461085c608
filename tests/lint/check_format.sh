#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The format check (CTest format_check): every git-tracked C++/CUDA file is formatted as the root
# .clang-format says, i.e. `clang-format --dry-run --Werror` reports nothing. Fix with
#   git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i
# Usage: check_format.sh [REPO_ROOT]   (exit 1 on a violation, 2 when clang-format is missing)
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"
command -v clang-format >/dev/null ||
  { echo "check_format: clang-format is not installed (scripts/install_deps.sh)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.hpp' '*.cc')
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check_format: the files above are not clang-formatted ($(clang-format --version))" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted ($(clang-format --version))"
