#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/report_gpu_steps.py puts anvil's GPU step rows beside PyTorch's with the right ratios.

    test_gpu_steps_table.py REPORT_GPU_STEPS_PY     (CTest: report_gpu_steps_table)

Hand-made anvil_bench rows for the three step kinds of one model and batch (copied fp32, resident
fp32 with three repetitions, resident tf32 failed), named as Google Benchmark writes them
(/min_time:../manual_time), and PyTorch lines as bench/peers/pytorch_gpu_models.py prints them
(configs defaults, best, compile; error rows); checks every cell of the resulting rows.
"""
import json
import os
import subprocess
import sys
import tempfile


def main():
    script = sys.argv[1]
    sfx = "/min_time:1.000/manual_time"  # what Google Benchmark appends to a MinTime, manual-time row
    anvil = {"benchmarks": [
        {"name": "model/alexnet/train_step/batch:128/device:cuda/input:pageable" + sfx, "real_time": 30.0,
         "time_unit": "ms", "gpu_alloc_peak_MB": 1500.0, "samples/s": 4266.0},
        # three repetitions: median 15.0, spread (16 - 14) / 15 = 13.3 %; an aggregate row is ignored
        *[{"name": "model/alexnet/train_step/batch:128/device:cuda/input:resident" + sfx,
           "run_name": "model/alexnet/train_step/batch:128/device:cuda/input:resident" + sfx,
           "run_type": "iteration", "real_time": t, "time_unit": "ms", "gpu_alloc_peak_MB": p,
           "samples/s": 128000 / t} for t, p in ((16.0, 1400.0), (14.0, 1410.0), (15.0, 1405.0))],
        {"name": "model/alexnet/train_step/batch:128/device:cuda/input:resident" + sfx + "_median",
         "run_name": "model/alexnet/train_step/batch:128/device:cuda/input:resident" + sfx,
         "run_type": "aggregate", "aggregate_name": "median", "real_time": 99.0, "time_unit": "ms"},
        {"name": "model/alexnet/train_step/batch:128/device:cuda/input:resident/tf32/min_time:0.500/manual_time",
         "error_occurred": True, "error_message": "conv2d variant cuda.cudnn.tf32 failed"},
        {"name": "model/alexnet/train_step/batch:128/threads:2", "real_time": 900.0},
    ]}
    cfg = lambda n: {"name": n, "foreach": True}  # noqa: E731
    torch = [
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "copied", "math": "fp32",
         "median_s": 0.025, "spread_pct": 2.0, "gpu_peak_alloc_MB": 2000.0, "config": cfg("defaults")},
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "resident",
         "math": "fp32", "median_s": 0.0156, "spread_pct": 1.0, "gpu_peak_alloc_MB": 2119.0,
         "config": cfg("defaults")},
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "resident",
         "math": "fp32", "median_s": 0.012, "spread_pct": 0.5, "gpu_peak_alloc_MB": 2200.0, "config": cfg("best")},
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "resident",
         "math": "tf32", "median_s": 0.00846, "gpu_peak_alloc_MB": 2119.0, "config": cfg("defaults")},
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "resident", "math": "tf32",
         "error": "RuntimeError: capture failed", "config": cfg("best")},
        {"model": "alexnet", "phase": "train_step", "batch": 128, "step": "resident", "math": "fp32",
         "error": "torch.compile not run: no C compiler", "config": cfg("compile")},
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
        "| model | phase | batch | step | math | anvil ms (spread) | anvil samples/s | PyTorch defaults ms "
        "| anvil / defaults | PyTorch best ms | anvil / best | anvil peak MB | PyTorch peak MB |",
        "| alexnet | train_step | 128 | copied | fp32 | 30.00 (0.0 %) | 4266 | 25.00 (2.0 %) | 1.20 | - | - "
        "| 1500 | 2000 |",
        "| alexnet | train_step | 128 | resident | fp32 | 15.00 (13.3 %) | 8533 | 15.60 (1.0 %) | 0.96 "
        "| 12.00 (0.5 %) | 1.25 | 1410 | 2119 |",
        "| alexnet | train_step | 128 | resident | tf32 | conv2d variant cuda.cudnn.tf32 failed | - | 8.46 | - "
        "| RuntimeError: capture failed | - | - | 2119 |",
        "| alexnet | train_step | 128 | resident | fp32 | torch.compile not run: no C compiler | 15.60 (1.0 %) | - |",
    ]
    missing = [e for e in expect if e not in out]
    rows = [l for l in out if l.startswith("| alexnet")]
    if missing or len(rows) != 4:
        print("FAIL: missing rows:\n" + "\n".join(missing) + "\n--- output:\n" + "\n".join(out))
        return 1
    print("PASS: GPU steps beside PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
