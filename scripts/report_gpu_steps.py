#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# anvil's GPU model steps beside PyTorch's on the same GPU, per model, phase, batch, step
# definition and math (issues 20, 31 and 37):
#   anvil   model/<m>/<train_step|inference_step>/batch:<b>/device:cuda/input:<src>[/tf32]
#           [/min_time:..][/manual_time] (bench/model_bench.cpp, src = pinned | resident |
#           pageable; gpu_alloc_peak_MB, samples/s); with --benchmark_repetitions one iteration
#           row per repetition: the median of them, their spread (max - min over the median)
#   PyTorch bench/peers/pytorch_gpu_models.py lines (step copied|pinned|resident, math
#           fp32|tf32, config.name defaults|best|compile; median_s, spread_pct,
#           gpu_peak_alloc_MB); lines without config.name (before issue 31) are "legacy"
#           (cudnn.benchmark on, SGD foreach=False)
# Step definitions: "copied" = the batch copied from pageable host memory inside every step
# (anvil's input:pageable), "pinned" = page-locked batches copied one step ahead, "resident" =
# the batch already on the GPU. Ratio = anvil ms / PyTorch ms (< 1: anvil faster).
#   python3 scripts/report_gpu_steps.py anvil_bench_model_gpu.json [more.json ...] peer_pytorch_cuda_steps.jsonl
import json
import re
import statistics
import sys

NAME = re.compile(r"model/([^/]+)/(train_step|inference_step)/batch:(\d+)/device:cuda/"
                  r"input:(pinned|resident|pageable)(/tf32)?(/min_time:[^/]+)?(/repeats:\d+)?(/manual_time)?$")
STEP = {"pageable": "copied", "pinned": "pinned", "resident": "resident"}
TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
CONFIGS = ("defaults", "best", "compile", "legacy")


def anvil_rows(paths):
    """{(model, phase, batch, step, math): {ms, spread_pct, reps, peak, samples_s} or {error}}"""
    its = {}
    for path in paths if isinstance(paths, (list, tuple)) else [paths]:
        with open(path) as f:
            for b in json.load(f).get("benchmarks", []):
                m = NAME.match(b.get("run_name", b.get("name", "")))
                if not m or b.get("run_type", "iteration") == "aggregate":
                    continue
                key = (m[1], m[2], int(m[3]), STEP[m[4]], "tf32" if m[5] else "fp32")
                its.setdefault(key, []).append(b)
    rows = {}
    for key, bs in its.items():
        ok = [b for b in bs if not b.get("error_occurred")]
        if not ok:
            rows[key] = {"error": bs[0].get("error_message", "error")}
            continue
        ms = [float(b["real_time"]) * TO_MS[b.get("time_unit", "ns")] for b in ok]
        med = statistics.median(ms)
        peaks = [b["gpu_alloc_peak_MB"] for b in ok if "gpu_alloc_peak_MB" in b]
        rate = [b["samples/s"] for b in ok if "samples/s" in b]
        rows[key] = {"ms": med, "reps": len(ms), "spread_pct": (max(ms) - min(ms)) / med * 100 if med else 0,
                     "peak": max(peaks) if peaks else None,
                     "samples_s": statistics.median(rate) if rate else None}
    return rows


def config_name(r):
    c = r.get("config")
    return c.get("name", "legacy") if isinstance(c, dict) else "legacy"


def torch_rows(paths):
    """{config: {(model, phase, batch, step, math): row}}; a timed row wins over an error row."""
    rows = {c: {} for c in CONFIGS}
    for path in paths if isinstance(paths, (list, tuple)) else [paths]:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                if r.get("kind") not in (None, "step") or "phase" not in r or "step" not in r:
                    continue
                key = (r["model"], r["phase"], int(r["batch"]), r["step"], r["math"])
                cfg = rows.setdefault(config_name(r), {})
                if "median_s" in r:
                    cfg[key] = {"ms": r["median_s"] * 1e3, "peak": r.get("gpu_peak_alloc_MB"),
                                "spread_pct": r.get("spread_pct"), "config": r.get("config", {})}
                elif key not in cfg:
                    cfg[key] = {"error": r.get("error", "error"), "config": r.get("config", {})}
    return rows


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def cell(row):
    """'12.34 (±1.2 %)', the error's start, or '-'."""
    if not row:
        return "-"
    if "ms" not in row:
        return row.get("error", "-")[:60].replace("|", "/")
    spread = row.get("spread_pct")
    return f"{row['ms']:.2f}" + (f" ({spread:.1f} %)" if isinstance(spread, (int, float)) else "")


def ratio(a, t):
    return f"{a['ms'] / t['ms']:.2f}" if a and t and "ms" in a and "ms" in t and t["ms"] > 0 else "-"


def table(anvil, torch):
    """Markdown lines: one row per (model, phase, batch, step, math) with anvil, PyTorch defaults,
    PyTorch best (and legacy rows when a file has them)."""
    configs = [c for c in ("defaults", "best", "legacy") if torch.get(c)]
    keys = set(anvil)
    for c in configs:
        keys |= set(torch[c])
    head = "| model | phase | batch | step | math | anvil ms (spread) | anvil samples/s |"
    sep = "|---|---|---:|---|---|---:|---:|"
    for c in configs:
        head += f" PyTorch {c} ms | anvil / {c} |"
        sep += "---:|---:|"
    head += " anvil peak MB | PyTorch peak MB |"
    sep += "---:|---:|"
    out = [head, sep]
    order = {"train_step": 0, "inference_step": 1}
    for key in sorted(keys, key=lambda k: (k[0], order[k[1]], k[2], k[3], k[4])):
        a = anvil.get(key, {})
        row = "| {} | {} | {} | {} | {} | {} | {} |".format(*key, cell(a), fmt(a.get("samples_s"), ".0f"))
        for c in configs:
            t = torch[c].get(key)
            row += f" {cell(t)} | {ratio(a, t)} |"
        t_peak = next((torch[c][key].get("peak") for c in configs if key in torch[c]), None)
        row += f" {fmt(a.get('peak'), '.0f')} | {fmt(t_peak, '.0f')} |"
        out.append(row)
    return out


def compile_table(torch):
    """torch.compile rows (or why they did not run) beside the defaults of the same key."""
    rows = torch.get("compile", {})
    if not rows:
        return []
    out = ["| model | phase | batch | step | math | PyTorch compile ms | PyTorch defaults ms | compile / defaults |",
           "|---|---|---:|---|---|---:|---:|---:|"]
    for key in sorted(rows):
        c, d = rows[key], torch.get("defaults", {}).get(key)
        out.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(*key, cell(c), cell(d), ratio(c, d)))
    return out


def main(argv):
    if len(argv) < 3:
        print("usage: report_gpu_steps.py anvil_bench_model_gpu.json [more.json ...] peer_pytorch_cuda_steps.jsonl",
              file=sys.stderr)
        return 2
    anvil, torch = anvil_rows(argv[1:-1]), torch_rows([argv[-1]])
    out = ["# Model steps on the GPU, anvil beside PyTorch", "",
           "copied = batch copied from pageable host memory each step; pinned = page-locked batch copied "
           "one step ahead; resident = batch already on the GPU. fp32 = TF32 off; tf32 = GEMMs and "
           "convolutions in TF32 (both sides). anvil: median of its repetitions (spread = max - min over "
           "the median). PyTorch defaults = PyTorch untouched (SGD foreach as PyTorch picks, NCHW, "
           "cudnn.benchmark off); best = channels_last, cudnn.benchmark (limit 0), whole-step CUDA graph. "
           "Peak = the caching allocator's peak of live tensors. Ratio = anvil / PyTorch.", ""]
    out += table(anvil, torch)
    comp = compile_table(torch)
    if comp:
        out += ["", "## torch.compile", ""] + comp
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
