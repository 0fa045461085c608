#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The distributed report (docs/distributed.md) from a scripts/dist_bench.sh folder: the
# all-reduce table (algbw, busbw as nccl-tests defines them), the data-parallel step at 1 and 2
# ranks with weak/strong scaling efficiency and the all-reduce share, overlapped against
# all-reduce-after-backward, and the bucket-order simulator's steps (scripts/dist_sim.py) beside
# the measured ones at every rank count with an all-reduce curve. Prints markdown, with a summary
# first, a regenerate line above every table and, with matplotlib, the all-reduce bandwidth plot
# (allreduce_bandwidth.png, written into RESULTS_DIR) below its table (Note [Report layout] in
# scripts/report_layout.py).
"""Usage: dist_report.py RESULTS_DIR  (allreduce_np2.json, steps_np1.json, steps_np2_*.json)"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_sim  # noqa: E402  (the bucket-order simulator; Note [Bucket-order simulator])
import report_layout  # noqa: E402


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def by_model(doc):
    return {r["model"]: r for r in (doc or {}).get("steps", [])}


def fmt(x, digits=3):
    return "n/a" if x is None else f"{x:.{digits}f}"


def pct(x):
    return "n/a" if x is None else f"{100 * x:.0f} %"


CAPTIONS = (
    (r"allreduce_bandwidth\.png", "all-reduce bus bandwidth (nccl-tests' busbw) against message size, "
     "2 ranks"),
)


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:  # the tables need no matplotlib
        return None


def plot_allreduce(folder, rows, plots):
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    sizes = [r["bytes"] for r in rows]
    ax.plot(sizes, [r["busbw_GBps"] for r in rows], "o-", label="measured")
    ax.set_xscale("log", base=2)  # message sizes span 4 B .. 256 MiB
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title("all-reduce, sum f32, 2 ranks")
    report_layout.legend_outside(ax)
    save(fig, plt, folder, "allreduce_bandwidth.png", plots)


def save(fig, plt, folder, name, plots):
    fig.savefig(os.path.join(folder, name), dpi=110, bbox_inches="tight")
    plt.close(fig)
    plots.append(name)


def summary(ar, one, strong, weak):
    lines = []
    if ar:
        top = max(ar["allreduce"], key=lambda r: r["bytes"])
        best = max(ar["allreduce"], key=lambda r: r["busbw_GBps"])
        lines.append(f"All-reduce, 2 ranks: busbw {top['busbw_GBps']:.2f} GB/s at "
                     f"{top['bytes'] / 1048576:.0f} MiB, at most {best['busbw_GBps']:.2f} GB/s "
                     f"({best['bytes']} bytes).")
    for m, r1 in one.items():
        s, w = strong.get(m), weak.get(m)
        parts = []
        if s:
            parts.append(f"strong {pct(r1['step_s'] / (2 * s['step_s']))}")
        if w:
            parts.append(f"weak {pct(r1['step_s'] / w['step_s'])}")
        if parts:
            lines.append(f"{m}, 2 ranks: " + ", ".join(parts) + ".")
    return lines


def report(folder):
    body = []
    ar = load(folder, "allreduce_np2.json")
    ctx = (ar or {}).get("context", {})
    command = report_layout.regenerate_command("dist_report.py", folder, writes_report_md=True)
    machine = f"{ctx.get('cpu', '?')}, backend {ctx.get('backend', '?')}"
    plots = report_layout.Figures(body, CAPTIONS, machine, command)
    one, strong, weak = measured(folder, ar, ctx, body, plots)
    out = report_layout.summary_block(summary(ar, one, strong, weak)) + body
    return "\n".join(report_layout.add_regenerate_lines(out, command))


def measured(folder, ar, ctx, out, plots):
    """Writes the tables (and plots) into `out`; returns what the summary needs."""
    one = by_model(load(folder, "steps_np1.json"))
    strong = by_model(load(folder, "steps_np2_strong.json"))
    weak = by_model(load(folder, "steps_np2_weak.json"))
    plain = by_model(load(folder, "steps_np2_weak_nooverlap.json"))
    out.append("## Distributed data parallelism (measured)\n")
    out.append(f"Machine: {ctx.get('cpu', '?')}; backend {ctx.get('backend', '?')} "
               f"({ctx.get('backend_version', '?')}), {ctx.get('threads_per_rank', '?')} "
               f"thread(s) per rank; commit {ctx.get('git', '?')}.\n")
    if ar:
        out.append("### All-reduce (sum, f32), 2 ranks\n")
        out.append("| bytes | time (us) | algbw (GB/s) | busbw (GB/s) |")
        out.append("|---:|---:|---:|---:|")
        for r in ar["allreduce"]:
            out.append(f"| {r['bytes']} | {r['time_us']:.1f} | {r['algbw_GBps']:.3f} | "
                       f"{r['busbw_GBps']:.3f} |")
        out.append("\nalgbw = bytes / time; busbw = algbw x 2 (n - 1) / n (nccl-tests).\n")
        plot_allreduce(folder, ar["allreduce"], plots)
    if one:
        out.append("### Training step, 1 and 2 ranks (one thread per rank)\n")
        out.append("| model | global batch B | 1 rank, B (s) | 2 ranks, B/2 each (s) | strong eff. | "
                   "2 ranks, B each (s) | weak eff. | all-reduce wait share | wait, after backward (s) "
                   "| wait, overlapped (s) | wait hidden | step time saved / wait after backward |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for m, r1 in one.items():
            t1 = r1["step_s"]
            s, w, p = strong.get(m), weak.get(m), plain.get(m)
            seff = t1 / (2 * s["step_s"]) if s else None
            weff = t1 / w["step_s"] if w else None
            share = w["wait_s"] / w["step_s"] if w else None
            hidden = (1 - w["wait_s"] / p["wait_s"]) if (w and p and p["wait_s"] > 0) else None
            saved = ((p["step_s"] - w["step_s"]) / p["wait_s"]) if (w and p and p["wait_s"] > 0) \
                else None
            out.append(f"| {m} | {r1['rank_batch']} | {fmt(t1)} | {fmt(s and s['step_s'])} | "
                       f"{pct(seff)} | {fmt(w and w['step_s'])} | {pct(weff)} | {pct(share)} | "
                       f"{fmt(p and p['wait_s'], 4)} | {fmt(w and w['wait_s'], 4)} | {pct(hidden)} | "
                       f"{pct(saved)} |")
        out.append("\nStrong efficiency = T1(B) / (2 T2(B/2)); weak efficiency = T1(B) / T2(B per "
                   "rank); the wait share is the overlapped weak run's time blocked on gradient "
                   "all-reduces over its step time; wait hidden = 1 - wait overlapped / wait after "
                   "backward; step time saved = (step after backward - step overlapped) / wait "
                   "after backward, i.e. how much of the all-reduce the overlap removed from the "
                   "step (on a CPU rank the all-reduce's memory work moves into backward, so this "
                   "is the fair measure). Medians of the repetitions in the JSON files.\n")
    if one:
        out.append(dist_sim.section(folder))
    return one, strong, weak


def report_cli(report_of, usage):
    """The command line of the dist report scripts: one RESULTS_DIR, its report printed."""
    if len(sys.argv) != 2:
        print(usage, file=sys.stderr)
        return 2
    print(report_of(sys.argv[1]))
    return 0


def main():
    return report_cli(report, __doc__)


if __name__ == "__main__":
    sys.exit(main())
