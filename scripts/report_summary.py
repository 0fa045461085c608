# SPDX-License-Identifier: Apache-2.0
"""The summary block at the top of report.md (scripts/report.py): the run's headline ratios, each
computed from the same records the tables below show, so the two cannot disagree."""
import math
import statistics
from collections import defaultdict

import report_peers


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def gemm_line(records):
    """The fastest CPU GEMM on the DLBench shape, and the default selection against it (NN)."""
    nn = [r for r in records if r["family"] == "gemm" and r.get("mode") == "NN" and "FLOP/s" in r and "threads" in r
          and r["shape"].startswith("dlbench")]
    timed = [r for r in nn if r["variant"] != "default"]
    if not timed:
        return None
    best = max(timed, key=lambda r: r["FLOP/s"])
    line = (f"GEMM, DLBench shape, NN: fastest `{best['variant']}` at {best['FLOP/s'] / 1e9:.0f} GFLOP/s "
            f"({best['threads']} thread(s))")
    default = [r for r in nn if r["variant"] == "default" and r.get("threads") == best.get("threads")]
    if default:
        line += f"; the default selection reaches {default[0]['FLOP/s'] / best['FLOP/s'] * 100:.0f} % of it"
    return line + "."


def scaling_line(records):
    """anvil's training-step speedup from 1 thread to the most threads, over the networks."""
    steps = defaultdict(dict)  # (model, batch, precision) -> threads -> seconds
    for r in records:
        if (r["family"] == "model" and r.get("phase") == "train_step" and "seconds" in r and "lstm" not in r
                and "threads" in r):
            steps[(r["model"], r.get("batch"), r.get("precision", "fp32"))][int(r["threads"])] = r["seconds"]
    top = max((max(t) for t in steps.values() if 1 in t and len(t) > 1), default=None)
    if top is None:
        return None
    speedups = sorted(t[1] / t[top] for t in steps.values() if 1 in t and top in t)
    return (f"anvil training step, 1 → {top} threads: speedup {speedups[0]:.2f}-{speedups[-1]:.2f}× "
            f"(median {statistics.median(speedups):.2f}×, ideal {top}×) over {len(speedups)} network/batch pairs.")


def peer_lines(records, results_dir):
    """Geometric mean of anvil / peer training-step time per peer and thread count."""
    peers = report_peers.load_peers(results_dir)
    anvil = report_peers.anvil_rows(records)
    lines = []
    for peer, label in report_peers.PEERS:
        by_threads = defaultdict(list)  # (threads, precision) -> ratios
        for key, r in anvil.items():
            other = peers.get(peer, {}).get(key)
            if key[1] == "train_step" and other and other.get("median_of_rep_means_s"):
                by_threads[(key[2], key[4])].append(r["seconds"] / other["median_of_rep_means_s"])
        for (threads, precision), ratios in sorted(by_threads.items(), key=lambda kv: (kv[0][1] != "fp32", kv[0])):
            mixed = "" if precision == "fp32" else f" in {precision} (both sides autocast)"
            lines.append(f"anvil / {label} training-step time at {threads} thread(s){mixed}: geometric mean "
                         f"{geomean(ratios):.2f} over {len(ratios)} network(s), {min(ratios):.2f}-{max(ratios):.2f} "
                         "(below 1: anvil faster).")
    return lines


def gpu_line(records):
    gpu = [r for r in records if "device" in r and "seconds" in r]
    return f"{len(gpu)} GPU benchmark(s) in this folder (sections below)." if gpu else None


def headline(records, results_dir):
    """The summary lines, most telling first."""
    errors = sum(1 for r in records if "error" in r)
    lines = peer_lines(records, results_dir)
    lines += [line for line in (scaling_line(records), gemm_line(records), gpu_line(records)) if line]
    lines.append(f"{len(records)} benchmarks, {errors} skipped with an error.")
    return lines
