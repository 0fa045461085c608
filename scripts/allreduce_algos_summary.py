#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Summary of scripts/allreduce_algos.sh: per algorithm, the median all-reduce time over the
repetitions, its spread (min..max), bus bandwidth with the algorithm's factor, and the speed-up
of the median over libnbc's. Usage: allreduce_algos_summary.py DIR"""
import glob
import json
import os
import statistics
import sys


def main(directory):
    runs = {}
    for path in sorted(glob.glob(os.path.join(directory, "*_rep*.json"))):
        with open(path) as f:
            doc = json.load(f)
        algo = os.path.basename(path).rsplit("_rep", 1)[0]
        row = doc["allreduce"][-1]
        if not row.get("verified"):
            sys.exit(f"{path}: result not verified")
        runs.setdefault(algo, []).append(row)
    if not runs:
        sys.exit(f"no *_rep*.json in {directory}")
    base = statistics.median(r["time_us"] for r in runs["libnbc"]) if "libnbc" in runs else None
    print("| algorithm (as run) | reps | median ms | min..max ms | busbw of the algorithm GB/s (factor) | speed-up vs libnbc |")
    print("|---|---|---|---|---|---|")
    for algo, rows in runs.items():
        times = [r["time_us"] / 1e3 for r in rows]
        med = statistics.median(times)
        bus = statistics.median(r["busbw_algorithm_GBps"] for r in rows)
        speed = f"{base / 1e3 / med:.2f}x" if base else "-"
        print(f"| {rows[0]['algorithm']} | {len(rows)} | {med:.1f} | {min(times):.1f}..{max(times):.1f} "
              f"| {bus:.3f} (x{rows[0]['busbw_factor']:.2f}) | {speed} |")


if __name__ == "__main__":
    main(sys.argv[1])
