#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/report_gpu_steps.py puts anvil's GPU step rows beside PyTorch's with the right ratios.

    test_gpu_steps_table.py REPORT_GPU_STEPS_PY     (CTest: report_gpu_steps_table)

Hand-made anvil_bench rows for the three step kinds of one model and batch (copied fp32, resident
fp32, resident tf32, as bench/model_bench.cpp names them), one of them failed, and PyTorch lines
as bench/peers/pytorch_gpu_models.py prints them; checks every cell of the resulting rows.
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    script = sys.argv[1]
    anvil = {"benchmarks": [
        {"name": "model/alexnet/train_step/batch:128/device:cuda/input:pageable", "real_time": 30.0,
         "time_unit": "ms", "gpu_alloc_peak_MB": 1500.0},
        {"name": "model/alexnet/train_step/batch:128/device:cuda/input:resident", "real_time": 15.0,
         "time_unit": "ms", "gpu_alloc_peak_MB": 1400.0},
        {"name": "model/alexnet/train_step/batch:128/device:cuda/input:resident/tf32",
         "error_occurred": True, "error_message": "conv2d variant cuda.cudnn.tf32 failed"},
        {"name": "model/alexnet/train_step/batch:128/threads:2", "real_time": 900.0},
    ]}
    torch = [
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "copied", "math": "fp32",
         "median_s": 0.025, "gpu_peak_alloc_MB": 2000.0},
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "resident",
         "math": "fp32", "median_s": 0.0156, "gpu_peak_alloc_MB": 2119.0},
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "resident",
         "math": "tf32", "median_s": 0.00846, "gpu_peak_alloc_MB": 2119.0},
    ]
    with tempfile.TemporaryDirectory() as tmp:
        a, t = os.path.join(tmp, "a.json"), os.path.join(tmp, "t.jsonl")
        with open(a, "w") as f:
            json.dump(anvil, f)
        with open(t, "w") as f:
            f.write("not json\n" + "".join(json.dumps(r) + "\n" for r in torch))
        out = subprocess.run([sys.executable, script, a, t], check=True, capture_output=True,
                             text=True).stdout.splitlines()
    expect = [
        "| alexnet | train_step | 128 | copied | fp32 | 30.00 | 25.00 | 1.20 | 1500 | 2000 |",
        "| alexnet | train_step | 128 | resident | fp32 | 15.00 | 15.60 | 0.96 | 1400 | 2119 |",
        "| alexnet | train_step | 128 | resident | tf32 | conv2d variant cuda.cudnn.tf32 failed | 8.46 "
        "| - | - | 2119 |",
    ]
    missing = [e for e in expect if e not in out]
    rows = [l for l in out if l.startswith("| alexnet")]
    if missing or len(rows) != 3:
        print("FAIL: missing rows:\n" + "\n".join(missing) + "\n--- output:\n" + "\n".join(out))
        return 1
    print("PASS: GPU steps beside PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
