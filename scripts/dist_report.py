#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The distributed report (docs/distributed.md) from a scripts/dist_bench.sh folder: the
# all-reduce table (algbw, busbw as nccl-tests defines them), the data-parallel step at 1 and 2
# ranks with weak/strong scaling efficiency and the all-reduce share, overlapped against
# all-reduce-after-backward, and an alpha-beta ring all-reduce model fitted to the measured
# all-reduce and projected to 8..256 ranks (Note [Scaling model] below). Prints markdown, with
# a summary first, a regenerate line above every table and, with matplotlib, two plots written
# into RESULTS_DIR below their tables: allreduce_bandwidth.png and scaling_projection.png
# (Note [Report layout] in scripts/report_layout.py).
"""Usage: dist_report.py RESULTS_DIR  (allreduce_np2.json, steps_np1.json, steps_np2_*.json)"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_layout  # noqa: E402

# Note [Scaling model]
# Ring all-reduce of S bytes over n ranks in k buckets (Patarasuk & Yuan 2009; Thakur et al.
# 2005): T_ar(n) = 2 (n - 1) k alpha + 2 (n - 1) / n * S * beta, alpha the per-message latency,
# beta the seconds per byte of the slowest link. A data-parallel step at a fixed per-rank batch
# (weak scaling) costs T_c (the measured one-rank step) plus the part of T_ar that backward does
# not hide: without overlap T_c + T_ar, with perfect overlap T_c + max(0, T_ar - T_bwd).
# Efficiency = T_c / T_step. The measured 2-rank all-reduce gives this machine's alpha and beta
# (fit_alpha_beta; 2 (n - 1) = 2 and 2 (n - 1) / n = 1 at n = 2).
RANKS = [8, 16, 64, 256]
BUCKET_BYTES = 25 * 1048576
# Stated cluster parameters (alpha, beta) with their sources.
CLUSTERS = [
    ("IB EDR 100 Gb/s", 5e-6, 1 / 12.5e9,
     "100 Gb/s InfiniBand EDR line rate (12.5 GB/s); 5 us per ring step is a typical MPI/NCCL "
     "inter-node latency"),
    ("RoCE 25 Gb/s (Horovod's)", 10e-6, 1 / 3.125e9,
     "Sergeev & Del Balso 2018 (Horovod): 25 Gbit/s RoCE between servers of 4 P100"),
    ("Ethernet 50 Gb/s (Goyal's)", 10e-6, 1 / 6.25e9,
     "Goyal et al. 2017: 50 Gbit/s Ethernet between Big Basin servers of 8 P100"),
]
ANCHORS = ("Published anchors: Horovod (Sergeev & Del Balso 2018) reports 90 % scaling "
           "efficiency for Inception V3 and ResNet-101 and 68 % for VGG-16 on 512 GPUs; Goyal "
           "et al. (2017) about 90 % for ResNet-50 from 8 to 256 GPUs.")


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def fit_alpha_beta(rows):
    """alpha, beta of T = 2 alpha + S beta (n = 2): alpha from the small messages (S <= 1 KiB,
    median of T / 2), beta from the large ones (S >= 1 MiB, median of (T - 2 alpha) / S).
    Medians, because a shared machine adds outliers; the two ends separately, because one
    least-squares line over 4 B .. 256 MiB follows the mid sizes (which stay in cache) and
    understates the per-byte cost of the large gradients the projection is about."""
    def median(v):
        v = sorted(v)
        n = len(v)
        return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    small = [(r["time_us"] * 1e-6, r["bytes"]) for r in rows if r["bytes"] <= 1024]
    large = [(r["time_us"] * 1e-6, r["bytes"]) for r in rows if r["bytes"] >= 1 << 20]
    alpha, beta = 0.0, 0.0
    for _ in range(4):  # each end corrected for the other's term; converges in two rounds
        alpha = max(median([(t - s * beta) / 2 for t, s in small]), 0.0) if small else 0.0
        beta = median([(t - 2 * alpha) / s for t, s in large]) if large else 0.0
    return alpha, max(beta, 1e-15)


def t_allreduce(n, size, alpha, beta):
    k = max(1, math.ceil(size / BUCKET_BYTES))
    return 2 * (n - 1) * k * alpha + 2 * (n - 1) / n * size * beta


def by_model(doc):
    return {r["model"]: r for r in (doc or {}).get("steps", [])}


def fmt(x, digits=3):
    return "n/a" if x is None else f"{x:.{digits}f}"


def pct(x):
    return "n/a" if x is None else f"{100 * x:.0f} %"


CAPTIONS = (
    (r"allreduce_bandwidth\.png", "all-reduce bus bandwidth (nccl-tests' busbw) against message size, "
     "2 ranks, with the fitted ring model's"),
    (r"scaling_projection\.png", "projected weak-scaling efficiency against ranks per model and network, "
     "the band from no overlap (lower edge) to backward fully overlapping the all-reduce (upper edge)"),
)


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:  # the tables need no matplotlib
        return None


def plot_allreduce(folder, rows, alpha, beta, plots):
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    sizes = [r["bytes"] for r in rows]
    ax.plot(sizes, [r["busbw_GBps"] for r in rows], "o-", label="measured")
    # n = 2: T = 2 alpha + S beta, busbw = algbw = S / T
    ax.plot(sizes, [s / (2 * alpha + s * beta) / 1e9 for s in sizes], "k--", linewidth=0.9,
            label="ring model (fitted alpha, beta)")
    ax.set_xscale("log", base=2)  # message sizes span 4 B .. 256 MiB
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title("all-reduce, sum f32, 2 ranks")
    report_layout.legend_outside(ax)
    save(fig, plt, folder, "allreduce_bandwidth.png", plots)


def plot_projection(folder, one, profiles, plots):
    plt = pyplot()
    if plt is None:
        return
    models = list(one)
    fig, panels = report_layout.panel_grid(plt, len(models))
    for ax, m in zip(panels, models):
        g, tc, tb = one[m]["grad_bytes"], one[m]["step_s"], one[m]["backward_s"]
        for name, a, b, _ in profiles:
            lo = [100 * tc / (tc + t_allreduce(n, g, a, b)) for n in RANKS]
            hi = [100 * tc / (tc + max(0.0, t_allreduce(n, g, a, b) - tb)) for n in RANKS]
            line, = ax.plot(RANKS, lo, "o-", label=name)
            ax.fill_between(RANKS, lo, hi, color=line.get_color(), alpha=0.2)
        ax.set_xlim(0, RANKS[-1] * 1.05)
        ax.set_ylim(0, 105)
        ax.set_xticks([0] + RANKS[1:])
        ax.set_xlabel("ranks")
        ax.set_ylabel("weak-scaling efficiency (%)")
        ax.set_title(f"{m}, {g / 1e6:.0f} MB of gradients", fontsize=10)
    fig.tight_layout()
    report_layout.legend_below(fig, panels[0])
    save(fig, plt, folder, "scaling_projection.png", plots)


def save(fig, plt, folder, name, plots):
    fig.savefig(os.path.join(folder, name), dpi=110, bbox_inches="tight")
    plt.close(fig)
    plots.append(name)


def summary(ar, alpha, beta, one, strong, weak):
    lines = []
    if ar:
        top = max(ar["allreduce"], key=lambda r: r["bytes"])
        lines.append(f"All-reduce, 2 ranks: busbw {top['busbw_GBps']:.2f} GB/s at {top['bytes'] / 1048576:.0f} MiB; "
                     f"fitted alpha {alpha * 1e6:.1f} us, beta {1 / beta / 1e9:.2f} GB/s.")
    for m, r1 in one.items():
        s, w = strong.get(m), weak.get(m)
        parts = []
        if s:
            parts.append(f"strong {pct(r1['step_s'] / (2 * s['step_s']))}")
        if w:
            parts.append(f"weak {pct(r1['step_s'] / w['step_s'])}")
        if alpha is not None:
            tar = t_allreduce(256, r1["grad_bytes"], alpha, beta)
            parts.append(f"projected at 256 ranks on this machine's links {pct(r1['step_s'] / (r1['step_s'] + tar))} "
                         "without overlap")
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
    alpha, beta, one, strong, weak = measured(folder, ar, ctx, body, plots)
    out = report_layout.summary_block(summary(ar, alpha, beta, one, strong, weak)) + body
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
    alpha = beta = None
    if ar:
        out.append("### All-reduce (sum, f32), 2 ranks\n")
        out.append("| bytes | time (us) | algbw (GB/s) | busbw (GB/s) |")
        out.append("|---:|---:|---:|---:|")
        for r in ar["allreduce"]:
            out.append(f"| {r['bytes']} | {r['time_us']:.1f} | {r['algbw_GBps']:.3f} | "
                       f"{r['busbw_GBps']:.3f} |")
        alpha, beta = fit_alpha_beta(ar["allreduce"])
        out.append(f"\nalgbw = bytes / time; busbw = algbw x 2 (n - 1) / n (nccl-tests). "
                   f"Fitted ring model (Note [Scaling model]): alpha = {alpha * 1e6:.2f} us, "
                   f"beta = {beta * 1e9:.3f} ns/byte ({1 / beta / 1e9:.3f} GB/s).\n")
        plot_allreduce(folder, ar["allreduce"], alpha, beta, plots)
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
    if one and alpha is not None:
        out.append("### Projected weak-scaling efficiency (alpha-beta ring model)\n")
        profiles = [("this machine (fitted)", alpha, beta, "the all-reduce table above")] + CLUSTERS
        out.append("| model | gradient (MB) | T_c (s) | T_bwd (s) | parameters | " +
                   " | ".join(f"{n} ranks" for n in RANKS) + " | T_c for 90 % at 256, no overlap (s) |")
        out.append("|---|---:|---:|---:|---|" + "---:|" * len(RANKS) + "---:|")
        for m, r1 in one.items():
            g, tc, tb = r1["grad_bytes"], r1["step_s"], r1["backward_s"]
            for name, a, b, _ in profiles:
                cells = []
                for n in RANKS:
                    tar = t_allreduce(n, g, a, b)
                    lo = tc / (tc + tar)
                    hi = tc / (tc + max(0.0, tar - tb))
                    cells.append(f"{100 * lo:.0f}-{100 * hi:.0f} %")
                need = 9 * t_allreduce(256, g, a, b)
                out.append(f"| {m} | {g / 1e6:.1f} | {tc:.3f} | {tb:.3f} | {name} | " +
                           " | ".join(cells) + f" | {need:.3f} |")
        out.append("\nEach cell: efficiency without overlap - with backward fully overlapping the "
                   "all-reduce. T_c is the measured one-rank step at the per-rank batch, T_bwd its "
                   "backward. The last column is the compute time per step a rank needs for 90 % "
                   "at 256 ranks without overlap (T_c >= 9 T_ar(256)).\n")
        out.append("Cluster parameters and sources:\n")
        for name, a, b, src in CLUSTERS:
            out.append(f"- {name}: alpha = {a * 1e6:.0f} us, beta = {b * 1e9:.3f} ns/byte; {src}.")
        out.append("\n" + ANCHORS + "\n")
        plot_projection(folder, one, profiles, plots)
    return alpha, beta, one, strong, weak


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    print(report(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
