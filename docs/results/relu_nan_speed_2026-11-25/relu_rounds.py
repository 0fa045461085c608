#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Interleaved before/after rounds of the dense f32 relu select (anvil_micro_bench relu_select):
each round runs the `before` and the `after` binary once (order alternating), each process times
`current` (its libanvil's relu_f32 / relu_backward_f32) and `nan_to_zero` (the select before NaN
propagation, compiled into the benchmark) with random interleaving; per round and size it prints
the paired ratios current/nan_to_zero of each binary and after/before of `current`.

    relu_rounds.py BEFORE_BIN AFTER_BIN OUT_DIR [ROUNDS] [--reuse]

OUT_DIR keeps each process's Google Benchmark JSON; rounds.json (per round and side, the median
CPU time in ns of each benchmark) and the table go beside the script's output. --reuse reads the
JSON files already in OUT_DIR instead of running the binaries.
"""
import json
import os
import statistics
import subprocess
import sys


def run(binary, out, reuse=False):
    if not reuse:
        subprocess.run([binary, "--benchmark_filter=relu_select", "--benchmark_min_time=0.05",
                        "--benchmark_repetitions=3", "--benchmark_enable_random_interleaving=true",
                        "--benchmark_format=json", f"--benchmark_out={out}"],
                       check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS="1"))
    with open(out) as f:
        doc = json.load(f)
    times = {}
    for b in doc["benchmarks"]:
        if b.get("run_type") == "iteration":
            times.setdefault(b["run_name"], []).append(b["cpu_time"])
    return {k: statistics.median(v) for k, v in times.items()}  # ns, median of 3 repetitions


def main():
    reuse = "--reuse" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--reuse"]
    before, after, out_dir = args[:3]
    rounds = int(args[3]) if len(args) > 3 else 10
    os.makedirs(out_dir, exist_ok=True)
    res = {"before": [], "after": []}
    for r in range(rounds):
        order = [("before", before), ("after", after)] if r % 2 == 0 else [("after", after), ("before", before)]
        for side, binary in order:
            res[side].append(run(binary, f"{out_dir}/{side}_round{r}.json", reuse))
    with open(f"{out_dir}/rounds.json", "w") as f:
        json.dump(res, f, indent=1)
    names = sorted({k.replace("/current/", "/{}/").replace("/nan_to_zero/", "/{}/") for k in res["before"][0]},
                   key=lambda s: (s.split("/")[3], int(s.rsplit(":", 1)[1].split("/")[0])))
    print(f"{rounds} rounds; ratios: median [min-max] over rounds (CPU time, median of 3 repetitions per process)")
    print("| pass | n | before: current/nan_to_zero | after: current/nan_to_zero | after/before (current) | after current ns | nan_to_zero ns |")
    print("|---|---:|---|---|---|---:|---:|")
    fmt = lambda v: f"{statistics.median(v):.3f} [{min(v):.3f}-{max(v):.3f}]"  # noqa: E731
    for n in names:
        cur, old = n.format("current"), n.format("nan_to_zero")
        rb = [x[cur] / x[old] for x in res["before"]]
        ra = [x[cur] / x[old] for x in res["after"]]
        rab = [a[cur] / b[cur] for a, b in zip(res["after"], res["before"])]
        pass_, size = n.split("/")[3], n.rsplit(":", 1)[1].split("/")[0]
        print(f"| {pass_} | {size} | {fmt(rb)} | {fmt(ra)} | {fmt(rab)} | "
              f"{statistics.median(x[cur] for x in res['after']):.0f} | "
              f"{statistics.median(x[old] for x in res['after']):.0f} |")


if __name__ == "__main__":
    main()
