#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Applies one "revert of the fix's core lines" to bench/peers/pytorch_models.py, runs the CTest's script, restores.
import subprocess, sys, pathlib
f = pathlib.Path("bench/peers/pytorch_models.py")
orig = f.read_text()
mutants = {
  "no fallback (configuration used as requested)": ("    find = find or find_library\n", "    return dict(cfg)\n    find = find or find_library\n"),
  "converted model counted as 0 params / 0 FLOPs without refusal": ("    if params == 0 or fwd_flops == 0:\n", "    if False:\n"),
}
for name, (a, b) in mutants.items():
    assert orig.count(a) == 1, name
    f.write_text(orig.replace(a, b))
    try:
        r = subprocess.run([sys.executable, "tests/report/test_peer_config.py", str(f)], capture_output=True, text=True)
    finally:
        f.write_text(orig)
    out = [l for l in (r.stdout + r.stderr).strip().splitlines() if l.strip()]
    print(f"== {name}: rc {r.returncode}")
    for l in out[:5]: print("   ", l[:220])
