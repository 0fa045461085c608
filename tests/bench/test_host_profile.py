#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ANVIL_VERBOSE=host_profile attributes a model step's host time to the variants it ran.

Usage: test_host_profile.py path/to/anvil_bench   (a CTest entry, bench/CMakeLists.txt)

Runs one short training-step row of mlp_mnist with the profile on and checks the stderr table
(Note [Host profile]): gemm and the elementwise ops appear with calls per step, and the JSON row
has host_variants_ms, at most the step's time. With the profile off the row has no such counter.
"""
import json
import os
import subprocess
import sys
import tempfile

bench = sys.argv[1]
failures = []
row = "^model/mlp_mnist/train_step/batch:80/threads:1/"


def run(profile):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        env = dict(os.environ, ANVIL_VERBOSE="host_profile" if profile else "")
        p = subprocess.run([bench, f"--benchmark_filter={row}", "--anvil_models=mlp_mnist", "--anvil_gpu=off",
                            "--anvil_kernels=off", "--anvil_threads=1", "--anvil_peak=0",
                            f"--benchmark_out={out}", "--benchmark_out_format=json"],
                           capture_output=True, text=True, env=env, timeout=300)
        if p.returncode != 0:
            failures.append(f"anvil_bench exited {p.returncode}: {p.stderr[-2000:]}")
            return p.stderr, []
        rows = [b for b in json.load(open(out))["benchmarks"] if b.get("run_type") == "iteration"]
        return p.stderr, rows


err, rows = run(True)
if "anvil host profile: mlp_mnist train_step batch 80 threads 1" not in err:
    failures.append("no host profile table on stderr:\n" + err[-2000:])
else:
    table = err.split("anvil host profile:", 1)[1]
    for op in ("gemm", "elementwise"):
        if f"\n  {op} " not in table:
            failures.append(f"the table names no {op} variant:\n{table[:2000]}")
    if "total exclusive host time in variants" not in table:
        failures.append("the table has no total line")
if len(rows) != 1 or "host_variants_ms" not in rows[0]:
    failures.append(f"the profiled row has no host_variants_ms counter: {rows}")
else:
    step_ms = rows[0]["real_time"] if rows[0]["time_unit"] == "ms" else None
    v = rows[0]["host_variants_ms"]
    if not (v > 0 and (step_ms is None or v <= step_ms * 1.05)):
        failures.append(f"host_variants_ms {v} is not within (0, step time {step_ms} ms]")

err, rows = run(False)
if "anvil host profile" in err or any("host_variants_ms" in r for r in rows):
    failures.append("with the profile off, the table or the counter still appeared")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
