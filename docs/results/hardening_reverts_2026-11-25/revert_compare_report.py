#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Applies one "revert of the fix's core line" to bench/peers/compare_report.py, runs the CTest's script, restores.
import subprocess, sys, pathlib
f = pathlib.Path("bench/peers/compare_report.py")
orig = f.read_text()
mutants = {
  "unpaired ratio of medians (pre-fix pool)": ("        ratio = stratified_median(strata)\n",
     "        ratio = statistics.median(x for run in c['runs'] for x in run['anvil']) / statistics.median(x for run in c['runs'] for x in run['torch'])\n"),
  "paired but not stratified (plain median of pooled rounds)": ("        ratio = stratified_median(strata)\n",
     "        ratio = statistics.median(q for s in strata for q in s)\n"),
  "runs of different machines pooled": ("        elif ident != first[1]:\n", "        elif False:\n"),
}
for name, (a, b) in mutants.items():
    assert orig.count(a) == 1, name
    f.write_text(orig.replace(a, b))
    try:
        r = subprocess.run([sys.executable, "tests/report/test_compare_pool.py", str(f)], capture_output=True, text=True)
    finally:
        f.write_text(orig)
    out = (r.stdout + r.stderr).strip().splitlines()
    fails = [l for l in out if l.strip() and not l.startswith("compare_report")]
    print(f"== {name}: rc {r.returncode}")
    for l in (fails or out)[:4]: print("   ", l[:220])
# summarize (1eeaa58): one peak for both sides, rounds paired by number.
mutants2 = {
  "PyTorch scored against its own 242 GFLOP/s default (two peaks)": ("    return pct * used / peak\n", "    return pct\n"),
  "rounds not checked to pair up": ("        if ra != rt and g[\"anvil\"] and g[\"torch\"]:\n", "        if False:\n"),
  "rounds kept in file order, not paired by number": ("            g[side] = [e for _, e in sorted(g[side], key=lambda re: re[0])]\n", "            g[side] = [e for _, e in g[side]]\n"),
}
for name, (a, b) in mutants2.items():
    assert orig.count(a) == 1, name
    f.write_text(orig.replace(a, b))
    try:
        r = subprocess.run([sys.executable, "tests/report/test_compare_pool.py", str(f)], capture_output=True, text=True)
    finally:
        f.write_text(orig)
    out = [l for l in (r.stdout + r.stderr).strip().splitlines() if l.strip()]
    print(f"== {name}: rc {r.returncode}")
    for l in out[:4]: print("   ", l[:220])
