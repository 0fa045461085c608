#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the installed package the way a user consumes it: installs anvil into a temporary
# prefix, then configures, builds and runs examples/train_fcn against that prefix with
# find_package(anvil), and against the build folder itself (the build tree's export); builds a
# consumer that includes only <anvil/...> headers with pkg-config (anvil.pc). Checks the header
# layout (Note [Installed include prefix] in cmake/AnvilInstall.cmake): every installed header
# compiles alone with <prefix>/include as the only include path, the internal headers are not
# installed, and engine/, models/, data/ are not top-level include names. Fails if any of it
# does not hold.
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
for f in include/anvil/anvil.h include/anvil/engine/core/tensor.h include/anvil/data/idx.h \
         include/anvil/models/registry.h; do
  [[ -f "$prefix/$f" ]] || { echo "check_install: $f was not installed" >&2; exit 1; }
done
# The internal headers: the list in cmake/AnvilInstall.cmake, none of them installed.
internal=$(sed -n '/^set(_anvil_internal_headers/,/)/p' cmake/AnvilInstall.cmake | grep -o '[a-z_/]*\.h')
[[ $(echo "$internal" | wc -w) -ge 5 ]] || { echo "check_install: no internal header list" >&2; exit 1; }
for f in $internal; do
  [[ ! -e "$prefix/include/anvil/$f" ]] || { echo "check_install: internal $f was installed" >&2; exit 1; }
done
for d in engine models data; do
  [[ ! -e "$prefix/include/$d" ]] || { echo "check_install: include/$d is a top-level name" >&2; exit 1; }
done
if grep -rlE '#include "(engine|models|data)/' "$prefix/include/anvil" >&2; then
  echo "check_install: these installed headers include by a source path, not <anvil/...>" >&2
  exit 1
fi
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

# Every installed header compiles on its own against <prefix>/include alone: catches a public header
# that includes one that is not installed (kernels/cpu/..., a third-party header).
failed=$(cd "$prefix/include/anvil" && find . -name '*.h' | sed 's|^\./||' | sort |
  xargs -P "$jobs" -I{} sh -c 'echo "#include \"{}\"" |
    c++ -std=c++20 -fsyntax-only -I"$1/include" -x c++ - 2>/dev/null ||
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
echo "check_install: examples/train_fcn built and ran against the install tree"

# The build folder as a package: find_package(anvil) with anvil_DIR=<build>.
rm -rf "$example_build" && mkdir -p "$example_build"
cmake -S "$root/examples/train_fcn" -B "$example_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -Danvil_DIR="$(cd "$build" && pwd)" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON >/dev/null
cmake --build "$example_build" -j "$jobs"
"$example_build/train_fcn" >/dev/null
echo "check_install: examples/train_fcn built and ran against the build tree"

# pkg-config, and a consumer that includes only <anvil/...> headers (no umbrella). The same
# source with a top-level include name must not compile.
pc_dir=$(dirname "$(find "$prefix" -name anvil.pc -print -quit)")
[[ -f "$pc_dir/anvil.pc" ]] || { echo "check_install: anvil.pc was not installed" >&2; exit 1; }
export PKG_CONFIG_PATH="$pc_dir"
[[ "$(pkg-config --modversion anvil)" == "$(sed -n 's/^project(anvil VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)" ]] ||
  { echo "check_install: pkg-config --modversion anvil is $(pkg-config --modversion anvil)" >&2; exit 1; }
cat >"$example_build/prefixed.cpp" <<'CPP'
#include <anvil/data/loader.h>
#include <anvil/engine/nn/layers.h>
#include <anvil/engine/optim/optimizer.h>

#include <cstdio>
#include <memory>

int main() {
  using namespace anvil;
  auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(3, 2), nn::ReLU());
  data::DataLoader loader({Tensor::zeros({5, 3}), Tensor::zeros({5})}, {.batch = 2});
  optim::AdamW opt(net->parameters(), {.lr = 1e-3});
  int batches = 0;
  for (auto& batch : loader) batches += batch.inputs.size(0) > 0;
  std::printf("prefixed consumer: %lld parameters, %d batches\n",
              static_cast<long long>(net->num_parameters()), batches);
  return batches == 3 && net->num_parameters() == 8 ? 0 : 1;
}
CPP
# shellcheck disable=SC2046  # pkg-config's output is a list of flags
c++ "$example_build/prefixed.cpp" -o "$example_build/prefixed" $(pkg-config --cflags --libs anvil)
LD_LIBRARY_PATH="$libdir" "$example_build/prefixed"
sed 's|<anvil/data/loader.h>|<data/loader.h>|' "$example_build/prefixed.cpp" >"$example_build/unprefixed.cpp"
# shellcheck disable=SC2046
if c++ -fsyntax-only "$example_build/unprefixed.cpp" $(pkg-config --cflags anvil) 2>/dev/null; then
  echo "check_install: <data/loader.h> resolves: engine/, models/, data/ leak as include names" >&2
  exit 1
fi
echo "check_install: pkg-config consumer with <anvil/...> includes built and ran"
echo "check_install: OK"
