#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The GPU study's report (issue 37): merges the part folders that `gpu_kit.sh run --part X`
wrote into one markdown report; needs no GPU.

    python3 scripts/gpu_study_report.py DIR > DIR/report.md     (gpu_kit.sh report DIR)

DIR holds one folder per part or shard: tests, steps, layers, lstm, memory, peers, or
<part>-<models>[-b<batches>][-compile] (scripts/gpu_study.py). Each section says which folders it
read; a part with no folder is named as missing (with the command that makes it), and every job
of a folder's missing.txt (not started for lack of budget, timed out, failed) is listed, so
nothing is skipped silently. Tables: the parts and their kit revisions; the GPU tests; the steps
over the batch sweep beside PyTorch defaults and best (scripts/report_gpu_steps.py) with the
sweep's (model, batch) pairs that have no anvil row; torch.compile; the per-layer conv table
(scripts/report_gpu_conv.py); LSTM fusion (scripts/report_sections.py) and PyTorch's LSTM in
TF32 and inference; the largest training batch per model and engine and the peak memory at each
sweep batch; PyTorch alone (peers). With matplotlib: steps_vs_batch.png, step time against batch,
below the steps table. Layout as report.py's (Note [Report layout] in scripts/report_layout.py):
a summary first, a Regenerate line above every table, each plot captioned.
"""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_study  # noqa: E402  (SWEEP, PARTS)
import report  # noqa: E402  (load_runs, collect, LOAD_PROBLEMS)
import report_gpu_conv  # noqa: E402
import report_gpu_steps as steps_report  # noqa: E402
import report_layout  # noqa: E402  (summary, captions, regenerate lines: Note [Report layout])

PARTS = gpu_study.PARTS


def part_dirs(root, part):
    return sorted(d for d in glob.glob(os.path.join(root, part)) + glob.glob(os.path.join(root, part + "-*"))
                  if os.path.isdir(d))


def read_kv(path):
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if ": " in line:
                    k, v = line.rstrip("\n").split(": ", 1)
                    out[k] = v
    return out


def lines_of(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def read_jsonl(paths):
    rows = []
    for p in paths:
        for line in lines_of(p):
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def files(dirs, pattern):
    return sorted(f for d in dirs for f in glob.glob(os.path.join(d, pattern)))


def missing_note(part):
    return (f"**Missing: no `{part}` folder.** Run `bash scripts/gpu_kit.sh run --part {part}` on a GPU machine "
            f"(`--dry-run` lists what it runs).")


def parts_section(root, dirs, out):
    out += ["## Parts", "", "| part | folder | kit revision | GPU | status | seconds | jobs not done |",
            "|---|---|---|---|---|---:|---:|"]
    revisions = set()
    for part in PARTS:
        if not dirs[part]:
            out.append(f"| {part} | **missing** | - | - | - | - | - |")
            continue
        for d in dirs[part]:
            kv = read_kv(os.path.join(d, "part.txt"))
            rev = kv.get("revision", "unknown")
            revisions.add(rev)
            out.append(f"| {part} | {os.path.relpath(d, root)} | {rev} | {kv.get('gpu', '-')} | "
                       f"{kv.get('status', 'no part.txt')} | {kv.get('seconds', '-')} | "
                       f"{len(lines_of(os.path.join(d, 'missing.txt')))} |")
    out.append("")
    missing = [p for p in PARTS if not dirs[p]]
    if missing:
        out.append("Missing parts: " + ", ".join(f"**{p}**" for p in missing) + ".")
    if len(revisions) > 1:
        out.append(f"**The parts come from different kit revisions: {', '.join(sorted(revisions))}.**")
    if any("dirty" in r or r == "unknown" for r in revisions):
        out.append("**A kit was packed from a tree that differed from its commit (`+dirty`) or names no "
                   "revision: its numbers cannot be tied to a commit.**")
    not_done = [(d, l) for p in PARTS for d in dirs[p] for l in lines_of(os.path.join(d, "missing.txt"))]
    if not_done:
        out += ["", "Jobs that did not run or did not finish (each folder's missing.txt):", ""]
        out += [f"- {os.path.relpath(d, root)}: {l}" for d, l in not_done]
    out.append("")


def tests_section(dirs, out):
    out += ["## GPU tests", ""]
    if not dirs:
        out += [missing_note("tests"), ""]
        return
    for d in dirs:
        out.append(f"`{os.path.basename(d)}`:")
        out.append("")
        for l in lines_of(os.path.join(d, "summary.txt")):
            if l.startswith(("test_", "GPU:", "cuDNN:")):
                out.append(f"- {l}")
        failed = [l for f in sorted(glob.glob(os.path.join(d, "*.cases.txt"))) for l in lines_of(f)
                  if not l.startswith("0 |")]
        if failed:
            out += ["", "Cases that did not pass (exit | seconds | name):", ""] + [f"- {l}" for l in failed]
    out.append("")


def steps_section(root, dirs, peer_dirs, out, plots):
    out += ["## Steps over the batch sweep, anvil beside PyTorch", ""]
    if not dirs:
        out += [missing_note("steps"), ""]
        return {}, {}
    anvil_files = files(dirs, "anvil_*_b*.json")
    anvil = steps_report.anvil_rows(anvil_files) if anvil_files else {}
    torch = steps_report.torch_rows(files(dirs, "peer_steps.jsonl") + files(dirs, "peer_compile.jsonl")
                                    + files(peer_dirs, "peer_compile.jsonl"))
    out.append(f"From {', '.join(os.path.relpath(d, root) for d in dirs)}. step: copied = pageable batch copied "
               "each step (anvil input:pageable), pinned = page-locked batch copied one step ahead, resident = on "
               "the GPU. anvil: median of its repetitions (spread = max - min over the median). PyTorch defaults: "
               "PyTorch untouched (SGD foreach as PyTorch picks, NCHW, cudnn.benchmark off); best: channels_last, "
               "cudnn.benchmark with benchmark_limit 0, whole-step CUDA graph. Ratio = anvil / PyTorch.")
    out.append("")
    out += steps_report.table(anvil, torch)
    done = {(k[0], k[2]) for k in anvil}
    absent = [f"{m} b{b}" for m, bs in gpu_study.SWEEP.items() for b in bs if (m, b) not in done]
    out.append("")
    out.append("Sweep pairs without anvil rows: " + (", ".join(absent) if absent else "none") + ".")
    comp = steps_report.compile_table(torch)
    out += ["", "### torch.compile", ""]
    out += comp if comp else ["No torch.compile rows (`gpu_kit.sh run --part peers --compile-only`)."]
    out.append("")
    plot_steps(root, anvil, torch, plots)
    return anvil, torch


def plot_steps(root, anvil, torch, plots):
    """Training step time against batch, resident FP32: anvil, PyTorch defaults, PyTorch best."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001  (plots need matplotlib; the tables do not)
        return
    models = sorted({k[0] for k in anvil if k[1] == "train_step"})
    if not models:
        return
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models), 3.2), squeeze=False)
    for ax, m in zip(axes[0], models):
        for label, rows in (("anvil", anvil), ("PyTorch defaults", torch.get("defaults", {})),
                            ("PyTorch best", torch.get("best", {}))):
            pts = sorted((k[2], r["ms"]) for k, r in rows.items()
                         if k[0] == m and k[1] == "train_step" and k[3] == "resident" and k[4] == "fp32" and "ms" in r)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_title(f"{m} training step")
        ax.set_xlabel("batch")
        ax.set_ylabel("ms (resident, FP32)")
        ax.margins(x=0.1)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    report_layout.legend_below(fig, axes[0][0])
    fig.savefig(os.path.join(root, "steps_vs_batch.png"), dpi=100, bbox_inches="tight")
    plt.close(fig)
    plots.append("steps_vs_batch.png")


def layers_section(root, dirs, out):
    out += ["## Convolution algorithms per layer", ""]
    if not dirs:
        out += [missing_note("layers"), ""]
        return
    paths = files(dirs, "*.json")
    rows = report_gpu_conv.load(paths) if paths else {}
    if not rows:
        out += [f"No kernel/conv2d/.../device:cuda rows in {', '.join(os.path.relpath(d, root) for d in dirs)}.", ""]
        return
    text = report_gpu_conv.table(rows).splitlines()
    out += ["### " + l.lstrip("#").lstrip() if l.startswith("#") else l for l in text[1:]]
    out.append("")


def lstm_section(root, dirs, steps_dirs, out):
    out += ["## LSTM", ""]
    if not dirs:
        out += [missing_note("lstm"), ""]
        return
    import report_sections
    runs = []
    for d in dirs + steps_dirs:
        r, _c = report.load_runs(d)
        runs.extend(r)
    records = report.collect(runs)
    section = []
    report_sections.lstm_gpu_section(records, section, dirs[0])
    out += ["### " + l.lstrip("\n#").lstrip() if l.lstrip("\n").startswith("#") else l for l in section]
    rows = read_jsonl(files(dirs, "peer_pytorch_cuda_lstm.jsonl"))
    by = {}
    for r in rows:
        what = r.get("pass") if r.get("kind") == "layer" else r.get("phase", "train_step")
        by.setdefault((r.get("kind"), r["model"], int(r["batch"]), what), {})[r.get("math", "fp32")] = r
    if by:
        out += ["", "### PyTorch's cuDNN LSTM in FP32 and TF32", "",
                "| kind | model | batch | pass / phase | FP32 ms (spread) | TF32 ms (spread) | TF32 / FP32 |",
                "|---|---|---:|---|---:|---:|---:|"]
        for key in sorted(by):
            f, t = by[key].get("fp32"), by[key].get("tf32")

            def c(r):
                return "-" if not r else f"{r['seconds'] * 1e3:.3f}" + (
                    f" ({r['spread_pct']:.1f} %)" if "spread_pct" in r else "")
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {c(f)} | {c(t)} | "
                       f"{t['seconds'] / f['seconds']:.2f} |" if f and t else
                       f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {c(f)} | {c(t)} | - |")
    out.append("")


def memory_section(root, dirs, anvil_steps, torch_steps, out):
    out += ["## Memory: the largest training batch", ""]
    if not dirs:
        out += [missing_note("memory"), ""]
    else:
        rows = read_jsonl(files(dirs, "anvil_memory.jsonl") + files(dirs, "peer_memory.jsonl"))
        best = {}
        for r in rows:
            if r.get("kind") == "max_batch":
                best[(r["model"], r.get("engine", "pytorch" if r.get("peer") else "anvil"))] = r
        out += ["Training step, batch resident, FP32: doubling from the sweep's largest batch, then bisection to "
                "1/16; `first OOM` is the smallest batch seen to run out of memory.", "",
                "| model | anvil largest batch | anvil first OOM | PyTorch largest batch | PyTorch first OOM | note |",
                "|---|---:|---:|---:|---:|---|"]
        for m in gpu_study.SWEEP:
            a, t = best.get((m, "anvil")), best.get((m, "pytorch"))
            if not a and not t:
                out.append(f"| {m} | not probed | - | not probed | - | - |")
                continue
            note = "; ".join(x for x in ((a or {}).get("note"), (t or {}).get("note")) if x)
            out.append(f"| {m} | {a['max_batch'] if a else 'not probed'} | {(a or {}).get('first_oom') or '-'} | "
                       f"{t['max_batch'] if t else 'not probed'} | {(t or {}).get('first_oom') or '-'} | {note or '-'} |")
    out += ["", "### Peak GPU memory at the sweep batches (training step, resident, FP32; from the steps part)", ""]
    keys = sorted(k for k in anvil_steps if k[1] == "train_step" and k[3] == "resident" and k[4] == "fp32")
    if not keys:
        out.append("No steps rows: the steps part is missing." if not anvil_steps else "No resident FP32 training rows.")
    else:
        out += ["| model | batch | anvil peak MB | PyTorch defaults peak MB | anvil / PyTorch |", "|---|---:|---:|---:|---:|"]
        for k in keys:
            a, t = anvil_steps[k].get("peak"), torch_steps.get("defaults", {}).get(k, {}).get("peak")
            out.append(f"| {k[0]} | {k[2]} | {steps_report.fmt(a, '.0f')} | {steps_report.fmt(t, '.0f')} | "
                       f"{a / t:.2f} |" if a and t else
                       f"| {k[0]} | {k[2]} | {steps_report.fmt(a, '.0f')} | {steps_report.fmt(t, '.0f')} | - |")
    out.append("")


def peers_section(root, dirs, out):
    out += ["## PyTorch alone (the peers part)", ""]
    if not dirs:
        out += [missing_note("peers") + " (Needed only to rerun PyTorch apart; the steps part has its rows.)", ""]
        return
    torch = steps_report.torch_rows(files(dirs, "peer_steps.jsonl"))
    if any(torch.values()):
        out += steps_report.table({}, torch)
    else:
        out.append("No PyTorch step rows in " + ", ".join(os.path.relpath(d, root) for d in dirs) + ".")
    out.append("")


def host_profile_blocks(path):
    """The tables anvil_bench prints with ANVIL_VERBOSE=host_profile (engine/dispatch/host_profile.cpp):
    row title -> (steps, [(op, variant, calls/step, exclusive ms/step, us/call)], total ms)."""
    blocks, cur = {}, None
    for line in lines_of(path):
        if line.startswith("anvil host profile: "):
            title, _, steps = line[len("anvil host profile: "):].rpartition(", per step over ")
            cur = blocks.setdefault(title, [int(steps.split()[0]) if steps.split() else 0, [], None])
        elif cur is not None and line.startswith("  total exclusive host time in variants: "):
            cur[2] = float(line.split(": ", 1)[1].split()[0])
            cur = None
        elif cur is not None and not line.startswith("  op "):
            f = line.split()
            if len(f) == 6:  # op, variant, calls, exclusive ms, inclusive ms, exclusive us/call
                cur[1].append((f[0], f[1], float(f[2]), float(f[3]), float(f[5])))
    return blocks


def profile_section(root, dirs, out):
    out += ["## Host time per variant (the profile part)", ""]
    if not dirs:
        out += [missing_note("profile"), ""]
        return
    steps = {}
    for d in dirs:
        runs, _ = report.load_runs(d)
        for r in runs:
            if r.get("run_type") == "iteration" and "host_enqueue_ms" in r:
                steps[r["name"]] = r
    out += ["ANVIL_VERBOSE=host_profile (Note [Host profile]): per step, the host time up to the final wait "
            "(`enqueue`), the part spent inside variants (cuDNN, cuBLAS and kernel launches included) and "
            "the rest (anvil's code between them). Top variants by exclusive host time.", ""]
    for f in files(dirs, "host_profile_*.txt"):
        for title, (n, rows, total) in host_profile_blocks(f).items():
            out.append(f"**{title}** ({n} steps; `{os.path.relpath(f, root)}`): variants {total:.2f} ms per step"
                       if total is not None else f"**{title}** ({n} steps)")
            out += ["", "| op | variant | calls/step | exclusive ms/step | us/call |", "|---|---|---:|---:|---:|"]
            out += [f"| {o} | {v} | {c:.0f} | {ms:.3f} | {us:.1f} |" for o, v, c, ms, us in rows[:10]]
            out.append("")
    if steps:
        out += ["| benchmark row | step ms | host enqueue ms | in variants ms |", "|---|---:|---:|---:|"]
        for name, r in sorted(steps.items()):
            out.append(f"| {name.split('/min_time')[0]} | {r['real_time']:.2f} | {r['host_enqueue_ms']:.2f} | "
                       f"{r.get('host_variants_ms', float('nan')):.2f} |")
    out.append("")


CAPTIONS = ((r"steps_vs_batch\.png", "training-step milliseconds against batch, batch resident on the GPU, "
             "FP32, for anvil, PyTorch defaults and PyTorch best"),)


def summary(dirs, anvil, torch, gpus):
    """The headline lines: the GPU, the parts present, anvil over PyTorch best on the steps."""
    lines = [f"GPU: {', '.join(gpus) or 'not recorded in part.txt'}; parts present: "
             f"{', '.join(p for p in PARTS if dirs[p]) or 'none'}; missing: "
             f"{', '.join(p for p in PARTS if not dirs[p]) or 'none'}."]
    for config in ("defaults", "best"):
        ratios = sorted(a["ms"] / t["ms"] for k, a in anvil.items() for k2, t in torch.get(config, {}).items()
                        if k == k2 and "ms" in a and "ms" in t and t["ms"] > 0)
        if ratios:
            lines.append(f"anvil / PyTorch {config} step time: median {ratios[len(ratios) // 2]:.2f}, "
                         f"{ratios[0]:.2f}-{ratios[-1]:.2f} over {len(ratios)} (model, phase, batch, step, "
                         "math) rows (below 1: anvil faster).")
    return lines


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: gpu_study_report.py DIR", file=sys.stderr)
        return 2
    root = argv[1]
    dirs = {p: part_dirs(root, p) for p in PARTS}
    command = report_layout.regenerate_command("gpu_study_report.py", root, writes_report_md=True)
    gpus = sorted({read_kv(os.path.join(d, "part.txt")).get("gpu", "") for p in PARTS for d in dirs[p]} - {""})
    out = ["# The GPU study", "", f"Merged from `{root}` by scripts/gpu_study_report.py.", ""]
    body = []
    plots = report_layout.Figures(body, CAPTIONS, ", ".join(gpus) or "GPU not recorded", command)
    parts_section(root, dirs, body)
    tests_section(dirs["tests"], body)
    anvil, torch = steps_section(root, dirs["steps"], dirs["peers"], body, plots)
    layers_section(root, dirs["layers"], body)
    lstm_section(root, dirs["lstm"], dirs["steps"], body)
    memory_section(root, dirs["memory"], anvil, torch, body)
    peers_section(root, dirs["peers"], body)
    profile_section(root, dirs["profile"], body)
    if report.LOAD_PROBLEMS:  # benchmark JSON files that a crash cut short (scripts/report.py)
        body += ["## Benchmark files not read whole", ""] + [
            f"- {os.path.relpath(p.split(': ', 1)[0], root)}: {p.split(': ', 1)[1]}" for p in report.LOAD_PROBLEMS] + [""]
    out += report_layout.summary_block(summary(dirs, anvil, torch, gpus))
    sys.stdout.write("\n".join(report_layout.add_regenerate_lines(out + body, command)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
