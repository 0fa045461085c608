#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Pools the rounds of every run (one machine, each round an A/B pair): the per-round B/A of every
model step, median, min and max. Writes pooled.md beside this file. Python 3 standard library only."""
import glob
import json
import os
import re
import statistics

here = os.path.dirname(os.path.abspath(__file__))


def times(path):
    return {b["name"]: b["real_time"] for b in json.load(open(path))["benchmarks"]
            if b.get("run_type", "iteration") == "iteration" and "error_occurred" not in b}


pooled = {}
for a in sorted(glob.glob(os.path.join(here, "run*", "A-*.json"))):
    ta, tb = times(a), times(a.replace(os.sep + "A-", os.sep + "B-"))
    for name in ta.keys() & tb.keys():
        pooled.setdefault(name, []).append(tb[name] / ta[name])
lines = ["| model | threads | rounds | B/A median | min | max |", "|---|---:|---:|---:|---:|---:|"]
for name, r in sorted(pooled.items()):
    m = re.match(r"model/([^/]+)/train_step/batch:\d+/threads:(\d+)", name)
    lines.append(f"| {m[1]} | {m[2]} | {len(r)} | {statistics.median(r):.3f} | {min(r):.3f} | {max(r):.3f} |")
with open(os.path.join(here, "pooled.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
