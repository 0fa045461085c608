#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the peer frameworks the benchmark report compares anvil with (docs/spec/toolchain.md,
# "The peers"): PyTorch (`torch`) and TensorFlow/Keras (`tensorflow-cpu`) from PyPI, with pip, into
# the python3 first on PATH. Comparison scripts only: anvil never builds against them.
#   scripts/install_peers.sh [--dry-run] [pytorch,tensorflow]   (--dry-run: say what pip would install)
# A peer that is already importable is left alone; one that fails to install (no network, no pip)
# is reported and skipped, and the report then shows only the peers that are present.
set -uo pipefail
dry_run=0
[ "${1:-}" = --dry-run ] && { dry_run=1; shift; }
want="${1:-pytorch,tensorflow}"
py=python3
status=0
IFS=, read -r -a peers <<< "$want"
for peer in "${peers[@]}"; do
  case "$peer" in
    pytorch) module=torch; package=torch ;;
    tensorflow) module=tensorflow; package=tensorflow-cpu ;;
    *) echo "install_peers: unknown peer '$peer' (pytorch, tensorflow)" >&2; exit 2 ;;
  esac
  if "$py" -c "import $module" >/dev/null 2>&1; then
    echo "install_peers: $peer present ($("$py" -c "import $module; print($module.__version__)" 2>/dev/null))"
    continue
  fi
  if [ "$dry_run" = 1 ]; then
    echo "install_peers: would run: $py -m pip install $package (a few minutes; several hundred MB)"
    continue
  fi
  echo "install_peers: installing $package with pip (a few minutes; several hundred MB)"
  if ! "$py" -m pip install -q "$package"; then
    echo "install_peers: could not install $package; the report will have no $peer column" >&2
    status=1
  fi
done
exit $status
