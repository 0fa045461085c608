#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turns anvil_bench JSON results into report.md (tables) and PNG plots.

usage: scripts/report.py RESULTS_DIR     (reads RESULTS_DIR/*.json written by anvil_bench, the
                                          peers' peer_<name>.jsonl and compare_pytorch.md when present)
Layout (summary first, each plot captioned below its table, a Regenerate line above every table):
Note [Report layout] in scripts/report_layout.py. Benchmark names are shaped family/variant/.../threads:T (see bench/); aggregates (median, cv)
are used when the run had repetitions, else the single run.
"""
import json
import os
import statistics
import sys
from collections import defaultdict

from bench_names import canonical_run  # old row names -> today's (scripts/bench_names.py)
import report_layout  # summary, plot captions, regenerate lines (scripts/report_layout.py)
import report_peers  # anvil next to PyTorch and TensorFlow (scripts/report_peers.py)
import report_summary  # the headline ratios at the top (scripts/report_summary.py)
import report_sections  # batch sweep, phases, kernel variants, CPU vs GPU (scripts/report_sections.py)


# "file: what was wrong" for every Google Benchmark JSON that load_runs could not read whole; the
# reports list them, so a crashed run is named rather than silently shorter.
LOAD_PROBLEMS = []


def read_benchmark_json(path):
    """A Google Benchmark JSON file. One that a crash cut short (the 2026-11-28 H200 run: a
    CHECK inside Google Benchmark aborted anvil_bench) keeps the rows it completed: the file is
    written row by row, so everything up to the last closed row object is a measured row. The
    cut is recorded in LOAD_PROBLEMS; a file with no complete row is skipped and recorded."""
    with open(path) as f:
        text = f.read()
    try:
        return canonical_run(json.loads(text))
    except json.JSONDecodeError as e:
        cut = text.rfind("\n    }")
        try:
            data = json.loads(text[:cut + 6] + "\n  ]\n}\n") if cut >= 0 else None
        except json.JSONDecodeError:
            data = None
        if data is None:
            LOAD_PROBLEMS.append(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); skipped")
            return {}
        LOAD_PROBLEMS.append(f"{path}: cut short (the run did not finish); its "
                             f"{len(data.get('benchmarks', []))} complete rows are used")
        return canonical_run(data)


def load_runs(results_dir):
    runs, contexts = [], []
    for name in sorted(os.listdir(results_dir)):
        if not name.endswith(".json") or name.startswith("compare_"):
            continue
        data = read_benchmark_json(os.path.join(results_dir, name))
        contexts.append(data.get("context", {}))
        runs.extend(data.get("benchmarks", []))
    return runs, contexts


def parse_name(name):
    """gemm/cpu.blocked/NT/dlbench_1024x2048x26752/threads:1/min_time:.. -> dict"""
    parts = [p for p in name.split("/")
             if not p.startswith(("min_time", "min_warmup_time", "real_time", "manual_time", "iterations", "repeats"))]
    out = {"family": parts[0]}
    for p in parts[1:]:
        if ":" in p:
            k, v = p.split(":", 1)
            out[k] = v
    plain = [p for p in parts[1:] if ":" not in p]
    if out["family"] == "gemm" and len(plain) >= 3:
        out.update(variant=plain[0], mode=plain[1], shape=plain[2])
    elif out["family"] == "model" and len(plain) >= 2:
        out.update(model=plain[0], phase=plain[1])
    return out


def collect(runs):
    """One record per benchmark: median real time (s), cv, counters, label, error."""
    groups = defaultdict(list)
    aggregates = defaultdict(dict)
    for r in runs:
        base = r.get("run_name", r["name"])
        if r.get("run_type") == "aggregate":
            aggregates[base][r.get("aggregate_name")] = r
        else:
            groups[base].append(r)
    records = []
    for base in sorted(set(groups) | set(aggregates)):
        its = groups.get(base, [])
        agg = aggregates.get(base, {})
        first = its[0] if its else next(iter(agg.values()))
        rec = parse_name(base)
        rec["name"] = base
        rec["label"] = first.get("label", "")
        if first.get("error_occurred"):
            rec["error"] = first.get("error_message", "error")
            records.append(rec)
            continue
        unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[first.get("time_unit", "ns")]
        times = [r["real_time"] * unit for r in its]
        if "median" in agg:
            rec["seconds"] = agg["median"]["real_time"] * unit
            src = agg["median"]
        else:
            rec["seconds"] = statistics.median(times)
            src = first
        if "cv" in agg:
            rec["cv"] = agg["cv"]["real_time"]
        elif len(times) > 1:
            rec["cv"] = statistics.pstdev(times) / statistics.mean(times)
        # The spread drawn as error bars: Google Benchmark's stddev aggregate, else the
        # repetitions' own (a single run has none, and gets no error bar).
        if "stddev" in agg:
            rec["stddev"] = agg["stddev"]["real_time"] * unit
        elif len(times) > 1:
            rec["stddev"] = statistics.stdev(times)
        for key in ("FLOP/s", "pct_peak", "samples/s", "peak_rss_MB", "alloc_peak_MB"):
            if key in src:
                rec[key] = src[key]
        records.append(rec)
    return records


def pyplot():
    """matplotlib.pyplot with the file-only backend, or None (said once) when missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        if not getattr(pyplot, "warned", False):
            print("report.py: matplotlib not importable (apt-get install python3-matplotlib): no plots")
            pyplot.warned = True
        return None


def fmt(x, digits=1):
    return "—" if x is None else f"{x:.{digits}f}"


def gemm_section(records, out, plots, results_dir):
    gemm = [r for r in records if r["family"] == "gemm"]
    if not gemm:
        remedy_section(records, out, plots, results_dir)
        return
    out.append("## GEMM: GFLOP/s per variant and transpose mode\n")
    out.append("Each cell: GFLOP/s (% of the per-core peak × threads). `default` is anvil's own choice "
               "(heuristic or autotune); its label names the variant it ran. cv > 10 % is flagged with !.\n")
    by_shape = defaultdict(list)
    for r in gemm:
        by_shape[(r["shape"], r.get("threads"))].append(r)
    for (shape, threads), rs in sorted(by_shape.items()):
        out.append(f"\n### {shape}, threads {threads}\n")
        variants = sorted({r["variant"] for r in rs}, key=lambda v: (v != "default", v))
        out.append("| variant | NN | NT | TN | TT |")
        out.append("|---|---|---|---|---|")
        cell = {(r["variant"], r["mode"]): r for r in rs}
        for v in variants:
            row = [v]
            for m in ("NN", "NT", "TN", "TT"):
                r = cell.get((v, m))
                if r is None:
                    row.append("")
                elif "error" in r:
                    row.append("skipped: " + r["error"][:40])
                else:
                    flag = " !" if r.get("cv", 0) > 0.10 else ""
                    txt = f"{r['FLOP/s'] / 1e9:.0f} ({fmt(r.get('pct_peak'), 0)} %){flag}"
                    if v == "default":
                        txt += f" [{r['label']}]"
                    row.append(txt)
            out.append("| " + " | ".join(row) + " |")
        # default vs fastest, and the transpose penalty per variant
        lines = []
        for m in ("NN", "NT", "TN", "TT"):
            timed = [r for r in rs if r["mode"] == m and "error" not in r and r["variant"] != "default"]
            d = cell.get(("default", m))
            if timed and d and "error" not in d:
                best = max(timed, key=lambda r: r["FLOP/s"])
                lines.append(f"{m}: default {d['FLOP/s'] / best['FLOP/s'] * 100:.0f} % of fastest ({best['variant']})")
        if lines:
            out.append("\nDefault choice vs fastest: " + "; ".join(lines) + ".")
        pen = []
        for v in variants:
            nn = cell.get((v, "NN"))
            if not nn or "error" in nn or v == "default":
                continue
            for m in ("NT", "TN", "TT"):
                r = cell.get((v, m))
                if r and "error" not in r:
                    pen.append(f"{v} {m}/NN time ×{nn['FLOP/s'] / r['FLOP/s']:.2f}")
        if pen:
            out.append("\nTranspose penalty (time relative to NN): " + "; ".join(pen) + ".")
    plot_gemm(gemm, plots, results_dir)
    remedy_section(records, out, plots, results_dir)


def remedy_parts(name):
    """gemm_remedy/<variant>/<remedy>[/<mode>]/<shape>/threads:T -> (variant, remedy, mode or None, shape)"""
    plain = [p for p in name.split("/")[1:] if ":" not in p and p not in ("real_time", "manual_time")]
    if len(plain) >= 4 and plain[1] == "transpose_then_NN":
        return plain[0], plain[1], plain[2], plain[3]
    if len(plain) >= 3:
        return plain[0], plain[1], None, plain[2]
    return None


def transpose_shares(results_dir):
    """run name -> the transpose_share counter of gemm_remedy runs (the median aggregate when present)"""
    runs, _ = load_runs(results_dir)
    shares = {}
    for r in runs:
        base = r.get("run_name", r["name"])
        if not base.startswith("gemm_remedy/") or "transpose_share" not in r:
            continue
        if r.get("run_type") == "aggregate":
            if r.get("aggregate_name") == "median":
                shares[base] = r["transpose_share"]
        else:
            shares.setdefault(base, r["transpose_share"])
    return shares


def remedy_ratios(records, results_dir):
    """(shape, threads) -> variant -> ratios: '<mode>/NN' (direct transpose penalty), 'remedy <mode>'
    (transpose_then_NN time / direct <mode> time), 'remedy <mode>/NN', 'share <mode>' (transpose's
    share of the remedy) and 'fold' (fold_sgd / grad_then_update), each present when both times are."""
    time, names, noisy = {}, {}, set()
    for r in records:
        if "seconds" not in r:
            continue
        if r["family"] == "gemm":
            key = (r["shape"], r.get("threads"), r["variant"], r["mode"])
        elif r["family"] == "gemm_remedy" and remedy_parts(r["name"]):
            v, remedy, mode, shape = remedy_parts(r["name"])
            key = (shape, r.get("threads"), v, remedy if mode is None else "T->NN " + mode)
        else:
            continue
        time[key], names[key] = r["seconds"], r["name"]
        if r.get("cv", 0) > 0.10:
            noisy.add(key)
    shares = transpose_shares(results_dir)
    table = defaultdict(dict)
    for shape, threads, v in {k[:3] for k in time}:
        row = {"noisy": set()}

        def ratio(name, a, b):
            ka, kb = (shape, threads, v, a), (shape, threads, v, b)
            if ka in time and kb in time:
                row[name] = time[ka] / time[kb]
                if ka in noisy or kb in noisy:
                    row["noisy"].add(name)

        for m in ("NT", "TN", "TT"):
            ratio(m + "/NN", m, "NN")
            ratio("remedy " + m, "T->NN " + m, m)
            ratio("remedy " + m + "/NN", "T->NN " + m, "NN")
            if names.get((shape, threads, v, "T->NN " + m)) in shares:
                row["share " + m] = shares[names[(shape, threads, v, "T->NN " + m)]]
        ratio("fold", "fold_sgd", "grad_then_update")
        if len(row) > 1:
            table[(shape, threads)][v] = row
    return table


def remedy_section(records, out, plots, results_dir):
    table = remedy_ratios(records, results_dir)
    if not table:
        return
    out.append("\n## GEMM: transpose penalty and DLBench's remedies\n")
    out.append("Times as ratios. `NT/NN` etc.: the direct mode's time over NN's (> 1 = a transpose penalty). "
               "`T→NN`: `transpose_then_NN` (out-of-place transpose of the transposed operand(s), then NN) "
               "over the direct mode's time (< 1 = the remedy helps); in brackets the transpose's share of "
               "the remedy's time. `fold/grad`: `fold_sgd` (W = -lr dYᵀX + W in one GEMM) over "
               "`grad_then_update` (dW = dYᵀX, then W -= lr dW) (< 1 = folding helps). ! = a time in the "
               "ratio has cv > 10 %.\n")
    for (shape, threads), rows in sorted(table.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        out.append(f"\n### {shape}, threads {threads}\n")
        out.append("| variant | NT/NN | T→NN vs NT | TN/NN | T→NN vs TN | TT/NN | T→NN vs TT | fold/grad |")
        out.append("|---|---|---|---|---|---|---|---|")
        for v in sorted(rows, key=lambda v: (v != "default", v)):
            row = rows[v]
            cell = lambda key: (fmt(row[key], 2) + (" !" if key in row["noisy"] else "")) if key in row else ""
            cells = [v]
            for m in ("NT", "TN", "TT"):
                cells.append(cell(m + "/NN"))
                txt = cell("remedy " + m)
                if txt and "share " + m in row:
                    txt += f" ({row['share ' + m] * 100:.0f} %)"
                cells.append(txt)
            cells.append(cell("fold"))
            out.append("| " + " | ".join(cells) + " |")
    plot_remedy(table, plots, results_dir)


def plot_remedy(table, plots, results_dir):
    """One PNG: per variant, NT/TN/TT time over NN, direct (solid) and transpose_then_NN (hatched),
    on the DLBench shape (else the shape with the largest direct penalty), one panel per thread count."""
    plt = pyplot()
    if plt is None:
        return
    worst = lambda s: max((row.get(m + "/NN", 0) for (s2, _), rows in table.items() if s2 == s
                           for row in rows.values() for m in ("NT", "TN", "TT")), default=0)
    shapes = sorted({shape for shape, _ in table})
    shape = next((s for s in shapes if s.startswith("dlbench")), max(shapes, key=worst))
    panels = sorted((t for s, t in table if s == shape), key=str)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.2), squeeze=False)
    modes = ("NT", "TN", "TT")
    colors = ("tab:blue", "tab:orange", "tab:green")
    for ax, threads in zip(axes[0], panels):
        rows = table[(shape, threads)]
        variants = sorted(rows, key=lambda v: (v != "default", v))
        width = 0.8 / (2 * len(modes))
        for i, m in enumerate(modes):
            for j, (key, hatch, label) in enumerate(((m + "/NN", None, f"{m} direct"),
                                                     ("remedy " + m + "/NN", "//", f"{m}: transpose, then NN"))):
                xs = [x + (2 * i + j) * width for x in range(len(variants))]
                ax.bar(xs, [rows[v].get(key, 0) for v in variants], width, color=colors[i], hatch=hatch,
                       alpha=1.0 if hatch is None else 0.55, label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks([x + width * (2 * len(modes) - 1) / 2 for x in range(len(variants))])
        ax.set_xticklabels(variants, fontsize=8, rotation=15)
        ax.set_ylabel("time / NN time")
        ax.set_title(f"{shape}, {threads} thread(s)", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8)
    fig.suptitle("GEMM transpose penalty (> 1) and the out-of-place transpose remedy")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    name = "gemm_transpose_penalty.png"
    fig.savefig(os.path.join(results_dir, name), dpi=110, bbox_inches="tight")
    plt.close(fig)
    plots.append(name)


def plot_gemm(gemm, plots, results_dir):
    plt = pyplot()
    if plt is None:
        return
    dl = [r for r in gemm if r["shape"].startswith("dlbench") and "error" not in r and r["variant"] != "default"]
    for threads in sorted({r.get("threads") for r in dl}, key=str):
        rs = [r for r in dl if r.get("threads") == threads]
        variants = sorted({r["variant"] for r in rs})
        modes = ["NN", "NT", "TN", "TT"]
        fig, ax = plt.subplots(figsize=(8.5, 4))
        width = 0.8 / max(1, len(variants))
        for i, v in enumerate(variants):
            cell = {r["mode"]: r for r in rs if r["variant"] == v}
            vals = [cell[m]["FLOP/s"] / 1e9 if m in cell else 0 for m in modes]
            # FLOP/s = work / time, so its spread is FLOP/s x the relative spread of the time.
            errs = [cell[m]["FLOP/s"] / 1e9 * cell[m].get("stddev", 0) / cell[m]["seconds"] if m in cell else 0
                    for m in modes]
            ax.bar([x + i * width for x in range(len(modes))], vals, width, label=v,
                   yerr=errs if any(errs) else None, capsize=2)
        ax.set_xticks([x + width * (len(variants) - 1) / 2 for x in range(len(modes))])
        ax.set_xticklabels(modes)
        ax.set_ylabel("GFLOP/s")
        where = "on the GPU" if threads is None else f"{threads} thread(s)"  # GPU rows have no threads part
        ax.set_title(f"GEMM M=1024 N=2048 K=26752, {where}")
        report_layout.legend_outside(ax)
        fig.tight_layout()
        name = "gemm_transpose_modes_gpu.png" if threads is None else f"gemm_transpose_modes_threads{threads}.png"
        fig.savefig(os.path.join(results_dir, name), dpi=110, bbox_inches="tight")
        plt.close(fig)
        plots.append(name)


def where(r):
    """The threads of a CPU row, or the device and step definition of a GPU row ("cuda, pinned":
    where the batch came from, models::BatchSource; rows of older runs have no input part)."""
    if "threads" in r:
        return r["threads"]
    if "device" in r:
        return f"{r['device']}, {r['input']}" if "input" in r else r["device"]
    return "—"


def model_section(records, out, plots, results_dir):
    models = [r for r in records if r["family"] == "model"]
    if not models:
        return
    out.append("\n## Models: seconds per mini-batch\n")
    out.append("Peak RSS is the resident high-water mark during the benchmark's own timed steps (reset "
               "after its warm-up, the allocator cache emptied before its model was built), libraries "
               "included. `lstm` names the LSTM variant a row forced (default: the selection). GPU rows name their step "
               "definition after the device: pinned (batch in page-locked memory, copied asynchronously one "
               "step ahead), resident (batch already on the GPU) or pageable (copied and waited for). "
               "`precision` is the autocast policy the step ran under (anvil_bench --anvil_precision; "
               "fp32 rows carry no precision part in their name).\n")
    out.append("| model | phase | lstm | batch | threads | precision | s/step (median) | cv | samples/s | % peak | peak RSS MB |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in models:
        prec = r.get("precision", "fp32")
        if "error" in r:
            out.append(f"| {r['model']} | {r['phase']} | {r.get('lstm', 'default')} | {r.get('batch')} | {where(r)} | {prec} | skipped: {r['error']} | | | | |")
            continue
        flag = " !" if r.get("cv", 0) > 0.10 else ""
        out.append(f"| {r['model']} | {r['phase']} | {r.get('lstm', 'default')} | {r.get('batch')} | {where(r)} | {prec} | {r['seconds']:.4f} | "
                   f"{fmt(r.get('cv', 0) * 100)} %{flag} | {fmt(r.get('samples/s'))} | {fmt(r.get('pct_peak'))} | "
                   f"{fmt(r.get('peak_rss_MB'), 0)} |")
    plot_thread_scaling(models, plots, results_dir, pyplot)


def scaling_series(rows):
    """{batch: [(threads, samples/s, spread)]} of training steps, keeping the batches that ran at
    two or more thread counts (one point shows no scaling)."""
    by_batch = defaultdict(list)
    for threads, batch, seconds, stddev in rows:
        by_batch[batch].append((threads, batch / seconds, batch * stddev / seconds ** 2))
    return {b: sorted(pts) for b, pts in by_batch.items() if len({p[0] for p in pts}) > 1}


def plot_thread_scaling(models, plots, results_dir, pyplot):
    """Samples/s against threads per model: anvil and the peers at the same batch, the ideal line
    (anvil's one-thread rate times the threads), linear axes from zero, error bars from the
    repetitions. Throughput rather than seconds, so that ideal scaling is a straight line."""
    plt = pyplot()
    if plt is None:
        return
    # Thread scaling is a CPU plot: GPU steps (named .../device:cuda, no threads) are left out.
    # And an fp32 plot: the mixed-precision rows (anvil_bench --anvil_precision) are left out.
    train = [r for r in models if r["phase"] == "train_step" and "error" not in r and "lstm" not in r
             and "threads" in r and "seconds" in r and r.get("batch") and r.get("precision", "fp32") == "fp32"]
    peers = report_peers.load_peers(results_dir)
    for model in sorted({r["model"] for r in train}):
        anvil = scaling_series([(int(r["threads"]), int(r["batch"]), r["seconds"], r.get("stddev", 0))
                                for r in train if r["model"] == model])
        if not anvil:
            continue
        batch = max(anvil, key=lambda b: (len(anvil[b]), b))  # the batch with the most thread counts
        fig, ax = plt.subplots(figsize=(6.5, 3.8))
        series = [("anvil", anvil[batch])]
        for peer, label in report_peers.PEERS:
            rows = [(t, b, r["median_of_rep_means_s"], spread(r.get("rep_means_s", [])))
                    for (m, phase, t, b, prec), r in peers.get(peer, {}).items()
                    if m == model and phase == "train_step" and b == batch and prec == "fp32"]
            pts = scaling_series(rows).get(batch)
            if pts:
                series.append((label, pts))
        for label, pts in series:
            errs = [p[2] for p in pts]
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=errs if any(errs) else None,
                        marker="o", capsize=3, label=label)
        one = next((p for p in anvil[batch] if p[0] == 1), None)
        top = max(p[0] for _, pts in series for p in pts)
        if one:
            ax.plot([0, top], [0, top * one[1]], "k--", linewidth=0.9, label="ideal (anvil 1 thread × threads)")
        ax.set_xlim(0, top + 0.5)
        ax.set_ylim(bottom=0)
        ax.set_xticks(sorted({p[0] for _, pts in series for p in pts} | {0}))
        ax.set_xlabel("threads")
        ax.set_ylabel("samples/s (training)")
        ax.set_title(f"{model} training step, batch {batch}")
        report_layout.legend_outside(ax)
        fig.tight_layout()
        name = f"{model}_train_vs_threads.png"
        fig.savefig(os.path.join(results_dir, name), dpi=110, bbox_inches="tight")
        plt.close(fig)
        plots.append(name)


def spread(values):
    return statistics.stdev(values) if len(values) > 1 else 0


# What each plot shows, by file name (report_layout.Figures writes the caption below the table).
CAPTIONS = (
    (r"gemm_transpose_modes_(threads\S+|gpu)\.png", "GFLOP/s of every GEMM variant per transpose mode on "
     "DLBench's shape (M=1024 N=2048 K=26752), at one CPU thread count or on the GPU; error bars ±1 standard deviation of the "
     "repetitions, where there were any"),
    (r"gemm_transpose_penalty\.png", "GEMM time of each transposed mode over NN's, direct and through "
     "an out-of-place transpose, per variant"),
    (r"(\S+)_train_vs_threads\.png", "training-step samples/s against threads for anvil and the peers at "
     "one batch, with the ideal line (anvil's one-thread rate × threads); error bars ±1 standard deviation "
     "of the repetitions, where there were any"),
    (r"frameworks_train_step\.png", "seconds per training step of each network in anvil, PyTorch and "
     "TensorFlow, one panel per thread count (log scale)"),
    (r"(\S+)_batch_sweep\.png", "seconds per step and samples/s against the mini-batch size"),
    (r"(\S+)_phases\.png", "forward, backward and update time of the training step beside the whole step"),
    (r"gpu_steps_vs_pytorch\.png", "milliseconds per model step on the GPU, PyTorch with a pageable batch "
     "beside anvil per step definition"),
    (r"gpu_gemm_vs_torch\.png", "GPU GEMM GFLOP/s per transpose mode, anvil's cuBLAS variants beside "
     "torch.mm in FP32 and TF32"),
    (r"kernel_variants\.png", "each kernel variant's time over the fastest variant's, per op"),
)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/report.py RESULTS_DIR")
    results_dir = sys.argv[1]
    runs, contexts = load_runs(results_dir)
    if not runs:
        sys.exit(f"report.py: no anvil_bench JSON results in {results_dir}")
    records = collect(runs)
    out = ["# anvil benchmark report\n"]
    out += report_layout.summary_block(report_summary.headline(records, results_dir))
    ctx = contexts[0] if contexts else {}
    out.append("## Run context\n")
    out.append("| context | value |\n|---|---|")
    for key in ("date", "host_name", "anvil.cpu_model", "num_cpus", "mhz_per_cpu", "anvil.git_revision",
                "anvil.compiler", "anvil.thread_sweep", "anvil.peak_gflops_per_core", "anvil.variants.gemm",
                "anvil.autotune", "library_build_type"):
        if key in ctx:
            out.append(f"| {key} | {ctx[key]} |")
    for key, value in sorted(ctx.items()):
        if key.startswith(("anvil.forced.", "anvil.env.")):
            out.append(f"| {key} | {value} |")
    out.append("")
    command = report_layout.regenerate_command("report.py", results_dir)
    machine = ", ".join(str(ctx[k]) for k in ("host_name", "anvil.cpu_model") if k in ctx) or "machine not recorded"
    plots = report_layout.Figures(out, CAPTIONS, machine, command)
    gemm_section(records, out, plots, results_dir)
    model_section(records, out, plots, results_dir)
    report_peers.peers_section(records, out, plots, results_dir, pyplot)
    report_peers.gpu_peers_section(records, out, results_dir, plots, pyplot)
    report_peers.gpu_gemm_peers_section(records, out, results_dir, plots, pyplot)
    report_sections.add_sections(runs, contexts, records, out, plots, results_dir, pyplot)
    cmp_md = os.path.join(results_dir, "compare_pytorch.md")
    if os.path.exists(cmp_md):
        out.append("\n## Side by side with PyTorch\n")
        with open(cmp_md) as f:
            out.append(f.read())
    errors = [r for r in records if "error" in r]
    if errors:
        out.append(f"\n{len(errors)} benchmark(s) skipped with an error (see tables).")
    path = os.path.join(results_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(report_layout.add_regenerate_lines(out, command)) + "\n")
    print(f"report: {path} ({len(records)} benchmarks, {len(plots)} plots)")


if __name__ == "__main__":
    main()
