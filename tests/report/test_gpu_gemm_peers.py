#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The report's "GPU GEMM beside torch.mm" table holds the numbers of the rows it was given.

    test_gpu_gemm_peers.py REPORT_PY        (CTest: report_gpu_gemm_peers, tests/CMakeLists.txt)

Writes a results folder by hand: anvil_bench GPU GEMM rows (gemm/<cuda variant>/<mode>/<shape>/
device:cuda, as bench/gpu_gemm_bench.cpp names them) for two shapes, with one mode of one variant
missing, and torch.mm rows as bench/peers/pytorch_gpu_gemm.py prints them. Runs scripts/report.py
and checks every cell of the table against values computed here: GFLOP/s per side, the
anvil/torch ratios, the tiled kernel, the NT/NN penalty per side, a dash for the missing row. Then
checks that without the torch.mm file there is no such section.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layout_checks import figures_beside_tables  # noqa: E402

from matplotlib_python import require_matplotlib  # noqa: E402  (beside this file)

from checks import FAILURES, check, finish  # noqa: E402  (beside this file)

SHAPES = {"dlbench_1024x2048x26752": (1024, 2048, 26752), "odd_65x33x129": (65, 33, 129)}
MODES = ("NN", "NT", "TN", "TT")
VARIANTS = ("cuda.cublas", "cuda.cublas.tf32", "cuda.custom.gemm_tiled")
MISSING = ("odd_65x33x129", "TT", "cuda.cublas.tf32")  # e.g. skipped with an error


def anvil_ms(shape, mode, variant):
    """A distinct, made-up time per row (ms)."""
    base = {"cuda.cublas": 1.0, "cuda.cublas.tf32": 0.27, "cuda.custom.gemm_tiled": 3.9}[variant]
    return base * (1 + 0.07 * MODES.index(mode)) * (1 if shape.startswith("dlbench") else 1e-3)


def torch_s(shape, mode, precision):
    base = 0.95e-3 if precision == "fp32" else 0.24e-3
    return base * (1 + 0.03 * MODES.index(mode)) * (1 if shape.startswith("dlbench") else 1e-3)


def write_results(d, with_torch=True):
    benchmarks = []
    for shape, (m, n, k) in SHAPES.items():
        flops = 2.0 * m * n * k
        for v in VARIANTS:
            for mode in MODES:
                if (shape, mode, v) == MISSING:
                    continue
                ms = anvil_ms(shape, mode, v)
                benchmarks.append({"name": f"gemm/{v}/{mode}/{shape}/device:cuda/manual_time", "run_type": "iteration",
                                   "iterations": 100, "real_time": ms, "cpu_time": ms, "time_unit": "ms",
                                   "FLOP/s": flops / (ms * 1e-3), "label": "cuda:0 Test GPU"})
    with open(os.path.join(d, "anvil_bench.json"), "w") as f:
        json.dump({"context": {}, "benchmarks": benchmarks}, f)
    if with_torch:
        with open(os.path.join(d, "peer_pytorch_cuda_gemm.jsonl"), "w") as f:
            f.write("not json: a warning line the report must skip\n")
            for shape, (m, n, k) in SHAPES.items():
                for mode in MODES:
                    for p in ("fp32", "tf32"):
                        s = torch_s(shape, mode, p)
                        f.write(json.dumps({"family": "gemm", "peer": "pytorch", "device": "cuda", "shape": shape,
                                            "m": m, "n": n, "k": k, "mode": mode, "precision": p, "seconds": s,
                                            "FLOP/s": 2.0 * m * n * k / s, "device_name": "Test GPU 80GB"}) + "\n")


def render(report_py, with_torch):
    d = tempfile.mkdtemp(prefix="anvil_report_gpu_gemm_")
    write_results(d, with_torch)
    p = subprocess.run([sys.executable, report_py, d], capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        sys.exit(f"FAIL: report.py exited with {p.returncode}")
    with open(os.path.join(d, "report.md")) as f:
        md = f.read()
    # The section's plot (Note [Report layout]): captioned, a PNG in the folder, in its section.
    figure_fails, images = figures_beside_tables(md, d, f"python3 scripts/report.py {d}")
    FAILURES.extend(figure_fails)
    if with_torch:
        section = md.split("## GPU GEMM beside torch.mm")[-1].split("\n## ")[0]
        check("](gpu_gemm_vs_torch.png)" in section, "no GPU GEMM plot in the GPU GEMM section")
    shutil.rmtree(d)
    return md


def close(cell, want, digits):
    try:
        return abs(float(cell) - want) <= 0.5 * 10 ** -digits + 1e-12
    except ValueError:
        return False


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_gpu_gemm_peers.py REPORT_PY")
    report_py = sys.argv[1]
    require_matplotlib()  # the plots are part of the report under test

    md = render(report_py, with_torch=True)
    m = re.search(r"^## GPU GEMM beside torch\.mm \((.*)\)$", md, re.M)
    check(m is not None and m.group(1) == "Test GPU 80GB", "section title names the torch rows' GPU")
    lines = md[m.end():].split("\n## ")[0].splitlines() if m else []
    table = [l for l in lines if l.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")] if table else []
    rows = {}
    for l in table[2:]:
        values = [c.strip() for c in l.strip("|").split("|")]
        cells = dict(zip(header, values))
        cells["_cells"] = values
        rows[(cells["shape"], cells["mode"])] = cells
    check(len(rows) == len(SHAPES) * len(MODES), f"{len(rows)} rows for {len(SHAPES) * len(MODES)} shape x mode")
    for shape, (mm, n, k) in SHAPES.items():
        flops = 2.0 * mm * n * k
        gf_anvil = lambda mode, v: flops / (anvil_ms(shape, mode, v) * 1e-3) / 1e9
        gf_torch = lambda mode, p: flops / torch_s(shape, mode, p) / 1e9
        for mode in MODES:
            r = rows.get((shape, mode))
            if r is None:
                check(False, f"row {shape} {mode} missing")
                continue
            where = f"{shape} {mode}"
            check(close(r["cuda.cublas"], gf_anvil(mode, "cuda.cublas"), 0), f"{where}: cuda.cublas GFLOP/s")
            check(close(r["torch.mm FP32"], gf_torch(mode, "fp32"), 0), f"{where}: torch FP32 GFLOP/s")
            # Two columns are called anvil/torch (FP32, TF32): read them by position.
            ratio_cols = [i for i, h in enumerate(header) if h == "anvil/torch"]
            values = r["_cells"]
            check(len(ratio_cols) == 2 and len(header) == len(values), f"{where}: two ratio columns")
            want32 = gf_anvil(mode, "cuda.cublas") / gf_torch(mode, "fp32")
            check(close(values[ratio_cols[0]], want32, 3), f"{where}: FP32 ratio {values[ratio_cols[0]]} vs {want32:.3f}")
            if (shape, mode, "cuda.cublas.tf32") == MISSING:
                check(r["cuda.cublas.tf32"] == "—" and values[ratio_cols[1]] == "—", f"{where}: dashes for the missing row")
            else:
                check(close(r["cuda.cublas.tf32"], gf_anvil(mode, "cuda.cublas.tf32"), 0), f"{where}: tf32 GFLOP/s")
                want_tf = gf_anvil(mode, "cuda.cublas.tf32") / gf_torch(mode, "tf32")
                check(close(values[ratio_cols[1]], want_tf, 3), f"{where}: TF32 ratio")
            check(close(r["torch.mm TF32"], gf_torch(mode, "tf32"), 0), f"{where}: torch TF32 GFLOP/s")
            check(close(r["gemm_tiled"], gf_anvil(mode, "cuda.custom.gemm_tiled"), 0), f"{where}: tiled GFLOP/s")
            pen_a = anvil_ms(shape, mode, "cuda.cublas") / anvil_ms(shape, "NN", "cuda.cublas")
            pen_t = torch_s(shape, mode, "fp32") / torch_s(shape, "NN", "fp32")
            check(close(r["penalty anvil"], pen_a, 2), f"{where}: anvil penalty {r['penalty anvil']} vs {pen_a:.2f}")
            check(close(r["penalty torch"], pen_t, 2), f"{where}: torch penalty {r['penalty torch']} vs {pen_t:.2f}")

    md = render(report_py, with_torch=False)
    check("GPU GEMM beside torch.mm" not in md, "no torch.mm rows: no section")

    sys.exit(finish("PASS: the GPU GEMM table holds the rows' GFLOP/s, ratios and penalties"))


if __name__ == "__main__":
    main()
