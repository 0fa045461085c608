#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The overlap table from `anvil_dist_bench overlap` runs (scripts/dist_overlap.sh): per model and
# MPI progress mode, the after-backward wait, the overlapped wait, and the share of the wait the
# overlap hides, from the wait alone and from the step time, as the median and range of the
# paired ratios over all pairs of all rounds (Note [Paired overlap measurement]).
# Usage: dist_overlap_report.py RESULTS_DIR
import glob
import json
import os
import statistics
import sys


def summarise(folder):
    """{(model, mode): {"pairs": [...], "rank_batch": b, "buckets": k}} over every file."""
    out = {}
    contexts = []
    for path in sorted(glob.glob(os.path.join(folder, "overlap_*.json"))):
        with open(path) as f:
            doc = json.load(f)
        ctx = doc["context"]
        contexts.append(ctx)
        for row in doc["overlap"]:
            key = (row["model"], ctx.get("mpi_progress", "hooks"))
            entry = out.setdefault(key, {"pairs": [], "rank_batch": row["rank_batch"],
                                         "buckets": row["buckets"]})
            entry["pairs"] += row["pairs"]
    return out, contexts


def pct_range(values):
    return (f"{100 * statistics.median(values):.0f} % "
            f"({100 * min(values):.0f}..{100 * max(values):.0f})")


def report(folder):
    table, contexts = summarise(folder)
    if not table:
        return "no overlap_*.json results in " + folder
    lines = []
    ctx = contexts[0]
    lines.append(f"CPU: {ctx.get('cpu', '?')}; {ctx.get('backend_version', '?')}; "
                 f"{ctx.get('ranks', '?')} ranks, {ctx.get('threads_per_rank', '?')} thread(s) "
                 f"per rank; {len(contexts)} run(s); load average at the start of each run: "
                 + ", ".join(c.get("loadavg_start", "?").split(" ")[0] for c in contexts))
    lines.append("")
    lines.append("| model | batch/rank | buckets | MPI progress | pairs | step after backward (s) | "
                 "step overlapped (s) | wait after backward (s) | wait overlapped (s) | "
                 "wait hidden | exposed all-reduce after backward (s) | exposed overlapped (s) | "
                 "exposed hidden | backward overlapped - after (s) | step time saved / wait |")
    lines.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (model, mode), e in sorted(table.items()):
        p = e["pairs"]
        med = lambda k: statistics.median(x[k] for x in p)  # noqa: E731
        lines.append(
            f"| {model} | {e['rank_batch']} | {e['buckets']} | {mode} | {len(p)} | "
            f"{med('step_after_s'):.3f} | {med('step_overlap_s'):.3f} | {med('wait_after_s'):.3f} | "
            f"{med('wait_overlap_s'):.3f} | {pct_range([x['wait_hidden'] for x in p])} | "
            f"{med('exposed_after_s'):.3f} | {med('exposed_overlap_s'):.3f} | "
            f"{pct_range([x['exposed_hidden'] for x in p])} | "
            f"{statistics.median(x['backward_overlap_s'] - x['backward_after_s'] for x in p):+.3f} | "
            f"{pct_range([x['step_saved'] for x in p])} |")
    lines.append("")
    lines.append("wait hidden = 1 - wait overlapped / wait after backward (a rank's wait includes "
                 "its peer's lateness); exposed = last rank's averaged gradients - last rank's "
                 "backward end (the all-reduce time after every rank finished backward), exposed "
                 "hidden = 1 - exposed overlapped / exposed after backward (communication done inside "
                 "the hooks counts as backward there, so this overstates what is hidden when the "
                 "backward grows: see the next column); step time saved / wait "
                 "= (step after backward - step overlapped) / wait after backward. All per pair "
                 "(the two steps of a pair run back to back in one process), median (min..max).")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        print(__doc__ or "usage: dist_overlap_report.py RESULTS_DIR", file=sys.stderr)
        sys.exit(2)
    print(report(sys.argv[1]))


if __name__ == "__main__":
    main()
