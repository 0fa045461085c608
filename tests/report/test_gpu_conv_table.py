#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/report_gpu_conv.py's per-layer table holds the numbers of the rows it was given.

    test_gpu_conv_table.py REPORT_GPU_CONV_PY     (CTest: report_gpu_conv_table)

Writes anvil_bench JSON by hand with kernel/conv2d/<variant>/<pass>/<model>:<layer>/batch:<b>/
device:cuda rows (as bench/kernel_bench.cpp names them) for two layer-passes: one where FFT is
fastest and the default chose it, one where the default is 1.5x the fastest and a family
declined. Checks the fastest variant, the default's label and ratio, the TF32 column, the
declined count, the win counts and the FFT line; and that a file without such rows says so.
"""
import json
import os
import subprocess
import sys
import tempfile


def row(variant, pss, layer, ms=None, label=None, error=None):
    b = {"name": f"kernel/conv2d/{variant}/{pss}/alexnet:{layer}/batch:128/device:cuda",
         "run_type": "iteration", "time_unit": "ms", "label": label or variant}
    if error:
        b.update(error_occurred=True, error_message=error)
    else:
        b["real_time"] = ms
    return b


def main():
    script = sys.argv[1]
    rows = [
        row("default", "forward", "conv2", 2.0, "cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT]"),
        row("cuda.cudnn.fft", "forward", "conv2", 2.0),
        row("cuda.cudnn.implicit_gemm", "forward", "conv2", 3.0),
        row("cuda.cudnn.tf32", "forward", "conv2", 0.5),
        row("default", "backward_data", "conv1", 3.0, "cuda.cudnn[CUDNN_CONVOLUTION_BWD_DATA_ALGO_1]"),
        row("cuda.cudnn.gemm", "backward_data", "conv1", 2.0),
        row("cuda.custom.im2col", "backward_data", "conv1", 4.0),
        row("cuda.cudnn.winograd", "backward_data", "conv1",
            error="cuDNN reports CUDNN_STATUS_NOT_SUPPORTED"),
        {"name": "gemm/cuda.cublas/NN/dlbench_1024x2048x26752/device:cuda", "real_time": 1.0},
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "anvil_bench.json")
        with open(path, "w") as f:
            json.dump({"benchmarks": rows}, f)
        out = subprocess.run([sys.executable, script, path], check=True, capture_output=True,
                             text=True).stdout
        lines = {l.split(" | ")[0].lstrip("| "): l for l in out.splitlines() if l.startswith("| alexnet")}
        expect = [
            ("| alexnet:conv1 | 128 | backward_data | cuda.cudnn.gemm | 2.000 | "
             "cuda.cudnn[CUDNN_CONVOLUTION_BWD_DATA_ALGO_1] | 3.000 | 1.50 | - | 1 |"),
            ("| alexnet:conv2 | 128 | forward | cuda.cudnn.fft | 2.000 | "
             "cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT] | 2.000 | 1.00 | 0.500 | 0 |"),
        ]
        failures = [e for e in expect if e not in out.splitlines()]
        for needed in ("| cuda.cudnn.fft | 1 |", "| cuda.cudnn.gemm | 1 |",
                       "FFT families fastest on 1 of 2 layer-passes.",
                       "default / fastest: median 1.50, worst 1.50 over 2 layer-passes."):
            if needed not in out.splitlines():
                failures.append(needed)
        if len(lines) != 2:
            failures.append(f"expected 2 layer rows, got {len(lines)}")
        with open(path, "w") as f:
            json.dump({"benchmarks": rows[-1:]}, f)
        empty = subprocess.run([sys.executable, script, path], check=True, capture_output=True,
                               text=True).stdout
        if "no kernel/conv2d/.../device:cuda benchmarks" not in empty:
            failures.append("no message for a file without GPU conv rows")
    if failures:
        print("FAIL:\n" + "\n".join(failures) + "\n--- output:\n" + out)
        return 1
    print("PASS: per-layer GPU conv table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
