#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The table of README.md from this folder's raw files: per model, threads and round, the train
step's seconds (anvil: Google Benchmark's manual time, the mean of the timed steps; PyTorch:
median_of_rep_means_s) in fp32 and bf16, and the ratios.
    python3 summarize.py [FOLDER]"""
import glob
import json
import os
import re
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = {}  # (model, threads, round) -> {side_precision: seconds}
for path in glob.glob(os.path.join(folder, "anvil_*_r*.json")):
    rnd = int(re.search(r"_r(\d+)\.json$", path)[1])
    for b in json.load(open(path))["benchmarks"]:
        m = re.match(r"model/([^/]+)/train_step/batch:(\d+)/threads:(\d+)(?:/precision:(\w+))?/", b["name"])
        if not m or b.get("error_occurred"):
            continue
        key = (m[1], int(m[3]), rnd)
        rows.setdefault(key, {})[f"anvil {m[4] or 'fp32'}"] = b["real_time"] / 1e3
        rows[key]["batch"] = int(m[2])
for path in glob.glob(os.path.join(folder, "peer_pytorch_r*.jsonl")):
    rnd = int(re.search(r"_r(\d+)\.jsonl$", path)[1])
    for line in open(path):
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key = (r["model"], int(r["threads"]), rnd)
        rows.setdefault(key, {})[f"torch {r.get('precision', 'fp32')}"] = r["median_of_rep_means_s"]


def cell(d, k):
    return f"{d[k]:.3f}" if k in d else "—"


def ratio(d, a, b):
    return f"{d[a] / d[b]:.2f}" if a in d and b in d else "—"


print("| model | batch | threads | round | anvil fp32 s | anvil bf16 s | anvil fp32/bf16 | "
      "PyTorch fp32 s | PyTorch bf16 s | PyTorch fp32/bf16 | anvil/PyTorch bf16 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for (model, threads, rnd), d in sorted(rows.items()):
    print(f"| {model} | {d.get('batch', '—')} | {threads} | {rnd} | {cell(d, 'anvil fp32')} | "
          f"{cell(d, 'anvil bf16')} | {ratio(d, 'anvil fp32', 'anvil bf16')} | {cell(d, 'torch fp32')} | "
          f"{cell(d, 'torch bf16')} | {ratio(d, 'torch fp32', 'torch bf16')} | "
          f"{ratio(d, 'anvil bf16', 'torch bf16')} |")
