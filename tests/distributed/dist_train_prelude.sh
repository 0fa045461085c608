# SPDX-License-Identifier: Apache-2.0
# What the `anvil train` scripts under mpirun share, sourced with their arguments (MPIRUN ANVIL):
# strict mode, the two paths, a scratch folder removed on exit, LSAN_OPTIONS passed to the ranks
# in sanitizer builds, fail() that ends the script, field() that evaluates a Python expression
# on `d`, a JSON file's content, and same_test_loss() for the resume checks.
set -uo pipefail
mpirun=$1 anvil=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lsan=(); [[ -n ${LSAN_OPTIONS:-} ]] && lsan=(-x LSAN_OPTIONS)  # sanitizer builds
fail() { echo "FAIL: $*"; exit 1; }
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
# same_test_loss UNINTERRUPTED.json RESUMED.json: both JSON logs end with the same test loss to
# the bit (fails otherwise); sets `loss` to it.
same_test_loss() {
  loss=$(field "$1" "repr(d['result']['test_loss'])")
  local resumed
  resumed=$(field "$2" "repr(d['result']['test_loss'])")
  [[ "$loss" == "$resumed" ]] || fail "resumed test loss $resumed differs from uninterrupted $loss"
}
