#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time to the target accuracy over several seeds, as MLPerf Training reports it: one experiment
run with N seeds (scripts/train_experiments.sh --seeds N names its logs NAME_s<seed>.json).

Usage: scripts/train_seeds.py [--json OUT] LOG.json [LOG.json ...]

One row per experiment (the log names without their _s<seed>): how many seeds ran and how many
reached the target, the median time to the target with its spread (the fastest and slowest seed
that reached it), and the median training time. See Note [Median time to target].

Note [Median time to target]
One seed's time to target is noise-prone: the epoch at which a run crosses the target moves with
the initialisation and the shuffling, by whole epochs. MLPerf Training therefore runs a benchmark
several times and scores the runs together (dropping the fastest and slowest, averaging the
rest). We report the median, which is that idea without the averaging, and count a seed that
never reached the target as infinitely slow rather than leaving it out: leaving it out would
report a fast "median" for a configuration that mostly fails. So the median exists only when more
than half the seeds reached the target; otherwise the row says "not reached". The spread is the
range over the seeds that did reach it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys

import provenance as P  # scripts/provenance.py (Note [Provenance]); this script's folder is on the path

SEED_SUFFIX = re.compile(r"_s\d+$")


def median_time_to_target(times: list[float | None]) -> float | None:
    """The median over the seeds, None (not reached) counting as slower than every time; None
    when the middle seed(s) did not reach the target. Note [Median time to target]."""
    if not times:
        raise ValueError("median_time_to_target: no seeds")
    ordered = sorted(times, key=lambda t: math.inf if t is None else t)
    lo, hi = ordered[(len(ordered) - 1) // 2], ordered[len(ordered) // 2]
    if lo is None or hi is None:
        return None
    return (lo + hi) / 2.0


def experiment_name(path: str) -> str:
    return SEED_SUFFIX.sub("", os.path.basename(path).removesuffix(".json"))


def summarize(logs: dict[str, list[dict]]) -> list[dict]:
    """{experiment: [log, ...]} -> one summary row per experiment, in name order."""
    rows = []
    for name in sorted(logs):
        runs = logs[name]
        target = runs[0]["config"].get("target_accuracy")
        times = [r["result"].get("time_to_target_seconds") for r in runs]
        reached = [t for t in times if t is not None]
        rows.append({
            "experiment": name, "model": runs[0]["model"], "threads": runs[0]["config"]["threads"],
            "seeds": sorted(r["config"]["seed"] for r in runs), "target_accuracy": target,
            "reached": len(reached) if target is not None else None,
            "median_time_to_target_s": median_time_to_target(times) if target is not None else None,
            "fastest_s": min(reached) if reached else None, "slowest_s": max(reached) if reached else None,
            "median_training_s": statistics.median(r["result"]["training_seconds"] for r in runs),
        })
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| experiment | model | threads | seeds | target | reached | median time to target s "
           "| spread s (fastest-slowest) | median training s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["target_accuracy"] is None:
            target = reached = median = spread = "–"
        else:
            target = f"≥{r['target_accuracy']}"
            reached = f"{r['reached']}/{len(r['seeds'])}"
            median = "not reached" if r["median_time_to_target_s"] is None else f"{r['median_time_to_target_s']:.1f}"
            spread = "–" if r["fastest_s"] is None else f"{r['fastest_s']:.1f}-{r['slowest_s']:.1f}"
        out.append(f"| {r['experiment']} | {r['model']} | {r['threads']} | {len(r['seeds'])} | {target} | {reached} "
                   f"| {median} | {spread} | {r['median_training_s']:.1f} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description="Median time to target over seeds (Note [Median time to target]).")
    p.add_argument("--json", help="also write the rows, with provenance, to this file")
    p.add_argument("logs", nargs="+", help="`anvil train --json-log` files, NAME_s<seed>.json")
    a = p.parse_args(argv)
    logs: dict[str, list[dict]] = {}
    for path in a.logs:
        with open(path, encoding="utf-8") as f:
            log = json.load(f)
        if not log.get("finished"):
            print(f"train_seeds.py: {path}: the run did not finish; left out", file=sys.stderr)
            continue
        logs.setdefault(experiment_name(path), []).append(log)
    if not logs:
        print("train_seeds.py: error: no finished run among the logs", file=sys.stderr)
        return 1
    rows = summarize(logs)
    sys.stdout.write(markdown(rows))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"provenance": P.provenance(), "statistic": "median time to target over seeds, "
                       "unreached seeds counted as infinitely slow (Note [Median time to target])",
                       "experiments": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
