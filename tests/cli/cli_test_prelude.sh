# SPDX-License-Identifier: Apache-2.0
# What the `anvil` command-line test scripts share, sourced with their arguments (ANVIL): strict
# mode, the binary's path, a scratch folder removed on exit, and fail(), which counts a failure
# in `failures` and lets the script go on.
set -uo pipefail
anvil=${1:?usage: $(basename "$0") path/to/anvil}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
