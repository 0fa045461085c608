#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the installed package the way a user consumes it: installs anvil into a temporary
# prefix, then configures, builds and runs examples/train_fcn against that prefix with
# find_package(anvil). Fails if the example cannot find, compile, link or run.
#
#   ANVIL_BUILD_DIR   an already configured and built anvil tree to install from (scripts/test.sh
#                     passes build/ to save a second full build); default: configure and build
#                     build-install/ with tests and benchmarks off
#   ANVIL_KEEP_PREFIX 1 to keep the temporary prefix and print where it is
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)

build=${ANVIL_BUILD_DIR:-}
if [[ -z "$build" ]]; then
  build=$root/build-install
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DANVIL_BUILD_TESTS=OFF -DANVIL_BUILD_BENCH=OFF
  cmake --build "$build" -j "$jobs"
fi

prefix=$(mktemp -d -t anvil-prefix.XXXXXX)
example_build=$(mktemp -d -t anvil-example.XXXXXX)
cleanup() {
  rm -rf "$example_build"
  if [[ "${ANVIL_KEEP_PREFIX:-0}" == 1 ]]; then echo "check_install: prefix kept at $prefix"
  else rm -rf "$prefix"; fi
}
trap cleanup EXIT

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libanvil.so' -print -quit)")
echo "check_install: installed into $prefix (libraries in ${libdir#"$prefix"/})"
for f in include/anvil/anvil.h include/anvil/engine/core/tensor.h; do
  [[ -f "$prefix/$f" ]] || { echo "check_install: $f was not installed" >&2; exit 1; }
done
[[ -f "$(find "$prefix" -name anvilConfig.cmake -print -quit)" ]] ||
  { echo "check_install: anvilConfig.cmake was not installed" >&2; exit 1; }
# The license travels with the package: the text, and its SPDX id in the package configuration.
cmp -s LICENSE "$prefix/share/doc/anvil/LICENSE" ||
  { echo "check_install: share/doc/anvil/LICENSE was not installed" >&2; exit 1; }
grep -q 'set(anvil_LICENSE "Apache-2.0")' "$(find "$prefix" -name anvilConfig.cmake -print -quit)" ||
  { echo "check_install: anvilConfig.cmake does not set anvil_LICENSE" >&2; exit 1; }
# The CUDA backend, when built, must sit beside libanvil and resolve all its libraries.
if [[ -f "$libdir/libanvil_cuda.so" ]]; then
  if ldd "$libdir/libanvil_cuda.so" | grep -q 'not found'; then
    ldd "$libdir/libanvil_cuda.so" >&2
    echo "check_install: libanvil_cuda.so has unresolved libraries" >&2
    exit 1
  fi
  echo "check_install: libanvil_cuda.so installed beside libanvil"
fi
if ldd "$libdir/libanvil.so" | grep -q libcudart; then
  echo "check_install: libanvil links cudart (Note [Lazy CUDA loading])" >&2
  exit 1
fi

# Every installed header compiles on its own against the prefix alone: catches a public header
# that includes one that is not installed (kernels/cpu/..., a third-party header).
failed=$(cd "$prefix/include/anvil" && find . -name '*.h' | sed 's|^\./||' | sort |
  xargs -P "$jobs" -I{} sh -c 'echo "#include \"{}\"" |
    c++ -std=c++20 -fsyntax-only -I"$1/include/anvil" -I"$1/include" -x c++ - 2>/dev/null ||
    echo "{}"' _ "$prefix")
if [[ -n "$failed" ]]; then
  echo "check_install: these installed headers do not compile on their own:" >&2
  echo "$failed" >&2
  exit 1
fi
echo "check_install: $(find "$prefix/include/anvil" -name '*.h' | wc -l) installed headers compile on their own"

cmake -S "$root/examples/train_fcn" -B "$example_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$example_build" -j "$jobs"
"$example_build/train_fcn"
echo "check_install: OK"
