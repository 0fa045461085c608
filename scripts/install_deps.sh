#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs anvil's build and run dependencies from Debian 12 packages (see docs/spec/toolchain.md).
# Idempotent and fast when everything is present: apt is only touched for missing packages.
# Needs root (or sudo). The CUDA toolkit is not a Debian package here: it is preinstalled on the
# machines that have it, and the build skips the CUDA backend where it is absent.
#   scripts/install_deps.sh [--dry-run]   (--dry-run: print the apt command it would run, run none)
set -euo pipefail
dry_run=0
[ "${1:-}" = --dry-run ] && dry_run=1

packages=(
  g++ cmake ninja-build                 # toolchain
  libeigen3-dev libdnnl-dev             # CPU kernel libraries
  ocl-icd-opencl-dev                    # dnnl-config.cmake finds OpenCL (only Recommended)
  libbenchmark-dev libbenchmark-tools   # benchmarks and compare.py
  catch2                                # tests (v2)
  libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  python3-matplotlib python3-scipy      # report plots, compare.py statistics
  clang libclang-rt-14-dev              # libFuzzer for the dataset readers (scripts/fuzz.sh)
  clang-format clang-tidy               # format_check (CTest) and the clang-tidy stage (scripts/test.sh)
  dataset-fashion-mnist                 # loader tests and the training CLI
  xz-utils                              # scripts/gpu_kit.sh archives (CTest gpu_kit)
  libopenmpi-dev openmpi-bin            # distributed training: the mpi backend, mpirun (docs/distributed.md)
  doxygen                               # the API reference, CTest docs_api_reference (docs/library.md)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#packages[@]} packages already installed (no apt action)"
  exit 0
fi

if [[ $dry_run -eq 1 ]]; then
  echo "install_deps: would run as root: apt-get update; apt-get install -y --no-install-recommends ${missing[*]}"
  exit 0
fi
as_root=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    as_root=(sudo)
  else
    echo "install_deps: missing ${missing[*]}; run as root to install them" >&2
    exit 1
  fi
fi

echo "install_deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
