#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# anvil's GPU model steps beside PyTorch's on the same GPU, per model, phase, batch, step
# definition and math (issue 20):
#   anvil   model/<m>/<train_step|inference_step>/batch:<b>/device:cuda/input:<src>[/tf32]
#           (bench/model_bench.cpp, src = pinned | resident | pageable; gpu_alloc_peak_MB)
#   PyTorch bench/peers/pytorch_gpu_models.py lines (step copied|resident, math fp32|tf32;
#           gpu_peak_alloc_MB)
# Step definitions: "copied" = the batch copied from pageable host memory inside every step
# (anvil's input:pageable), "pinned" = page-locked batches copied one step ahead (anvil only),
# "resident" = the batch already on the GPU. Ratio = anvil ms / PyTorch ms (< 1: anvil faster).
#   python3 scripts/report_gpu_steps.py anvil_bench_model_gpu.json peer_pytorch_cuda_steps.jsonl
import json
import re
import sys

NAME = re.compile(r"model/([^/]+)/(train_step|inference_step)/batch:(\d+)/device:cuda/"
                  r"input:(pinned|resident|pageable)(/tf32)?$")
STEP = {"pageable": "copied", "pinned": "pinned", "resident": "resident"}
TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def anvil_rows(path):
    rows = {}
    with open(path) as f:
        for b in json.load(f).get("benchmarks", []):
            m = NAME.match(b.get("name", ""))
            if not m or b.get("run_type", "iteration") == "aggregate":
                continue
            key = (m[1], m[2], int(m[3]), STEP[m[4]], "tf32" if m[5] else "fp32")
            if b.get("error_occurred"):
                rows[key] = {"error": b.get("error_message", "error")}
            else:
                rows[key] = {"ms": float(b["real_time"]) * TO_MS[b.get("time_unit", "ns")],
                             "peak": b.get("gpu_alloc_peak_MB")}
    return rows


def torch_rows(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            key = (r["model"], r["phase"], int(r["batch"]), r["step"], r["math"])
            rows[key] = {"ms": r["median_s"] * 1e3, "peak": r.get("gpu_peak_alloc_MB")}
    return rows


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def table(anvil, torch):
    out = ["# Model steps on the GPU, anvil beside PyTorch", "",
           "copied = batch copied from pageable host memory each step; resident = batch already on "
           "the GPU. fp32 = TF32 off; tf32 = GEMMs and convolutions in TF32 (both sides). Peak = "
           "the caching allocator's peak of live tensors. Ratio = anvil / PyTorch.", "",
           "| model | phase | batch | step | math | anvil ms | PyTorch ms | ratio | anvil peak MB "
           "| PyTorch peak MB |",
           "|---|---|---:|---|---|---:|---:|---:|---:|---:|"]
    for key in sorted(set(anvil) | set(torch)):
        a, t = anvil.get(key, {}), torch.get(key, {})
        ratio = a["ms"] / t["ms"] if "ms" in a and "ms" in t and t["ms"] > 0 else None
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            *key, fmt(a.get("ms"), ".2f") if "ms" in a else a.get("error", "-")[:50],
            fmt(t.get("ms"), ".2f"), fmt(ratio, ".2f"), fmt(a.get("peak"), ".0f"),
            fmt(t.get("peak"), ".0f")))
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 3:
        print("usage: report_gpu_steps.py anvil_bench_model_gpu.json peer_pytorch_cuda_steps.jsonl",
              file=sys.stderr)
        return 2
    sys.stdout.write(table(anvil_rows(argv[1]), torch_rows(argv[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
