#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""How far the GEMM heuristic's default pick is from the fastest CPU variant, per shape, mode and
thread count, measured with anvil_bench's gemm/<variant>/<mode>/<shape>/threads:<t> rows (every
variant validated against ref on the timed inputs before it is timed; wall clock).

  python3 scripts/gemm_default_check.py [--bench build/bench/anvil_bench] [--shapes fcn5]
      [--shape-regex 'fcn5_b64_'] [--threads 1] [--rounds 5] [--reps 3] [--json OUT]

Each round is one anvil_bench process that times every variant ("default" = the heuristic's pick,
and each registered CPU variant forced) on the selected shapes, its repetitions randomly
interleaved (--benchmark_enable_random_interleaving) so that the variants of one cell run side by
side, not minutes apart. Per round and cell: default's time over the fastest variant's time in
that same round (paired); the table shows the median of that ratio over the rounds, its range,
and which variant was fastest how often. Ratio 1.00 = the default is the fastest; 1.03 = 3 %
slower than the fastest.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import subprocess
import sys

import provenance as P  # scripts/provenance.py (Note [Provenance]); this script's folder is on the path

NAME = re.compile(r"^gemm/(?P<variant>[^/]+)/(?P<mode>NN|NT|TN|TT)/(?P<shape>[^/]+)/threads:(?P<t>\d+)")


def one_round(a) -> dict:
    """{(shape, mode, threads): {variant: seconds}} of one anvil_bench process, and the labels."""
    filt = f"^gemm/[^/]+/(NN|NT|TN|TT)/[^/]*{a.shape_regex}[^/]*/threads:({a.threads.replace(',', '|')})(/|$)"
    cmd = [a.bench, f"--benchmark_filter={filt}", f"--anvil_gemm_shapes={a.shapes}",
           f"--anvil_threads={a.threads}", f"--benchmark_repetitions={a.reps}",
           "--benchmark_enable_random_interleaving=true", "--benchmark_report_aggregates_only=true",
           "--benchmark_format=json"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"gemm_default_check: anvil_bench failed (rc {r.returncode}): {r.stderr[-2000:]}")
    doc = json.loads(r.stdout)
    cells: dict = collections.defaultdict(dict)
    picks: dict = {}
    for b in doc.get("benchmarks", []):
        if a.reps > 1 and b.get("aggregate_name") != "median":
            continue
        m = NAME.match(b.get("run_name", b["name"]))
        if not m:
            continue
        if b.get("error_occurred"):
            sys.exit(f"gemm_default_check: {b['name']}: {b.get('error_message')}")
        key = (m["shape"], m["mode"], int(m["t"]))
        cells[key][m["variant"]] = b["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        if m["variant"] == "default":
            picks[key] = b.get("label", "?")
    return {"cells": cells, "picks": picks, "context": doc.get("context", {}), "command": cmd}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default="build/bench/anvil_bench")
    p.add_argument("--shapes", default="fcn5", help="anvil_bench --anvil_gemm_shapes groups")
    p.add_argument("--shape-regex", default="fcn5_b64_", help="part of the shape names to time")
    p.add_argument("--threads", default="1")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=3, help="repetitions per process (randomly interleaved)")
    p.add_argument("--json", default="", help="write every round's seconds here")
    a = p.parse_args()

    rounds = []
    for i in range(a.rounds):
        print(f"[gemm_default_check] round {i + 1}/{a.rounds}", file=sys.stderr, flush=True)
        rounds.append(one_round(a))
    keys = sorted({k for r in rounds for k in r["cells"]})
    if not keys:
        sys.exit("gemm_default_check: no gemm rows matched (shape regex, threads, variants?)")
    out_rows = []
    print("| shape | mode | threads | default picks | default / fastest (median over rounds) | range "
          "| fastest variant (rounds) |")
    print("|---|---|---:|---|---:|---|---|")
    for key in keys:
        ratios, fastest = [], collections.Counter()
        for r in rounds:
            c = r["cells"].get(key, {})
            if "default" not in c or len(c) < 2:
                continue
            best = min((v for n, v in c.items() if n != "default"), default=None)
            ratios.append(c["default"] / best)
            fastest[min((n for n in c if n != "default"), key=c.get)] += 1
        if not ratios:
            continue
        pick = rounds[0]["picks"].get(key, "?")
        med = statistics.median(ratios)
        out_rows.append({"shape": key[0], "mode": key[1], "threads": key[2], "default_pick": pick,
                         "default_over_fastest": ratios, "median": med, "fastest": dict(fastest)})
        print(f"| {key[0]} | {key[1]} | {key[2]} | {pick} | {med:.3f} | {min(ratios):.3f}-{max(ratios):.3f} | "
              + ", ".join(f"{n} {k}" for n, k in fastest.most_common()) + " |")
    worst = max(r["median"] for r in out_rows)
    print(f"\nWorst cell: default {100 * (worst - 1):.1f} % slower than the fastest variant "
          f"(median over {a.rounds} rounds of the paired ratio).")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": out_rows, "rounds": [{"cells": {"/".join(map(str, k)): v for k, v in r["cells"].items()},
                                                     "picks": {"/".join(map(str, k)): v for k, v in r["picks"].items()}}
                                                    for r in rounds],
                       "context": rounds[0]["context"], "command": rounds[0]["command"],
                       # anvil_bench's own fields (its revision and libraries) over this script's
                       "provenance": {**P.provenance(), **P.from_bench_context(rounds[0]["context"])}},
                      f, indent=1)


if __name__ == "__main__":
    main()
