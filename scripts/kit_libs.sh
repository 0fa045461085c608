# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by scripts/gpu_kit.sh and scripts/gpu_kit_mpi.sh: the one rule for which shared
# libraries a GPU kit carries. The GPU machine has its own C/C++ runtime (newer than ours) and its
# own CUDA libraries (toolkit or PyTorch's wheels), and libanvil* travel in build/lib.
#
#   kit_copy_libs DEST SKIP_DIR FILE...   copies every other library that FILE... load into DEST,
#                                         except those already in SKIP_DIR ("" for none)
kit_copy_libs() {
  local dest=$1 skip=$2
  shift 2
  ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
    while read -r name path; do
      case "$name" in
        libanvil*|libc.so*|libm.so*|libstdc++*|libgcc_s*|libdl.so*|libpthread*|librt.so*|ld-linux*) ;;
        libcuda*|libcublas*|libnv*|libcudnn*|libnccl*) ;;
        *) [ -n "$skip" ] && [ -e "$skip/$name" ] || cp -L "$path" "$dest/$name" ;;
      esac
    done
}
