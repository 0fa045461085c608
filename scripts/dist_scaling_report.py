#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The data-parallel scaling report over several rank counts (scripts/dist_bench.sh --ranks
# 1,2,4,8,16; docs/distributed.md): the all-reduce time and bus bandwidth per message size and
# rank count, and per model the training step at 1 rank and at n ranks with strong and weak
# scaling efficiency, throughput and the all-reduce wait. Prints markdown; measured values only.
"""Usage: dist_scaling_report.py RESULTS_DIR  (allreduce_np<n>.json, steps_np1.json,
steps_np<n>_strong.json, steps_np<n>_weak.json, steps_np<n>_weak_nooverlap.json)"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_report import by_model, fmt, load, pct, report_cli  # noqa: E402  (the shared helpers)


def rank_counts(folder, pattern):
    """The n of every file in folder whose name matches pattern (one group: n), sorted."""
    found = set()
    for name in os.listdir(folder):
        m = re.fullmatch(pattern, name)
        if m:
            found.add(int(m.group(1)))
    return sorted(found)


def efficiencies(t1, n, strong, weak):
    """Strong: T1(B) / (n Tn(B/n)); weak: T1(B) / Tn(B per rank). None where a run is missing."""
    s = t1 / (n * strong) if strong else None
    w = t1 / weak if weak else None
    return s, w


def report(folder):
    out = []
    ar_ranks = rank_counts(folder, r"allreduce_np(\d+)\.json")
    step_ranks = rank_counts(folder, r"steps_np(\d+)_(?:strong|weak)\.json")
    ars = {n: load(folder, f"allreduce_np{n}.json") for n in ar_ranks}
    one = load(folder, "steps_np1.json")
    # The context of a run on several ranks (the backend and its version), else the 1-rank one.
    multi = [ars[n] for n in ar_ranks] + [load(folder, f"steps_np{n}_weak.json") for n in step_ranks]
    ctx = (next((d for d in multi if d and "context" in d), None) or one or {}).get("context", {})
    out.append("## Data-parallel scaling over rank counts (measured)\n")
    out.append(f"Machine: {ctx.get('cpu', '?')}; backend {ctx.get('backend', '?')} "
               f"({ctx.get('backend_version', '?')}), {ctx.get('threads_per_rank', '?')} "
               f"thread(s) per rank; commit {ctx.get('git', '?')}; load average at the start "
               f"{ctx.get('loadavg_start', '?')}.\n")
    if ars:
        out.append("### All-reduce (sum, f32): time (us) / busbw (GB/s) per rank count\n")
        sizes = sorted({r["bytes"] for doc in ars.values() for r in doc["allreduce"]})
        rows = {n: {r["bytes"]: r for r in doc["allreduce"]} for n, doc in ars.items()}
        out.append("| bytes | " + " | ".join(f"{n} ranks" for n in ar_ranks) + " |")
        out.append("|---:|" + "---:|" * len(ar_ranks))
        for s in sizes:
            cells = []
            for n in ar_ranks:
                r = rows[n].get(s)
                cells.append("n/a" if r is None else f"{r['time_us']:.1f} / {r['busbw_GBps']:.3f}")
            out.append(f"| {s} | " + " | ".join(cells) + " |")
        out.append("\nbusbw = bytes / time x 2 (n - 1) / n (nccl-tests); time = the slowest rank's "
                   "mean per call.\n")
    if one and step_ranks:
        out.append("### Training step per rank count (one thread per rank)\n")
        out.append("| model | global batch B | ranks n | strong: step at B/n per rank (s) | "
                   "strong eff. | weak: step at B per rank (s) | weak eff. | weak throughput "
                   "(samples/s) | all-reduce wait share (weak) | wait after backward (s) | "
                   "wait overlapped (s) |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        runs = {n: (by_model(load(folder, f"steps_np{n}_strong.json")),
                    by_model(load(folder, f"steps_np{n}_weak.json")),
                    by_model(load(folder, f"steps_np{n}_weak_nooverlap.json")))
                for n in step_ranks}
        for m, r1 in by_model(one).items():
            t1, b = r1["step_s"], r1["rank_batch"]
            out.append(f"| {m} | {b} | 1 | {fmt(t1)} | 100 % | {fmt(t1)} | 100 % | "
                       f"{b / t1:.1f} | n/a | n/a | n/a |")
            for n in step_ranks:
                strong, weak, plain = (d.get(m) for d in runs[n])
                s_eff, w_eff = efficiencies(t1, n, strong and strong["step_s"],
                                            weak and weak["step_s"])
                share = weak["wait_s"] / weak["step_s"] if weak else None
                thr = n * weak["rank_batch"] / weak["step_s"] if weak else None
                out.append(f"| {m} | {b} | {n} | {fmt(strong and strong['step_s'])} | "
                           f"{pct(s_eff)} | {fmt(weak and weak['step_s'])} | {pct(w_eff)} | "
                           f"{fmt(thr, 1)} | {pct(share)} | {fmt(plain and plain['wait_s'], 4)} | "
                           f"{fmt(weak and weak['wait_s'], 4)} |")
        out.append("\nStrong efficiency = T1(B) / (n Tn(B/n)) (n/a where n does not divide B); "
                   "weak efficiency = T1(B) / Tn(B per rank); throughput = n B / Tn(B per rank); "
                   "the wait share is the overlapped weak run's time blocked on gradient "
                   "all-reduces over its step time; the after-backward wait comes from the "
                   "--no-overlap run where there is one. Medians of the repetitions; a step time "
                   "is the slowest rank's.\n")
        out += baselines(folder, one, step_ranks)
    return "\n".join(out)


def baselines(folder, one, step_ranks):
    """The weak step against its baselines (Note [Baselines] in bench/distributed/dist_bench.cpp),
    where dist_bench.sh recorded them: the triad ceiling, the unfolded 1-rank step, n uncoupled
    replicas, and the weak step with bf16 gradient buckets; each step with its [min..max]."""
    unfolded = by_model(load(folder, "steps_np1_unfolded.json"))
    uncoupled = {n: by_model(load(folder, f"steps_np{n}_uncoupled.json")) for n in step_ranks}
    bf16 = {n: by_model(load(folder, f"steps_np{n}_weak_bf16.json")) for n in step_ranks}
    triads = {n: load(folder, f"triad_np{n}.json") for n in [1] + list(step_ranks)}
    if not unfolded and not any(uncoupled.values()) and not any(triads.values()):
        return []
    out = ["### Baselines (Note [Baselines])\n"]
    tri = [f"{n} rank(s) {d['triad']['total_GBps']:.2f} GB/s" for n, d in triads.items() if d]
    if tri:
        out.append("Memory-bandwidth triad, every rank at once (Note [Triad ceiling]): " +
                   ", ".join(tri) + ".\n")

    def cell(r):
        if not r:
            return "n/a"
        spread = (f" [{r['step_s_min']:.3f}..{r['step_s_max']:.3f}]"
                  if "step_s_min" in r and "step_s_max" in r else "")
        return f"{r['step_s']:.3f}{spread}"
    out.append("| model | ranks n | solo step (s) | unfolded 1 rank (s) | uncoupled n (s) | "
               "weak, f32 buckets (s) | eff. vs uncoupled | eff. vs unfolded | eff. vs solo | "
               "weak, bf16 buckets (s) |")
    out.append("|---|---:|---|---|---|---|---:|---:|---:|---|")
    weak = {n: by_model(load(folder, f"steps_np{n}_weak.json")) for n in step_ranks}
    for m, r1 in by_model(one).items():
        u1 = unfolded.get(m)
        for n in step_ranks:
            w, un, b = weak[n].get(m), uncoupled[n].get(m), bf16[n].get(m)

            def eff(base, w=w):
                return base["step_s"] / w["step_s"] if base and w else None
            out.append(f"| {m} | {n} | {cell(r1)} | {cell(u1)} | {cell(un)} | {cell(w)} | "
                       f"{pct(eff(un))} | {pct(eff(u1))} | {pct(eff(r1))} | {cell(b)} |")
    out.append("\nEfficiency vs X = X's step / the weak step at B per rank: against the uncoupled "
               "replicas only communication is left; against the unfolded 1-rank step socket "
               "contention is added; against the solo step also the folded SGD update. Medians "
               "[min..max] of the repetitions.\n")
    return out


def main():
    return report_cli(report, __doc__)


if __name__ == "__main__":
    sys.exit(main())
