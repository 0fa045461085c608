# SPDX-License-Identifier: Apache-2.0
"""The report's side-by-side section: anvil's model steps next to the peer frameworks' (PyTorch,
TensorFlow/Keras) from the same results folder.

bench.sh writes each peer's output as RESULTS/peer_<name>.jsonl (one JSON object per model,
phase, threads and batch: bench/peers/*_models.py). Each anvil row is matched with the peers'
row of the same model, phase, threads, batch and precision (anvil_bench --anvil_precision: rows
named .../precision:bf16; the peer's "precision" field, fp32 when absent). The statistic on both sides is one process's
median over its repetitions of the mean seconds per step; the processes ran one after another,
not interleaved, so a change of load on the shared host between them shows in the ratio
(scripts/compare_pytorch.sh interleaves rounds for a careful anvil/PyTorch figure).
"""
import json
import os
from collections import defaultdict

import report_layout

PEERS = (("pytorch", "PyTorch"), ("tensorflow", "TensorFlow"))


def load_peers(results_dir):
    """{peer: {(model, phase, threads, batch, precision): record}} from RESULTS/peer_<peer>.jsonl."""
    found = {}
    for peer, _ in PEERS:
        path = os.path.join(results_dir, f"peer_{peer}.jsonl")
        if not os.path.exists(path):
            continue
        rows = {}
        with open(path) as f:
            for line in f:
                if line.startswith("{"):
                    r = json.loads(line)
                    if r.get("device", "cpu") != "cpu":  # GPU rows: gpu_peers_section
                        continue
                    rows[(r["model"], r["phase"], int(r["threads"]), int(r["batch"]),
                          r.get("precision", "fp32"))] = r
        if rows:
            found[peer] = rows
    return found


def peer_commands(results_dir):
    path = os.path.join(results_dir, "peer_commands.txt")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def anvil_rows(records):
    """The default-selection CPU model steps (no forced LSTM variant, no GPU device)."""
    out = {}
    for r in records:
        if r.get("family") != "model" or "error" in r or "seconds" not in r or "lstm" in r or "device" in r:
            continue
        out[(r["model"], r["phase"], int(r["threads"]), int(r["batch"]), r.get("precision", "fp32"))] = r
    return out


def peers_section(records, out, plots, results_dir, pyplot):
    peers = load_peers(results_dir)
    if not peers:
        return
    anvil = anvil_rows(records)
    names = [(p, label) for p, label in PEERS if p in peers]
    out.append("\n## Side by side with the frameworks the papers compared\n")
    out.append("Seconds per step of the same network, batch, threads and step definition (networks.md); "
               "ratio = anvil / peer, below 1 means anvil is faster. Each side: one process, median over its "
               "repetitions of the mean s/step; the processes ran one after another (see "
               "scripts/report_peers.py for what that means on a shared host). Peak RSS is each process's "
               "high-water mark.\n")
    head = "| model | phase | threads | batch | precision | anvil s/step |"
    sep = "|---|---|---:|---:|---|---:|"
    for _, label in names:
        head += f" {label} s/step | anvil/{label} |"
        sep += "---:|---:|"
    head += " anvil peak RSS MB |" + "".join(f" {label} peak RSS MB |" for _, label in names)
    sep += "---:|" * (1 + len(names))
    out.append(head)
    out.append(sep)
    ratios = defaultdict(dict)  # (model, phase, threads) -> {peer: ratio}
    keys = sorted(anvil, key=lambda k: (k[0], k[1] != "train_step", k[2], k[3], k[4] != "fp32", k[4]))
    for key in keys:
        a = anvil[key]
        if not any(key in peers[p] for p, _ in names):
            continue
        row = f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {a['seconds']:.4f} |"
        rss = f" {a['peak_rss_MB']:.0f} |" if a.get("peak_rss_MB") is not None else " — |"
        for p, _ in names:
            r = peers[p].get(key)
            if r is None:
                row += " — | — |"
                rss += " — |"
                continue
            s = r["median_of_rep_means_s"]
            ratios[key[:3]][p] = a["seconds"] / s
            row += f" {s:.4f} | {a['seconds'] / s:.3f} |"
            rss += f" {r['peak_rss_MB']:.0f} |"
        out.append(row + rss)
    versions = []
    for p, label in names:
        cfg = next(iter(peers[p].values())).get("config", {})
        v = cfg.get("torch_version") or cfg.get("tensorflow_version")
        extra = ""
        if p == "tensorflow":
            extra = (f", Keras {cfg.get('keras_version')}, {cfg.get('graph')}, XLA {cfg.get('jit_compile_xla')}, "
                     f"intra/inter-op threads = run's threads / {cfg.get('inter_op_threads')}, {cfg.get('layout')}")
        elif p == "pytorch":
            choice = cfg.get("choice") or {}
            extra = (f", {cfg.get('blas')}, MKL code path {choice.get('mkl')}, allocator {cfg.get('allocator')}, "
                     f"OMP_WAIT_POLICY {choice.get('omp_wait_policy')}, SGD {choice.get('sgd')}, "
                     f"configuration: {choice.get('source', 'preset')}")
            autocasts = sorted({r["config"]["autocast"] for r in peers[p].values()
                                if r.get("config", {}).get("autocast")})
            if autocasts:
                extra += "; mixed-precision rows: " + ", ".join(autocasts)
        versions.append(f"- {label} {v}{extra}")
    out.append("")
    out.extend(versions)
    cmds = peer_commands(results_dir)
    if cmds:
        out.append("\nRegenerate the peers' rows (anvil's rows: the model table's command):\n")
        out.append("```")
        out.extend(cmds)
        out.append("```")
    plot_peers(anvil, peers, names, plots, results_dir, pyplot)


def plot_peers(anvil, peers, names, plots, results_dir, pyplot):
    """Training-step seconds per model and framework, one panel per thread count (the shape of
    DLBench's per-network bar charts)."""
    plt = pyplot()
    if plt is None:
        return
    train = {k: v for k, v in anvil.items() if k[1] == "train_step"}
    threads = sorted({k[2] for k in train})
    if not threads:
        return
    fig, axes = plt.subplots(1, len(threads), figsize=(5.5 * len(threads), 3.8), squeeze=False)
    sides = [("anvil", "anvil")] + list(names)
    for ax, t in zip(axes[0], threads):
        keys = sorted(k for k in train if k[2] == t)
        width = 0.8 / len(sides)
        for i, (p, label) in enumerate(sides):
            vals = []
            for k in keys:
                if p == "anvil":
                    vals.append(train[k]["seconds"])
                else:
                    r = peers[p].get(k)
                    vals.append(r["median_of_rep_means_s"] if r else 0)
            ax.bar([x + i * width for x in range(len(keys))], vals, width, label=label)
        ax.set_xticks([x + width * (len(sides) - 1) / 2 for x in range(len(keys))])
        ax.set_xticklabels([f"{k[0]}\nb{k[3]}" + ("" if k[4] == "fp32" else f" {k[4]}") for k in keys],
                           fontsize=8)
        ax.set_yscale("log")  # the networks' steps span two orders of magnitude
        report_layout.plain_log_ticks(ax.yaxis)
        ax.set_ylabel("seconds per training step")
        ax.set_title(f"training step, {t} thread{'s' if t > 1 else ''}")
    fig.tight_layout()
    report_layout.legend_below(fig, axes[0][0])
    name = "frameworks_train_step.png"
    fig.savefig(os.path.join(results_dir, name), dpi=110, bbox_inches="tight")
    plt.close(fig)
    plots.append(name)


def gpu_peers_section(records, out, results_dir, plots=None, pyplot=None):
    """anvil's GPU model steps (model/<m>/<phase>/batch:B/device:cuda) next to the PyTorch peer's
    GPU rows (`pytorch_models.py --device cuda`, in peer_pytorch_cuda.jsonl), by model, phase
    and batch: seconds per step and peak GPU memory (allocator peaks on both sides)."""
    path = os.path.join(results_dir, "peer_pytorch_cuda.jsonl")
    # One anvil row per step definition (input: pinned / resident / pageable; none in old runs).
    anvil = {(r["model"], r["phase"], int(r["batch"]), r.get("input", "pageable")): r for r in records
             if r.get("family") == "model" and r.get("device") == "cuda" and "error" not in r and "seconds" in r}
    if not anvil or not os.path.exists(path):
        return
    with open(path) as f:
        torch = {(r["model"], r["phase"], int(r["batch"])): r for r in map(json.loads, (l for l in f if l.startswith("{")))
                 if r.get("device") == "cuda"}
    keys = sorted(k for k in anvil if k[:3] in torch)
    if not keys:
        return
    name = next(iter(torch.values())).get("config", {}).get("cuda", {}).get("device_name", "the GPU")
    out.append(f"\n## Side by side with PyTorch on the GPU ({name})\n")
    out.append("FP32 on both sides (TF32 off in PyTorch; anvil's default GEMM is `cuda.cublas`, FP32). "
               "Peak GPU memory: anvil's CUDA allocator peak vs `torch.cuda.max_memory_allocated`. "
               "`anvil batch` is anvil's step definition (pinned: page-locked, copied asynchronously one step "
               "ahead; resident: already on the GPU; pageable: copied and waited for); PyTorch's step "
               "copies a pageable batch in each step.\n")
    out.append("| model | phase | batch | anvil batch | anvil s/step | PyTorch s/step (pageable) | anvil/PyTorch | anvil GPU peak MB | PyTorch GPU peak MB |")
    out.append("|---|---|---:|---|---:|---:|---:|---:|---:|")
    for k in keys:
        a, t = anvil[k], torch[k[:3]]
        s = t["median_of_rep_means_s"]
        peak = a.get("gpu_alloc_peak_MB")
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {a['seconds']:.5f} | {s:.5f} | {a['seconds'] / s:.3f} | "
                   f"{'—' if peak is None else f'{peak:.0f}'} | {t['gpu_peak_alloc_MB']:.0f} |")
    if plots is not None and pyplot is not None:
        plot_gpu_steps(anvil, torch, keys, plots, results_dir, pyplot)


def plot_gpu_steps(anvil, torch, keys, plots, results_dir, pyplot):
    """Milliseconds per GPU step: PyTorch (pageable batch) and anvil per step definition."""
    plt = pyplot()
    if plt is None:
        return
    steps = sorted({k[:3] for k in keys}, key=lambda k: (k[0], k[1] != "train_step", k[2]))
    inputs = sorted({k[3] for k in keys})
    sides = [("PyTorch (pageable)", lambda k, i: torch[k]["median_of_rep_means_s"])] + [
        (f"anvil ({i})", lambda k, i: anvil[k + (i,)]["seconds"] if k + (i,) in anvil else 0) for i in inputs]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(steps) + 3), 3.8))
    width = 0.8 / len(sides)
    for j, ((label, value), i) in enumerate(zip(sides, [None] + inputs)):
        ax.bar([x + j * width for x in range(len(steps))], [1e3 * value(k, i) for k in steps], width, label=label)
    ax.set_xticks([x + width * (len(sides) - 1) / 2 for x in range(len(steps))])
    ax.set_xticklabels([f"{m}\n{p.replace('_step', '')} b{b}" for m, p, b in steps], fontsize=8)
    ax.set_ylabel("ms per step")
    ax.set_title("model steps on the GPU, FP32")
    report_layout.legend_outside(ax)
    fig.tight_layout()
    name = "gpu_steps_vs_pytorch.png"
    fig.savefig(os.path.join(results_dir, name), dpi=110, bbox_inches="tight")
    plt.close(fig)
    plots.append(name)


def gpu_gemm_peers_section(records, out, results_dir, plots=None, pyplot=None):
    """anvil's GPU GEMM rows (gemm/<cuda variant>/<mode>/<shape>/device:cuda) next to torch.mm on
    the same GPU (bench/peers/pytorch_gpu_gemm.py, in peer_pytorch_cuda_gemm.jsonl), by shape and
    transpose mode: FP32 (cuda.cublas vs torch.mm with TF32 off; issue 6's target is a ratio of at
    least 0.9), TF32 (cuda.cublas.tf32 vs torch.mm with TF32 on), anvil's own tiled kernel, and the
    NT/NN penalty the DLBench paper described (a mode's time over NN's, per side)."""
    path = os.path.join(results_dir, "peer_pytorch_cuda_gemm.jsonl")
    anvil = {(r["shape"], r["mode"], r["variant"]): r for r in records
             if r.get("family") == "gemm" and r.get("device") == "cuda" and "error" not in r and "FLOP/s" in r}
    if not anvil or not os.path.exists(path):
        return
    with open(path) as f:
        torch = {(r["shape"], r["mode"], r["precision"]): r
                 for r in map(json.loads, (l for l in f if l.startswith("{")))}
    shapes = sorted({s for s, _, _ in anvil} & {s for s, _, _ in torch})
    if not shapes:
        return
    name = next(iter(torch.values())).get("device_name", "the GPU")
    out.append(f"\n## GPU GEMM beside torch.mm ({name})\n")
    out.append("GFLOP/s of one product, CUDA-event timing on both sides (bench/peers/pytorch_gpu_gemm.py). "
               "anvil/torch is a ratio of speeds (≥ 0.9: the FP32 target). Penalty: the mode's time over NN's.\n")
    out.append("| shape | mode | cuda.cublas | torch.mm FP32 | anvil/torch | cuda.cublas.tf32 | torch.mm TF32 | "
               "anvil/torch | gemm_tiled | penalty anvil | penalty torch |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def gf(r):
        return None if r is None else r["FLOP/s"] / 1e9

    def cell(x, fmt="{:.0f}"):
        return "—" if x is None else fmt.format(x)

    def ratio(a, t):
        return None if a is None or t is None else a / t

    for shape in shapes:
        nn_anvil = gf(anvil.get((shape, "NN", "cuda.cublas")))
        nn_torch = gf(torch.get((shape, "NN", "fp32")))
        for mode in ("NN", "NT", "TN", "TT"):
            a32 = gf(anvil.get((shape, mode, "cuda.cublas")))
            t32 = gf(torch.get((shape, mode, "fp32")))
            a_tf = gf(anvil.get((shape, mode, "cuda.cublas.tf32")))
            t_tf = gf(torch.get((shape, mode, "tf32")))
            tiled = gf(anvil.get((shape, mode, "cuda.custom.gemm_tiled")))
            out.append(f"| {shape} | {mode} | {cell(a32)} | {cell(t32)} | {cell(ratio(a32, t32), '{:.3f}')} | "
                       f"{cell(a_tf)} | {cell(t_tf)} | {cell(ratio(a_tf, t_tf), '{:.3f}')} | {cell(tiled)} | "
                       f"{cell(ratio(nn_anvil, a32), '{:.2f}')} | {cell(ratio(nn_torch, t32), '{:.2f}')} |")
    if plots is not None and pyplot is not None:
        plot_gpu_gemm(anvil, torch, shapes, plots, results_dir, pyplot)


def plot_gpu_gemm(anvil, torch, shapes, plots, results_dir, pyplot):
    """GFLOP/s per transpose mode, one panel per shape (up to eight): anvil's cuBLAS FP32/TF32
    beside torch.mm FP32/TF32."""
    plt = pyplot()
    if plt is None:
        return
    shapes = shapes[:8]
    sides = (("cuda.cublas", lambda s, m: anvil.get((s, m, "cuda.cublas"))),
             ("torch.mm FP32", lambda s, m: torch.get((s, m, "fp32"))),
             ("cuda.cublas.tf32", lambda s, m: anvil.get((s, m, "cuda.cublas.tf32"))),
             ("torch.mm TF32", lambda s, m: torch.get((s, m, "tf32"))))
    modes = ("NN", "NT", "TN", "TT")
    fig, panels = report_layout.panel_grid(plt, len(shapes), panel_height=3.2)
    width = 0.8 / len(sides)
    for ax, shape in zip(panels, shapes):
        for j, (label, row) in enumerate(sides):
            vals = [row(shape, m)["FLOP/s"] / 1e9 if row(shape, m) else 0 for m in modes]
            ax.bar([x + j * width for x in range(len(modes))], vals, width, label=label)
        ax.set_xticks([x + width * (len(sides) - 1) / 2 for x in range(len(modes))])
        ax.set_xticklabels(modes)
        ax.set_ylabel("GFLOP/s")
        ax.set_title(shape, fontsize=9)
    fig.tight_layout()
    report_layout.legend_below(fig, panels[0])
    name = "gpu_gemm_vs_torch.png"
    fig.savefig(os.path.join(results_dir, name), dpi=110, bbox_inches="tight")
    plt.close(fig)
    plots.append(name)
