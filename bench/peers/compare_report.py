#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Collects the raw outputs of scripts/compare_pytorch.sh into compare_pytorch.json / .md.

  compare_report.py batch-of RAW_ANVIL.json      prints the batch of the model benchmark it ran
  compare_report.py peak-of RAW_ANVIL.json       prints the per-core FMA peak it measured (GFLOP/s)
  compare_report.py summarize --raw DIR --config CFG --commands FILE --json OUT --md OUT
  compare_report.py pool RUN.json [RUN.json ...] [--md OUT]
                                                 pools several runs' rounds (below)

Statistics (networks.md asks for the mean and the median seconds per step):
- mean: anvil_bench reports, per process, the median over its repetitions of the mean time per
  iteration (Google Benchmark aggregates); the PyTorch peer reports the same statistic
  (median_of_rep_means_s);
- per-step median: the median of each process's timed steps (anvil_bench's step_median_s
  counter, the peer's median_s). It is not pulled up by the steps during which the shared host
  takes a vCPU away (a two-thread step then takes nearly twice as long).
Each side ran `rounds` processes interleaved; the table shows the median over those rounds of
both statistics, their ratios and verdicts, and the range of the means across rounds to show
the host's noise.

Pooling (`pool`): on a noisy host one run of 7 rounds can land on either side of a target that
the ratio sits near. `pool` takes the compare_pytorch.json of several runs *on one machine* and
reports per cell: each run's ratio as it reported it, each run's median of its paired per-round
ratios (anvil round i / PyTorch round i: the two processes that ran back to back), the pooled
ratio, how many single rounds meet the target, and a 95 % interval. Note [Paired, stratified
pooling] says why and how; the verdict is "inside" when the whole interval is within the target,
"at" when only the point estimate is, "outside" otherwise. Runs whose recorded machines differ
(machine_identity) are refused with an error naming both.

Note [Paired, stratified pooling]
The host's speed drifts by tens of percent within minutes, and it drifts for both sides of a
round alike (they run back to back). The ratio of two medians taken over all rounds of all runs
(what `pool` computed until 2026-11-25) throws that pairing away: a slow anvil round of one run
can meet a fast PyTorch round of another, and a run with more or noisier rounds dominates. So:
- each round gives one paired ratio q = anvil_i / torch_i (rounds are paired by their index; a
  cell whose two sides have different round counts is an error);
- the pooled ratio is the weighted median of all paired ratios, every round of run r weighing
  1 / n_r, so that each run counts the same (stratified by run; with equal round counts this is
  the plain median of the pooled paired ratios);
- the interval is a stratified percentile bootstrap: each resample draws n_r rounds with
  replacement from run r, for every run, and recomputes that weighted median (4000 resamples,
  fixed seed). Rounds are never moved between runs.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_models import NETS  # noqa: E402 -- the networks' kinds (cnn, lstm); torch not imported
from pytorch_setup import P  # noqa: E402 -- scripts/provenance.py (Note [Provenance])

# The issues' speed targets, anvil/PyTorch: the CNNs (issue 3) no slower in training and
# inference; the LSTM language models (issue 4) 10 % faster in training, no slower in inference;
# the fully connected networks 10 % faster in training.
TARGETS = {"cnn": {"train": 1.0, "inference": 1.0}, "lstm": {"train": 0.9, "inference": 1.0},
           "fcn": {"train": 0.9}}


def target_ratio(model: str, phase: str) -> float | None:
    kind = NETS[model]["kind"] if model in NETS else "fcn"
    return TARGETS.get(kind, {}).get(phase)

UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
TAG = re.compile(r"(?P<side>anvil|torch)_(?P<model>.+)_(?P<phase>train|inference)_t(?P<threads>\d+)_r(?P<round>\d+)\.jsonl?$")


def anvil_entry(path: str) -> dict:
    """The model benchmark of one anvil_bench JSON output: its median aggregate when repetitions
    > 1 (Google Benchmark prints no aggregates for a single repetition), else the plain run."""
    with open(path) as f:
        doc = json.load(f)
    runs = [b for b in doc.get("benchmarks", []) if b.get("name", "").startswith("model/")]
    if not runs:
        raise ValueError(f"{path}: no model benchmark in the output")
    for b in runs:
        if b.get("error_occurred"):
            raise ValueError(f"{path}: {b['name']}: {b.get('error_message')}")
    med = [b for b in runs if b.get("aggregate_name") == "median"]
    b = med[0] if med else runs[0]
    name = b.get("run_name", b["name"])
    m = re.search(r"/batch:(\d+)/threads:(\d+)", name)
    return {"name": name, "seconds": b["real_time"] * UNIT[b.get("time_unit", "ns")],
            "repetitions": b.get("repetitions", 1), "batch": int(m.group(1)), "threads": int(m.group(2)),
            "peak_rss_MB": b.get("peak_rss_MB"), "alloc_peak_MB": b.get("alloc_peak_MB"),
            "pct_peak": b.get("pct_peak"), "step_median_s": b.get("step_median_s"),
            "context": doc.get("context", {})}


# What the PyTorch peer scored pct_peak against before it recorded its peak (its old --peak default).
PEER_OLD_DEFAULT_PEAK = 242.0


def anvil_peak(entry: dict) -> float | None:
    """The per-core FMA peak (GFLOP/s) anvil_bench measured (or was given) for this run."""
    v = (entry.get("context") or {}).get("anvil.peak_gflops_per_core")
    return float(v) if v not in (None, "") else None


def torch_pct_of(entry: dict, peak: float | None) -> float | None:
    """The peer's pct_peak rescaled to `peak` (anvil's measured per-core peak), so that both sides
    are scored against one peak: the peer records the peak it used (peak_gflops_per_core); older
    outputs used its default of 242 GFLOP/s."""
    pct = entry.get("pct_peak")
    if pct is None or not peak:
        return None
    used = entry.get("peak_gflops_per_core") or PEER_OLD_DEFAULT_PEAK
    return pct * used / peak


def torch_entry(path: str) -> dict:
    with open(path) as f:
        objs = [json.loads(l) for l in f if l.startswith("{")]
    if not objs:
        raise ValueError(f"{path}: the PyTorch peer printed no result")
    return objs[0]


def load_peer_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("pytorch_models", os.path.join(os.path.dirname(__file__), "pytorch_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def summarize(a) -> None:
    groups: dict = {}
    for path in sorted(glob.glob(os.path.join(a.raw, "*.json*"))):
        m = TAG.search(os.path.basename(path))
        if not m:
            continue
        key = (m["model"], m["phase"], int(m["threads"]))
        g = groups.setdefault(key, {"anvil": [], "torch": []})
        g[m["side"]].append((int(m["round"]), anvil_entry(path) if m["side"] == "anvil" else torch_entry(path)))
    # Rounds in the order they ran, and paired: anvil's round i with PyTorch's round i.
    for key, g in groups.items():
        ra, rt = sorted(r for r, _ in g["anvil"]), sorted(r for r, _ in g["torch"])
        if ra != rt and g["anvil"] and g["torch"]:
            sys.exit(f"compare_report: {key}: anvil rounds {ra} and PyTorch rounds {rt} do not pair up")
        for side in ("anvil", "torch"):
            g[side] = [e for _, e in sorted(g[side], key=lambda re: re[0])]

    if a.config == "preset":
        cfg_doc = {"chosen": load_peer_module().PRESET, "measurements": None}
    else:
        with open(a.config) as f:
            cfg_doc = json.load(f)

    rows = []
    anvil_context = {}
    torch_config = {}
    for (model, phase, threads), g in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] != "train", kv[0][2])):
        if not g["anvil"] or not g["torch"]:
            continue
        anvil_context = g["anvil"][0]["context"] or anvil_context
        torch_config = g["torch"][0]["config"]
        an = [e["seconds"] for e in g["anvil"]]
        to = [e["median_of_rep_means_s"] for e in g["torch"]]
        row = {
            "model": model, "phase": phase + "_step", "threads": threads, "batch": g["anvil"][0]["batch"],
            "rounds": len(an),
            "anvil_median_s": statistics.median(an), "anvil_rounds_s": an,
            "torch_median_s": statistics.median(to), "torch_rounds_s": to,
            "torch_per_step_median_s": statistics.median([e["median_s"] for e in g["torch"]]),
            "torch_per_step_mean_s": statistics.fmean([e["mean_s"] for e in g["torch"]]),
            "anvil_peak_rss_MB": statistics.median([e["peak_rss_MB"] for e in g["anvil"] if e["peak_rss_MB"] is not None] or [float("nan")]),
            "anvil_alloc_peak_MB": statistics.median([e["alloc_peak_MB"] for e in g["anvil"] if e["alloc_peak_MB"] is not None] or [float("nan")]),
            "torch_peak_rss_MB": statistics.median([e["peak_rss_MB"] for e in g["torch"]]),
            "torch_rss_after_import_MB": statistics.median([e["rss_after_import_MB"] for e in g["torch"]]),
            "anvil_pct_peak": statistics.median([e["pct_peak"] for e in g["anvil"] if e["pct_peak"] is not None] or [float("nan")]),
            # Each PyTorch round scored against the peak its paired anvil round measured.
            "torch_pct_peak": statistics.median([p for p in (torch_pct_of(t, anvil_peak(e)) for e, t in zip(g["anvil"], g["torch"]))
                                                 if p is not None] or [float("nan")]),
            "peak_gflops_per_core": statistics.median([p for p in map(anvil_peak, g["anvil"]) if p] or [float("nan")]),
        }
        step_medians = [e["step_median_s"] for e in g["anvil"] if e.get("step_median_s") is not None]
        row["anvil_per_step_median_s"] = statistics.median(step_medians) if step_medians else None
        row["ratio_anvil_over_torch"] = row["anvil_median_s"] / row["torch_median_s"]
        row["ratio_per_step_median"] = (None if row["anvil_per_step_median_s"] is None
                                        else row["anvil_per_step_median_s"] / row["torch_per_step_median_s"])
        row["target_ratio"] = target_ratio(model, phase)
        row["meets_target"] = (None if row["target_ratio"] is None
                               else row["ratio_anvil_over_torch"] <= row["target_ratio"])
        row["meets_target_per_step_median"] = (
            None if row["target_ratio"] is None or row["ratio_per_step_median"] is None
            else row["ratio_per_step_median"] <= row["target_ratio"])
        rows.append(row)
    if not rows:
        sys.exit("compare_report: no matching anvil/PyTorch results under " + a.raw)

    commands = open(a.commands).read().splitlines() if a.commands and os.path.exists(a.commands) else []
    doc = {"rows": rows, "target": "anvil/PyTorch <= target_ratio of each row (compare_report.TARGETS)",
           "statistic": "median over interleaved rounds (processes) of each process's median over repetitions "
                        "of the mean seconds per step; per-step median: median over the rounds of each process's "
                        "median step",
           "pytorch_config": {"chosen": cfg_doc.get("chosen"), "effective": torch_config,
                              "tuning_measurements": cfg_doc.get("measurements")},
           "anvil_context": anvil_context, "commands": commands, "machine": machine_record(),
           "provenance": P.provenance(compared_libraries(anvil_context, torch_config))}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=2)
    with open(a.md, "w") as f:
        f.write(markdown(doc))


def fmt_range(v):
    return f"{min(v):.4f}–{max(v):.4f}" if len(v) > 1 else f"{v[0]:.4f}"


def markdown(doc) -> str:
    L = ["# anvil vs PyTorch: seconds per step", ""]
    L.append("| model | phase | threads | batch | anvil s/step (mean) | PyTorch s/step (mean) | anvil/PyTorch | target | "
             "anvil median step | PyTorch median step | anvil/PyTorch (medians) | target (medians) | "
             "anvil peak RSS MB | PyTorch peak RSS MB (after import) | anvil range (means) | PyTorch range (means) |")
    L.append("|---|---|---:|---:|---:|---:|---:|:---:|---:|---:|---:|:---:|---:|---:|---|---|")

    def verdict(r, key):
        return "—" if r.get(key) is None else f"≤ {r['target_ratio']}: " + ("yes" if r[key] else "**no**")

    for r in doc["rows"]:
        med = r.get("anvil_per_step_median_s")
        med_cells = ("— | — | — | —" if med is None else
                     f"{med:.4f} | {r['torch_per_step_median_s']:.4f} | {r['ratio_per_step_median']:.3f} | "
                     f"{verdict(r, 'meets_target_per_step_median')}")
        L.append(f"| {r['model']} | {r['phase']} | {r['threads']} | {r['batch']} | {r['anvil_median_s']:.4f} | "
                 f"{r['torch_median_s']:.4f} | {r['ratio_anvil_over_torch']:.3f} | {verdict(r, 'meets_target')} | "
                 f"{med_cells} | {r['anvil_peak_rss_MB']:.0f} | "
                 f"{r['torch_peak_rss_MB']:.0f} ({r['torch_rss_after_import_MB']:.0f}) | {fmt_range(r['anvil_rounds_s'])} | "
                 f"{fmt_range(r['torch_rounds_s'])} |")
    L += ["", f"Statistic: {doc['statistic']}; {doc['rows'][0]['rounds']} rounds per side, run interleaved "
          "(anvil, PyTorch, anvil, ...). PyTorch's \"after import\" RSS is what `import torch` alone costs "
          "(the PyPI wheel is a CUDA build and maps its CUDA libraries even on a CPU-only run).", ""]

    cfg = doc["pytorch_config"]
    eff = cfg.get("effective") or {}
    L += ["## PyTorch configuration", ""]
    ch = cfg.get("chosen") or {}
    L.append(f"- chosen ({ch.get('source', '?')}): MKL path `{ch.get('mkl')}`, allocator `{ch.get('allocator')}`, "
             f"OMP_WAIT_POLICY `{ch.get('omp_wait_policy')}`, SGD `{ch.get('sgd')}`, inference route `{ch.get('inference', 'eager')}`, "
             f"flush denormals `{ch.get('flush_denormal')}`"
             + (f"; inference route per model {ch['inference_by_model']}" if ch.get("inference_by_model") else ""))
    if eff:
        L.append(f"- torch {eff.get('torch_version')}, Python {eff.get('python')}; BLAS: {eff.get('blas')}; {eff.get('onednn')}")
        L.append(f"- ATen CPU capability {eff.get('cpu_capability')}; MKL's CPU code path "
                 f"(mkl_serv_cpu_detect; 0 generic, 7 AVX-512): {eff.get('mkl_cpu')}; malloc in use: {eff.get('allocator')}; "
                 f"interop threads {eff.get('num_interop_threads')}; fp32 matmul precision {eff.get('float32_matmul_precision')} "
                 f"(oneDNN fp32 matmul precision {eff.get('mkldnn_matmul_fp32_precision')})")
        fb = (eff.get("choice") or {}).get("fallbacks")
        if fb:
            L.append(f"- **fallbacks on this machine** (requested {(eff.get('choice') or {}).get('requested')}): "
                     + "; ".join(fb))
        L.append("- environment of the last run: " + ", ".join(f"`{k}={v}`" for k, v in (eff.get('env') or {}).items()))
        L.append("- threads: `torch.set_num_threads(t)` and `OMP_NUM_THREADS=MKL_NUM_THREADS=t`, set per run")
    meas = cfg.get("tuning_measurements")
    if meas:
        L += ["", "### Tuning measurements", "",
              f"{meas.get('rounds')} interleaved rounds per candidate; load average at start {meas.get('machine', {}).get('loadavg')}.", "",
              "torch.mm GFLOP/s at 1 thread, (M×26752)@(26752×2048), best run of each round → median over rounds (best of all rounds):", "",
              "The FMA peak column is a 512-bit FMA loop (12 accumulators) run just before each probe: what the "
              "core delivers at that moment (about 117 on an idle Zen 4 core, which executes AVX-512 as two 256-bit "
              "halves; 242 on a Zen 5 core; less when other processes share the core). The percentages are GEMM "
              "GFLOP/s over it, so only roughly right on a busy host.", "",
              "| MKL setting | mkl_serv_cpu_detect | FMA peak now | M=64 | M=1024 |", "|---|---:|---:|---:|---:|"]
        for c, v in meas["gemm"].items():
            pct = lambda m: (f" = {100 * v[f'M{m}_fraction_of_fma_peak_median']:.0f} %"
                             if v.get(f"M{m}_fraction_of_fma_peak_median") == v.get(f"M{m}_fraction_of_fma_peak_median") else "")
            L.append(f"| {c} | {v['mkl_cpu'].get('mkl_serv_cpu_detect', '?')} | {v.get('fma_peak_gflops_median', float('nan')):.0f} | "
                     f"{v['M64_gflops_median_of_rounds']:.1f} ({v['M64_gflops_best_of_rounds']:.1f}){pct(64)} | "
                     f"{v['M1024_gflops_median_of_rounds']:.1f} ({v['M1024_gflops_best_of_rounds']:.1f}){pct(1024)} |")
        for m, v in (meas.get("onednn") or {}).items():
            L.append(f"| oneDNN inner product (torch.utils.mkldnn, inference only), {m} | | | "
                     + (f"{v.get('mkldnn_linear_fp32_gflops_best', float('nan')):.1f} | |" if m == "M64" else
                        f"| {v.get('mkldnn_linear_fp32_gflops_best', float('nan')):.1f} |"))
            if "matmul_bf16_precision_gflops_best_NOT_ELIGIBLE" in v:
                L.append(f"| (not eligible: bf16 arithmetic) mkldnn.matmul.fp32_precision='bf16', {m} | | | "
                         + (f"{v['matmul_bf16_precision_gflops_best_NOT_ELIGIBLE']:.1f} | |" if m == "M64" else
                            f"| {v['matmul_bf16_precision_gflops_best_NOT_ELIGIBLE']:.1f} |"))
        L += ["", "FCN-5 training step (batch 64), median s/step over rounds:", "",
              "| knob | candidate | threads | s/step | peak RSS MB |", "|---|---|---:|---:|---:|"]
        for c, v in meas["allocator"].items():
            L.append(f"| allocator | {c} | 1 | {v['median_s']:.4f} | {v['peak_rss_MB']:.0f} |")
        for c, v in meas["sgd"].items():
            L.append(f"| SGD, opt.step() alone | {c} | 1 | {v['median_s']:.4f} | |")
        for c, v in meas["omp_wait_policy"].items():
            L.append(f"| OMP_WAIT_POLICY | {c} | {v['threads']} | {v['median_s']:.4f} | |")
        for c, v in (meas.get("inference") or {}).items():
            for k, x in v.items():
                L.append(f"| inference route (inference step) | {c} | {k.split('_')[1]} | {x:.4f} | |")
        for model, d in (meas.get("inference_by_model") or {}).items():
            for c, v in d.items():
                L.append(f"| inference route, {model} | {c} | 1 | {v['threads_1_median_s']:.5f} | |")
    ctx = doc.get("anvil_context") or {}
    if doc["rows"][0].get("peak_gflops_per_core"):
        L += ["", f"% of peak on both sides against anvil_bench's measured per-core FMA peak "
              f"({doc['rows'][0]['peak_gflops_per_core']:.1f} GFLOP/s, median over the rounds; "
              f"{ctx.get('anvil.peak_source')})."]
    L += ["", "## anvil", "", f"- git {ctx.get('anvil.git_revision')}, {ctx.get('anvil.compiler')}, "
          f"OMP_WAIT_POLICY={ctx.get('anvil.env.OMP_WAIT_POLICY')}, host {ctx.get('host_name')}, "
          f"load average {ctx.get('load_avg')}", "", "## Commands", "", "```"]
    L += doc.get("commands", [])
    L += ["```", ""]
    return "\n".join(L)


# Context keys of anvil_bench's JSON (Google Benchmark's and anvil's) that describe the machine.
MACHINE_CONTEXT_KEYS = ("host_name", "anvil.cpu_model", "num_cpus", "mhz_per_cpu")


def machine_identity(doc: dict) -> dict:
    """What a compare_pytorch.json records about the machine it ran on: its `machine` record
    (machine_record(), written by `summarize` since 2026-11-25, or added afterwards to older
    runs from their write-ups) and the machine keys of anvil_bench's context, caches included."""
    ctx = doc.get("anvil_context") or {}
    ident = {k: ctx.get(k) for k in MACHINE_CONTEXT_KEYS}
    ident["caches"] = [(c.get("type"), c.get("level"), c.get("size"), c.get("num_sharing"))
                       for c in ctx.get("caches") or []]
    ident["machine"] = {k: v for k, v in (doc.get("machine") or {}).items() if k != "source"} or None
    return ident


def compared_libraries(anvil_context: dict, torch_config: dict) -> dict:
    """The versions the compared runs used: anvil_bench's kernel libraries (its context's
    anvil.library.<name>) and the PyTorch peer's torch_version."""
    libs = {k[len("library."):]: v for k, v in P.from_bench_context(anvil_context).items()
            if k.startswith("library.")}
    if torch_config.get("torch_version"):
        libs["torch"] = torch_config["torch_version"]
    return libs


def machine_record() -> dict:
    """This machine, for the JSON of a comparison: the CPU as /proc/cpuinfo names it (model name,
    family, model, stepping), the CPU count, the memory, and a hash of /etc/machine-id (two VMs of
    one kind share the CPU model but not their machine id)."""
    import hashlib
    rec: dict = {"cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k in ("model name", "cpu family", "model", "stepping", "vendor_id") and k not in rec:
                    rec[k] = v.strip()
                if not line.strip():
                    break  # the first processor is enough
    except OSError:
        pass
    try:
        with open("/proc/meminfo") as f:
            rec["mem_total_kB"] = int(next(l for l in f if l.startswith("MemTotal:")).split()[1])
    except (OSError, StopIteration, ValueError):
        pass
    try:
        with open("/etc/machine-id") as f:
            rec["machine_id_sha256"] = hashlib.sha256(f.read().strip().encode()).hexdigest()[:16]
    except OSError:
        pass
    return rec


def weighted_median(values: list[float], weights: list[float]) -> float:
    """The median of `values` with `weights`: the smallest value at which the cumulative weight
    reaches half the total, averaged with the next one when it lands exactly on the half (so that
    equal weights give statistics.median)."""
    pairs = sorted(zip(values, weights))
    total = sum(weights)
    acc = 0.0
    for i, (v, w) in enumerate(pairs):
        acc += w
        if abs(acc - total / 2) <= 1e-12 * total and i + 1 < len(pairs):
            return (v + pairs[i + 1][0]) / 2
        if acc > total / 2:
            return v
    return pairs[-1][0]


def stratified_median(strata: list[list[float]]) -> float:
    """Weighted median of the pooled values, every value of stratum r weighing 1 / len(stratum)."""
    vals = [x for s in strata for x in s]
    wts = [1.0 / len(s) for s in strata for _ in s]
    return weighted_median(vals, wts)


def pool(paths: list[str], resamples: int = 4000, seed: int = 1) -> list[dict]:
    """The pooled cells of several compare_pytorch.json files of one machine (module docstring,
    Note [Paired, stratified pooling]). Raises ValueError for runs of different machines and for
    a cell whose anvil and PyTorch round counts differ."""
    cells: dict = {}
    first = None
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        ident = machine_identity(doc)
        if first is None:
            first = (path, ident)
        elif ident != first[1]:
            diff = sorted(k for k in ident if ident[k] != first[1][k])
            raise ValueError(
                f"refusing to pool runs of different machines: {first[0]} ("
                + ", ".join(f"{k}={first[1][k]!r}" for k in diff) + f") and {path} ("
                + ", ".join(f"{k}={ident[k]!r}" for k in diff) + ")")
        for r in doc["rows"]:
            key = (r["model"], r["phase"], r["threads"], r["batch"])
            a, t = r["anvil_rounds_s"], r["torch_rounds_s"]
            if len(a) != len(t) or not a:
                raise ValueError(f"{path}: {key}: {len(a)} anvil rounds and {len(t)} PyTorch rounds "
                                 "cannot be paired")
            c = cells.setdefault(key, {"runs": [], "target": r.get("target_ratio")})
            c["runs"].append({"path": path, "reported": r["ratio_anvil_over_torch"],
                              "paired": [x / y for x, y in zip(a, t)], "anvil": a, "torch": t})
    out = []
    rng = random.Random(seed)
    for (model, phase, threads, batch), c in sorted(cells.items()):
        strata, target = [run["paired"] for run in c["runs"]], c["target"]
        ratio = stratified_median(strata)
        boot = []
        for _ in range(resamples):
            boot.append(stratified_median([[s[rng.randrange(len(s))] for _ in s] for s in strata]))
        boot.sort()
        lo, hi = boot[int(0.025 * len(boot))], boot[int(0.975 * len(boot)) - 1]
        verdict = None
        if target is not None:
            verdict = "inside" if hi <= target else ("at" if ratio <= target else "outside")
        n = sum(len(s) for s in strata)
        out.append({"model": model, "phase": phase, "threads": threads, "batch": batch,
                    "runs": [run["reported"] for run in c["runs"]],
                    "runs_paired_median": [statistics.median(s) for s in strata], "rounds": n,
                    "anvil_median_s": statistics.median(x for run in c["runs"] for x in run["anvil"]),
                    "torch_median_s": statistics.median(x for run in c["runs"] for x in run["torch"]),
                    "ratio": ratio, "ci95": [lo, hi],
                    "rounds_meeting_target": None if target is None else
                    sum(q <= target for s in strata for q in s), "target_ratio": target,
                    "verdict": verdict})
    return out


def pool_markdown(cells: list[dict], paths: list[str]) -> str:
    L = ["| model | phase | threads | runs: reported ratio (paired median) | rounds | anvil s/step "
         "| PyTorch s/step | pooled paired ratio | 95 % interval | rounds meeting target | target | verdict |",
         "|---|---|---:|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for c in cells:
        runs = " / ".join(f"{x:.3f} ({p:.3f})" for x, p in zip(c["runs"], c["runs_paired_median"]))
        met = "" if c["target_ratio"] is None else f"{c['rounds_meeting_target']}/{c['rounds']}"
        L.append(f"| {c['model']} | {c['phase']} | {c['threads']} | {runs} | {c['rounds']} | "
                 f"{c['anvil_median_s']:.4f} | {c['torch_median_s']:.4f} | {c['ratio']:.3f} | "
                 f"{c['ci95'][0]:.3f}-{c['ci95'][1]:.3f} | {met} | {c['target_ratio'] or ''} | "
                 f"{c['verdict'] or ''} |")
    L += ["", "Pooled from: " + ", ".join(f"`{p}`" for p in paths) + " (one machine). Statistic: each "
          "round is one process's mean step (median of its repetitions); a round's ratio is anvil's "
          "over the PyTorch process that ran next to it; the pooled ratio is the median of those "
          "paired ratios with every run weighing the same; interval: 95 % stratified bootstrap "
          "(rounds resampled within each run); anvil and PyTorch s/step are the plain medians of "
          "all rounds, for scale only (bench/peers/compare_report.py, Note [Paired, stratified "
          "pooling])."]
    return "\n".join(L) + "\n"


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("batch-of")
    b.add_argument("path")
    pk = sub.add_parser("peak-of")
    pk.add_argument("path")
    s = sub.add_parser("summarize")
    s.add_argument("--raw", required=True)
    s.add_argument("--config", required=True)
    s.add_argument("--commands", default="")
    s.add_argument("--json", required=True)
    s.add_argument("--md", required=True)
    pl = sub.add_parser("pool")
    pl.add_argument("runs", nargs="+", help="compare_pytorch.json of each run")
    pl.add_argument("--md", help="write the table here too")
    a = p.parse_args()
    if a.cmd == "batch-of":
        try:
            print(anvil_entry(a.path)["batch"])
        except (ValueError, OSError, json.JSONDecodeError) as e:
            sys.exit(str(e))
    elif a.cmd == "peak-of":
        try:
            peak = anvil_peak(anvil_entry(a.path))
        except (ValueError, OSError, json.JSONDecodeError) as e:
            sys.exit(str(e))
        if not peak:
            sys.exit(f"{a.path}: no anvil.peak_gflops_per_core in its context")
        print(peak)
    elif a.cmd == "pool":
        try:
            text = pool_markdown(pool(a.runs), a.runs)
        except (OSError, KeyError, ValueError, json.JSONDecodeError) as e:
            sys.exit(f"compare_report.py pool: {e}")
        print(text, end="")
        if a.md:
            with open(a.md, "w") as f:
                f.write(text)
    else:
        summarize(a)


if __name__ == "__main__":
    main()
