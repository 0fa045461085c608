# SPDX-License-Identifier: Apache-2.0
"""Report sections for sweeps (scripts/report.py calls add_sections from main):

  batch sweep     seconds per step and samples/s vs mini-batch size, per model, phase and threads
                  (model/<name>/<train_step|inference_step>/batch:B/threads:T, when a model ran at
                  more than one batch: bench.sh --batches / --batch-sweep / --full);
  phases          forward / backward / update of the training step (bench.sh --phases), their sum
                  against the whole train_step;
  kernel variants time of every variant per (layer, pass) over the fastest one, per op and threads
                  (the kernel/ family, parsed by scripts/kernel_winners.py; bench.sh --kernels);
  CPU vs GPU      the fastest CPU and GPU record of the same benchmark, when some benchmark name
                  contains a cuda device (otherwise one line says there are none);
  LSTM fusion on the GPU  the CUDA LSTM variants per layer problem (kernel/lstm/<variant>/<pass>/
                  <model>:<layer>/batch:B/device:cuda) beside PyTorch's cuDNN LSTM
                  (peer_pytorch_cuda_lstm.jsonl, bench/peers/pytorch_gpu_lstm.py), and the LSTM
                  models' GPU training steps beside PyTorch's.

Every table is preceded by the bench.sh command that regenerates its numbers, built from the
records it shows (models, batches, threads) and the run's context (repetitions, forced variants).
"""
import math
import os
import re
import shlex
from collections import defaultdict

import kernel_winners
import report_layout

STEP_PHASES = ("train_step", "inference_step")
PHASES = ("forward", "backward", "update")
GPU_PART = re.compile(r"^(device:)?(cuda|gpu)([.:_]|$)")
VARIANT_PART = re.compile(r"^(default|ref|(cpu|cuda|gpu)([.:_].*)?)$")


def add_sections(runs, contexts, records, out, plots, results_dir, pyplot):
    """Appends the sections to `out` (markdown lines) and their PNG names to `plots`."""
    ctx = {}
    for c in contexts:
        for k, v in c.items():
            ctx.setdefault(k, v)
    # The batch-sweep and phase sections are per CPU thread count; GPU model steps (no threads
    # part in their names) are compared in the CPU vs GPU section.
    models = [r for r in records if r["family"] == "model" and "model" in r and "threads" in r]
    batch_sweep_section(models, ctx, out, plots, results_dir, pyplot)
    phase_section(models, ctx, out, plots, results_dir, pyplot)
    kernel_section(runs, ctx, out, plots, results_dir, pyplot)
    gpu_section(records, ctx, out)
    lstm_gpu_section(records, out, results_dir)


# ---------------------------------------------------------------------------------------------
# helpers

def sig4(x):
    """Four significant digits, never in exponent form: 0.07058, 0.4627, 13.06, 1425."""
    if x is None:
        return "—"
    if x == 0:
        return "0"
    return f"{x:.{max(0, 3 - math.floor(math.log10(abs(x))))}f}"


def ms(seconds):
    return sig4(None if seconds is None else seconds * 1e3)


def ints(values):
    return sorted({int(v) for v in values if v is not None})


def csv(values):
    return ",".join(str(v) for v in values)


def alternation(values):
    values = sorted(set(values))
    return values[0] if len(values) == 1 else "(" + "|".join(values) + ")"


def bench_command(ctx, *, models=(), threads=(), batches=(), phases=False, kernels=False, filter_=None):
    """The bench.sh command line that re-runs exactly these benchmarks, with the run-wide settings
    of the original run (repetitions, forced variants) taken from its context."""
    cmd = ["bash", "scripts/bench.sh"]
    if models:
        cmd += ["--models", csv(sorted(set(models)))]
    if threads:
        cmd += ["--threads", csv(ints(threads))]
    if batches:
        cmd += ["--batches", csv(ints(batches))]
    if phases:
        cmd.append("--phases")
    if kernels:
        cmd.append("--kernels")
    m = re.search(r"--benchmark_repetitions=(\d+)", ctx.get("anvil.command_line", ""))
    if m and int(m.group(1)) > 1:
        cmd += ["--reps", m.group(1)]
    forced = sorted((k[len("anvil.forced."):], v) for k, v in ctx.items() if k.startswith("anvil.forced."))
    if forced:
        cmd += ["--variant", ",".join(f"{op}={name}" for op, name in forced)]
    if filter_:
        cmd += ["--filter", filter_]
    return " ".join(shlex.quote(c) for c in cmd)


def regenerate(out, command):
    out.append(f"\nRegenerate: `{command}`\n")


def save(fig, plt, results_dir, name, plots):
    fig.tight_layout()
    fig.savefig(os.path.join(results_dir, name), dpi=110, bbox_inches="tight")  # keeps outside legends
    plt.close(fig)
    plots.append(name)


def default_lstm(r):
    return "lstm" not in r


# ---------------------------------------------------------------------------------------------
# (a) seconds per step vs batch size

def batch_sweep_section(models, ctx, out, plots, results_dir, pyplot):
    steps = [r for r in models if r["phase"] in STEP_PHASES and "error" not in r and "batch" in r]
    batches_of = defaultdict(set)
    for r in steps:
        batches_of[r["model"]].add(int(r["batch"]))
    swept = sorted(m for m, b in batches_of.items() if len(b) > 1)
    if not swept:
        return
    rows = sorted((r for r in steps if r["model"] in swept),
                  key=lambda r: (r["model"], STEP_PHASES.index(r["phase"]), r.get("lstm", ""),
                                 int(r["threads"]), int(r["batch"])))
    out.append("\n## Models: seconds per step vs mini-batch size\n")
    out.append("Median seconds per step and samples per second at each mini-batch size (models run at "
               "more than one batch). `lstm` names a forced LSTM variant (default: the selection).")
    regenerate(out, bench_command(ctx, models=swept, threads=[r["threads"] for r in rows],
                                  batches=[r["batch"] for r in rows],
                                  filter_=f"^model/{alternation(swept)}/{alternation(STEP_PHASES)}/"))
    out.append("| model | phase | lstm | threads | batch | s/step | samples/s | ms/sample |")
    out.append("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        sps = r.get("samples/s", int(r["batch"]) / r["seconds"])
        out.append(f"| {r['model']} | {r['phase']} | {r.get('lstm', 'default')} | {r['threads']} | {r['batch']} | "
                   f"{sig4(r['seconds'])} | {sps:.1f} | {sig4(r['seconds'] / int(r['batch']) * 1e3)} |")
    plt = pyplot()
    if plt is None:
        return
    from matplotlib.ticker import FuncFormatter, NullFormatter
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for model in swept:
        rs = [r for r in rows if r["model"] == model and default_lstm(r)]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
        for phase in STEP_PHASES:
            for t in ints(r["threads"] for r in rs):
                line = sorted((r for r in rs if r["phase"] == phase and int(r["threads"]) == t),
                              key=lambda r: int(r["batch"]))
                if not line:
                    continue
                b = [int(r["batch"]) for r in line]
                style = "o-" if phase == "train_step" else "s--"
                label = f"{phase.replace('_step', '')}, {t} thread{'s' if t > 1 else ''}"
                ax1.plot(b, [r["seconds"] for r in line], style, label=label)
                ax2.plot(b, [r.get("samples/s", int(r["batch"]) / r["seconds"]) for r in line], style, label=label)
        batches = ints(r["batch"] for r in rs)
        for ax, ylabel in ((ax1, "seconds per step"), (ax2, "samples / s")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(batches)
            ax.set_xticklabels([str(b) for b in batches])
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
            ax.set_xlabel("mini-batch size")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
        report_layout.legend_below(fig, ax1)
        fig.suptitle(f"{model}: step time and throughput vs mini-batch size")
        save(fig, plt, results_dir, f"{model}_batch_sweep.png", plots)


# ---------------------------------------------------------------------------------------------
# (b) phase breakdown

def phase_section(models, ctx, out, plots, results_dir, pyplot):
    ph = [r for r in models if r["phase"] in PHASES and default_lstm(r)]
    if not ph:
        return
    cells = defaultdict(dict)  # (model, batch, threads) -> phase -> record
    for r in ph:
        cells[(r["model"], int(r["batch"]), int(r["threads"]))][r["phase"]] = r
    train = {(r["model"], int(r["batch"]), int(r["threads"])): r for r in models
             if r["phase"] == "train_step" and default_lstm(r) and "error" not in r}
    keys = sorted(cells)
    out.append("\n## Models: phases of the training step\n")
    out.append("Milliseconds per step spent in each phase (`--anvil_phases=on`: the whole step runs every "
               "iteration, only the named phase is timed), their sum, and the whole `train_step` "
               "benchmark of the same model, batch and threads.")
    names = [k[0] for k in keys]
    regenerate(out, bench_command(ctx, models=names, threads=[k[2] for k in keys],
                                  batches=[k[1] for k in keys], phases=True,
                                  filter_=f"^model/{alternation(names)}/(forward|backward|update|train_step)/"))
    out.append("| model | batch | threads | forward ms | backward ms | update ms | sum ms | train_step ms | sum / train_step |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    complete = {}
    for key in keys:
        c = cells[key]
        vals = []
        for p in PHASES:
            r = c.get(p)
            vals.append(None if r is None or "error" in r else r["seconds"])
        total = sum(vals) if None not in vals else None
        if total is not None:
            complete[key] = vals
        t = train.get(key)
        ratio = f"{total / t['seconds']:.2f}" if total is not None and t else "—"
        txt = ["skipped" if p in c and "error" in c[p] else ms(v) for p, v in zip(PHASES, vals)]
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(txt) +
                   f" | {ms(total)} | {ms(t['seconds'] if t else None)} | {ratio} |")
    plt = pyplot()
    if plt is None or not complete:
        return
    for model in sorted({k[0] for k in complete}):
        ks = [k for k in complete if k[0] == model]
        fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(ks) + 2), 3.8))
        x = range(len(ks))
        bottom = [0.0] * len(ks)
        for i, p in enumerate(PHASES):
            vals = [complete[k][i] for k in ks]
            ax.bar(x, vals, 0.6, bottom=bottom, label=p)
            bottom = [b + v for b, v in zip(bottom, vals)]
        steps = [train[k]["seconds"] if k in train else None for k in ks]
        if any(s is not None for s in steps):
            ax.plot([i for i, s in enumerate(steps) if s is not None], [s for s in steps if s is not None],
                    "k_", markersize=22, mew=2, label="train_step")
        ax.set_xticks(list(x))
        ax.set_xticklabels([f"b{k[1]}\n{k[2]}t" for k in ks])
        ax.set_ylabel("seconds per step")
        ax.set_title(f"{model}: phases of the training step (batch, threads)")
        report_layout.legend_outside(ax)
        save(fig, plt, results_dir, f"{model}_phases.png", plots)


# ---------------------------------------------------------------------------------------------
# (c) kernel variants per op

def kernel_section(runs, ctx, out, plots, results_dir, pyplot):
    res = kernel_winners.index(runs)
    if not res:
        return
    groups = defaultdict(lambda: defaultdict(dict))  # (op, threads) -> (model, layer, pass) -> variant -> r
    variants_of = defaultdict(list)
    for (op, model, layer, pss, t, variant), r in res.items():
        groups[(op, t)][(model, layer, pss)][variant] = r
        if variant != "default" and variant not in variants_of[op]:
            variants_of[op].append(variant)
    out.append("\n## Kernel variants per op: time over the fastest variant\n")
    out.append("Each cell: the variant's time for that layer and pass over the fastest variant's (1.00 = "
               "fastest; skip = SkipWithError, e.g. unsupported). `default` is the op's own selection (its "
               "pick in brackets). The geometric mean of a variant is over the rows it ran. Per-layer times in ms, winners and whole-model totals: "
               f"`python3 scripts/kernel_winners.py {json_files(results_dir)}`.")
    regenerate(out, bench_command(ctx, models=[m for g in groups.values() for (m, _, _) in g],
                                  threads=[t for _, t in groups], kernels=True,
                                  filter_=f"^kernel/{alternation(op for op, _ in groups)}/"))
    summary = {}  # (op, threads) -> variant -> geometric mean
    for (op, t) in sorted(groups):
        named = sorted(variants_of[op])
        out.append(f"\n### {op}, {t} thread{'s' if t > 1 else ''}\n")
        out.append("| layer | problem | pass | fastest ms | " + " | ".join(f"`{v}`" for v in named) + " | default |")
        out.append("|---|---|---|---:|" + "---:|" * len(named) + "---|")
        ratios = defaultdict(list)
        wins = defaultdict(int)
        for (model, layer, pss), vs in groups[(op, t)].items():  # the run's order
            times = {v: vs[v][0] for v in named if v in vs and vs[v][0] is not None}
            if not times:
                continue
            best = min(times, key=times.get)
            wins[best] += 1
            row = []
            for v in named:
                if v in times:
                    ratios[v].append(times[v] / times[best])
                    row.append(f"{times[v] / times[best]:.2f}")
                else:
                    row.append("skip" if v in vs else "")
            d = vs.get("default")
            dcell = "" if d is None else ("skip" if d[0] is None else f"{d[0] / times[best]:.2f} ({d[1] or '?'})")
            repr_ = ctx.get(f"anvil.kernel.{model}:{layer}", "").partition("; also: ")[0]
            out.append(f"| {model}:{layer} | {kernel_winners.short_problem(op, repr_)} | {pss} | "
                       f"{kernel_winners.fmt_ms(times[best])} | " + " | ".join(row) + f" | {dcell} |")
        gm = {v: math.exp(sum(map(math.log, rs)) / len(rs)) for v, rs in ratios.items()}
        summary[(op, t)] = gm
        out.append("| geometric mean | | | | " + " | ".join(f"{gm[v]:.2f}" if v in gm else "" for v in named) + " | |")
        out.append("| wins | | | | " + " | ".join(str(wins[v]) for v in named) + " | |")
    plot_kernel_summary(summary, plots, results_dir, pyplot)


def json_files(results_dir):
    names = sorted(n for n in os.listdir(results_dir) if n.endswith(".json") and not n.startswith("compare_"))
    return " ".join(shlex.quote(os.path.join(results_dir, n)) for n in names)


def plot_kernel_summary(summary, plots, results_dir, pyplot):
    plt = pyplot()
    if plt is None or not summary:
        return
    ops = sorted({op for op, _ in summary})
    ncols = min(3, len(ops))
    nrows = (len(ops) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows), squeeze=False)
    for ax, op in zip((a for row in axes for a in row), ops):
        threads = sorted(t for o, t in summary if o == op)
        variants = sorted({v for t in threads for v in summary[(op, t)]})
        width = 0.8 / max(1, len(threads))
        for i, t in enumerate(threads):
            ax.bar([x + i * width for x in range(len(variants))],
                   [summary[(op, t)].get(v, 0) for v in variants], width, label=f"{t} thread{'s' if t > 1 else ''}")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks([x + width * (len(threads) - 1) / 2 for x in range(len(variants))])
        ax.set_xticklabels(variants, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("time / fastest (geometric mean)")
        ax.set_title(op)
    report_layout.legend_below(fig, axes[0][0])
    for ax in [a for row in axes for a in row][len(ops):]:
        ax.set_visible(False)
    save(fig, plt, results_dir, "kernel_variants.png", plots)


# ---------------------------------------------------------------------------------------------
# (d) CPU vs GPU

def is_gpu(name):
    return any(GPU_PART.match(p) for p in name.split("/"))


def device_free_key(name):
    """The benchmark's identity without device, variant and threads: gemm/NT/<shape>, model/<m>/<phase>/batch:B."""
    return "/".join(p for p in name.split("/")
                    if not (VARIANT_PART.match(p) or GPU_PART.match(p)
                            or p.startswith(("threads:", "device:", "input:", "lstm:", "min_time", "min_warmup_time",
                                             "real_time", "manual_time", "iterations", "repeats"))))


def gpu_section(records, ctx, out):
    out.append("\n## CPU vs GPU\n")
    timed = [r for r in records if "error" not in r and "seconds" in r]
    gpu = defaultdict(list)
    for r in timed:
        if is_gpu(r["name"]):
            gpu[device_free_key(r["name"])].append(r)
    if not gpu:
        out.append("No GPU results: no benchmark of this run names a cuda device.")
        return
    cpu = defaultdict(list)
    for r in timed:
        if not is_gpu(r["name"]):
            cpu[device_free_key(r["name"])].append(r)
    out.append("The fastest record of each benchmark on each device (over variants and CPU thread counts).")
    families = sorted({k.split("/")[0] for k in gpu})
    gpu_models = [r["model"] for rs in gpu.values() for r in rs if r["family"] == "model" and "model" in r]
    regenerate(out, bench_command(ctx, models=gpu_models, filter_=f"^{alternation(families)}/"))
    out.append("| benchmark | CPU s | CPU run | GPU s | GPU run | CPU / GPU |")
    out.append("|---|---:|---|---:|---|---:|")
    for key in sorted(gpu):
        g = min(gpu[key], key=lambda r: r["seconds"])
        c = min(cpu[key], key=lambda r: r["seconds"]) if cpu.get(key) else None
        ratio = f"{c['seconds'] / g['seconds']:.2f}" if c else "—"
        out.append(f"| {key} | {sig4(c['seconds']) if c else '—'} | {run_desc(c)} | {sig4(g['seconds'])} | "
                   f"{run_desc(g)} | {ratio} |")


def run_desc(r):
    if r is None:
        return "—"
    parts = [p for p in r["name"].split("/") if VARIANT_PART.match(p) or GPU_PART.match(p)
             or p.startswith(("threads:", "device:", "input:", "lstm:"))]
    return " ".join(parts)


GPU_LSTM_ROW = re.compile(r"^kernel/lstm/([^/]+)/(forward_training|backward)/([^/:]+):[^/]+/batch:(\d+)/device:cuda")
LSTM_MODELS = ("lstm32", "lstm64", "ptb_small", "lstm_imdb")


def read_jsonl(path):
    import json
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


def lstm_gpu_section(records, out, results_dir):
    """DLBench's LSTM finding (speed depends on how the cell is fused) on the GPU: anvil's fused
    and unfused CUDA cells per layer problem beside PyTorch's cuDNN LSTM, and the whole steps."""
    out.append("\n## LSTM fusion on the GPU\n")
    layers = defaultdict(dict)  # (model, batch, pass) -> variant -> seconds
    for r in records:
        m = GPU_LSTM_ROW.match(r.get("name", ""))
        if m and "error" not in r and "seconds" in r:
            layers[(m[3], int(m[4]), m[2])][m[1]] = r["seconds"]
    steps = defaultdict(dict)  # (model, batch) -> input definition -> seconds
    for r in records:
        # FP32 rows only: a .../input:resident/tf32 row parses to input "resident" as well.
        if (r.get("family") == "model" and r.get("device") == "cuda" and r.get("model") in LSTM_MODELS
                and r.get("phase") == "train_step" and "error" not in r and "seconds" in r
                and "/tf32" not in r.get("name", "")):
            steps[(r["model"], int(r["batch"]))][r.get("input", "pageable")] = r["seconds"]
    if not layers and not steps:
        out.append("No GPU LSTM rows in this run (`scripts/gpu_kit.sh run` on a GPU machine produces them: "
                   "`bench.sh --devices cuda`).")
        return
    # FP32 training rows (pytorch_gpu_lstm.py --math fp32,tf32 adds TF32 and inference rows).
    torch = [t for t in read_jsonl(os.path.join(results_dir, "peer_pytorch_cuda_lstm.jsonl"))
             if t.get("math", "fp32") == "fp32" and t.get("phase", "train_step") == "train_step"]
    t_layer = {(t["model"], int(t["batch"]), t["pass"]): t["seconds"] for t in torch if t.get("kind") == "layer"}
    t_step = {(t["model"], int(t["batch"])): t for t in torch if t.get("kind") == "step"}
    name = next((t.get("device_name") for t in torch), None) or "the GPU"
    out.append(f"One LSTM layer of each LSTM model ({name}, FP32, TF32 off on both sides). `fused`: anvil's "
               "`cuda.custom.fused` (one input GEMM for all steps, per step one recurrent GEMM and one gate "
               "kernel); `unfused`: `cuda.custom.unfused` (every pointwise gate operation its own kernel, "
               "DLBench's \"many small kernels\"); PyTorch: `nn.LSTM` on cuDNN (two bias vectors). ms per "
               "call; backward timed alone.\n")
    if layers:
        out.append("| model | batch | pass | fused ms | unfused ms | unfused / fused | PyTorch cuDNN ms | fused / cuDNN |")
        out.append("|---|---:|---|---:|---:|---:|---:|---:|")
        for key in sorted(layers):
            v = layers[key]
            f, u, t = v.get("cuda.custom.fused"), v.get("cuda.custom.unfused"), t_layer.get(key)
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {ms(f) if f else '—'} | {ms(u) if u else '—'} | "
                       f"{f'{u / f:.2f}' if f and u else '—'} | {ms(t) if t else '—'} | "
                       f"{f'{f / t:.2f}' if f and t else '—'} |")
    if steps:
        out.append("\nWhole training steps of the LSTM models on the GPU (anvil's default LSTM variant; "
                   "`resident`: batch already on the GPU, `pinned`: page-locked batch copied one step ahead). "
                   "PyTorch: the same network with `nn.LSTM` (cuDNN), batch resident.\n")
        out.append("| model | batch | anvil resident ms | anvil pinned ms | PyTorch resident ms | anvil / PyTorch (resident) |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for key in sorted(steps):
            v = steps[key]
            a_res, a_pin = v.get("resident"), v.get("pinned")
            t = t_step.get(key, {}).get("seconds")
            out.append(f"| {key[0]} | {key[1]} | {ms(a_res) if a_res else '—'} | {ms(a_pin) if a_pin else '—'} | "
                       f"{ms(t) if t else '—'} | {f'{a_res / t:.2f}' if a_res and t else '—'} |")
