#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The alias map of old anvil_bench row names (scripts/bench_names.py) maps each old form to today's
name, leaves today's names alone, and the report and kernel_winners.py read old-named rows through it.

    test_bench_names.py SCRIPTS_DIR     (CTest: report_bench_names, tests/CMakeLists.txt)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, sys.argv[1])
from bench_names import canonical  # noqa: E402

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)


ctx = {"anvil.kernel_batch.resnet50": "16"}
old_cpu = "kernel/conv2d/cpu.onednn/forward/resnet50:layer1.0.conv1/threads:2/min_time:0.300/real_time"
new_cpu = "kernel/conv2d/cpu.onednn/forward/resnet50:layer1.0.conv1/batch:16/device:cpu/threads:2/min_time:0.300/real_time"
check(canonical(old_cpu, ctx) == new_cpu, f"old CPU kernel name -> {canonical(old_cpu, ctx)}")
check(canonical(new_cpu, ctx) == new_cpu, "today's CPU kernel name is left alone")
check(canonical(old_cpu) == new_cpu.replace("/batch:16", ""), "without the context the batch part is left out")
old_lstm = "gpu_lstm/cuda.custom.fused/backward/lstm32:lstm/batch:256/device:cuda/manual_time"
check(canonical(old_lstm) == "kernel/lstm/cuda.custom.fused/backward/lstm32:lstm/batch:256/device:cuda/manual_time",
      f"old GPU LSTM name -> {canonical(old_lstm)}")
gpu_conv = "kernel/conv2d/cuda.cudnn/forward/alexnet:conv1/batch:128/device:cuda/manual_time"
check(canonical(gpu_conv) == gpu_conv, "a GPU conv row is left alone")
check(canonical("gemm/cpu.eigen/NN/dlbench_1024x2048x26752/threads:1") ==
      "gemm/cpu.eigen/NN/dlbench_1024x2048x26752/threads:1", "other families are left alone")

# kernel_winners.py reads an old-named file: the row shows up under its layer.
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "old.json")
    rows = [{"name": old_cpu.replace("cpu.onednn", v), "run_name": old_cpu.replace("cpu.onednn", v),
             "real_time": t, "time_unit": "ms", "label": v} for v, t in (("cpu.onednn", 2.0), ("default", 2.1))]
    with open(path, "w") as f:
        json.dump({"context": {**ctx, "anvil.kernel.resnet50:layer1.0.conv1": "conv2d N=16 C=64 H=56 W=56 K=64 R=1 S=1"},
                   "benchmarks": rows}, f)
    out = subprocess.run([sys.executable, os.path.join(sys.argv[1], "kernel_winners.py"), path],
                         capture_output=True, text=True)
    check(out.returncode == 0 and "layer1.0.conv1" in out.stdout,
          f"kernel_winners.py on old names: exit {out.returncode}, {out.stdout[-300:]} {out.stderr[-300:]}")

for f in FAILURES:
    print("FAIL: " + f)
print(f"bench_names: {len(FAILURES)} failures")
sys.exit(1 if FAILURES else 0)
