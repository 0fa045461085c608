#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""anvil_dist_bench's JSON carries the provenance fields (Note [Provenance]).

    test_dist_bench_provenance.py path/to/anvil_dist_bench
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from provenance_check import provenance_problems  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "allreduce.json")
    subprocess.run([sys.argv[1], "allreduce", "--max-bytes", "1024", "--reps", "1", "--out", out],
                   check=True, capture_output=True)
    doc = json.load(open(out))
problems = provenance_problems(doc.get("provenance", {}))
for p in problems:
    print("FAIL: anvil_dist_bench provenance:", p)
print(f"test_dist_bench_provenance: {len(problems)} problem(s)")
sys.exit(1 if problems else 0)
