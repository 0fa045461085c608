#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Which variant wins per layer: markdown tables from the kernel/ benchmarks of an anvil_bench JSON.

    scripts/kernel_winners.py results/kernels-2026-11-21/kernels.json [more.json ...] [-o out.md] [--op conv2d]

Reads benchmarks named kernel/<op>/<variant>/<pass>/<model>:<layer>/batch:<b>/device:cpu/threads:<t>
(bench/kernel_bench.cpp; older names through scripts/bench_names.py)
and writes, per model, op and thread count, one row per (layer, pass): the problem, the time of every
variant (ms; the fastest in bold; "skip" for SkipWithError, e.g. unsupported), the winner, what
`default` picked (its label) and default's time over the fastest. A summary per model follows: wins per
variant and the whole model's time (each layer counted as often as the model runs it) with the default
choice against the fastest variant per layer. "default / fastest" compares two separate runs (it includes
run-to-run noise even when default picked the winner); "pick / fastest" compares the forced run of the
variant default picked with the fastest, so it is 1.00 whenever default picks the winner. With --benchmark_repetitions the median is used.
Python 3 standard library only.
"""
import argparse
import json
import math
import re
import sys
from collections import OrderedDict, defaultdict

from bench_names import canonical_run  # old row names -> today's (scripts/bench_names.py)

NAME = re.compile(r"^kernel/(?P<op>[^/]+)/(?P<variant>[^/]+)/(?P<pass>[^/]+)/(?P<model>[^/:]+):(?P<layer>[^/]+)"
                  r"(?:/batch:\d+)?/device:cpu/threads:(?P<t>\d+)(?:/.*)?$")
UNIT = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
PASS_ORDER = ["forward", "forward_relu", "forward_training", "backward_data", "backward_weights", "backward", "forward_inference"]


def short_problem(op, repr_):
    """Compact a problem repr: conv2d 'N=16 C=64 H=56 W=56 K=64 R=3 S=3 stride=1x1 pad=1x1 ...'."""
    if not repr_:
        return ""
    kv = dict(re.findall(r"(\w+)=([\w.x-]+)", repr_))
    if op == "conv2d" and {"C", "H", "W", "K", "R", "S"} <= kv.keys():
        def sym(v):  # "2x2" -> "2"
            a, _, b = v.partition("x")
            return a if a == b else v
        s = f"{kv['C']}→{kv['K']} {kv['R']}x{kv['S']}"
        if kv.get("stride", "1x1") != "1x1":
            s += f" /{sym(kv['stride'])}"
        if kv.get("pad", "0x0") != "0x0":
            s += f" p{sym(kv['pad'])}"
        if kv.get("dil", "1x1") != "1x1":
            s += f" d{sym(kv['dil'])}"
        if kv.get("groups", "1") != "1":
            s += f" g{kv['groups']}"
        s += f" @{kv['H']}²" if kv["H"] == kv["W"] else f" @{kv['H']}x{kv['W']}"
        return s
    # other ops: drop the op/dtype/device/pass words and N
    words = [w for w in repr_.split() if "=" in w and not w.startswith("N=")]
    return " ".join(words)


def load(paths):
    """Several files (e.g. a 1-thread and a 2-thread run) are merged; repeated entries keep the best."""
    ctx = {}
    benchmarks = []
    for path in paths:
        with open(path) as f:
            data = canonical_run(json.load(f))
        for k, v in data.get("context", {}).items():
            ctx.setdefault(k, v)
        benchmarks += data.get("benchmarks", [])
    return ctx, index(benchmarks)


def index(benchmarks):
    """Google Benchmark entries -> {(op, model, layer, pass, threads, variant): (ms, label, error)}
    for the kernel/ ones: the median aggregate when there is one, else the fastest run."""
    runs = defaultdict(list)  # (op, model, layer, pass, threads, variant) -> [(ms, label, error)]
    medians = {}
    for b in benchmarks:
        name = b.get("run_name", b["name"])
        m = NAME.match(name)
        if not m:
            continue
        key = (m["op"], m["model"], m["layer"], m["pass"], int(m["t"]), m["variant"])
        if b.get("error_occurred"):
            runs[key].append((None, b.get("label", ""), b.get("error_message", "")))
            continue
        ms = b["real_time"] * UNIT.get(b.get("time_unit", "ns"), 1e-6)
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                medians[key] = (ms, b.get("label", ""), "")
            continue
        runs[key].append((ms, b.get("label", ""), ""))
    result = {}
    for key, rs in runs.items():
        if key in medians:
            result[key] = medians[key]
            continue
        ok = [r for r in rs if r[0] is not None]
        result[key] = min(ok) if ok else rs[0]
    return result


def fmt_ms(ms):
    return "—" if ms is None else (f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="anvil_bench --benchmark_out files (merged)")
    ap.add_argument("-o", "--output", help="markdown file (default: stdout)")
    ap.add_argument("--op", help="only this op (e.g. conv2d)")
    args = ap.parse_args()
    ctx, res = load(args.json)
    if not res:
        sys.exit(f"{', '.join(args.json)}: no kernel/ benchmarks")

    # group: (model, op, threads) -> layer -> pass -> variant -> (ms, label, err)
    groups = OrderedDict()
    variants_of = defaultdict(list)
    for (op, model, layer, pss, t, variant), r in res.items():
        if args.op and op != args.op:
            continue
        g = groups.setdefault((model, op, t), OrderedDict())
        g.setdefault(layer, {}).setdefault(pss, {})[variant] = r
        if variant not in variants_of[op]:
            variants_of[op].append(variant)

    out = []
    w = out.append
    for model in OrderedDict((k[0], None) for k in groups):
        batch = ctx.get(f"anvil.kernel_batch.{model}", "?")
        w(f"## {model} (batch {batch})\n")
        for (m, op, t), layers in groups.items():
            if m != model:
                continue
            named = [v for v in variants_of[op] if v != "default"]
            w(f"### {op}, {t} thread{'s' if t > 1 else ''} (ms per call)\n")
            w("| layer | problem | pass | " + " | ".join(f"`{v}`" for v in named) + " | winner | default picks | default / fastest | pick / fastest |")
            w("|---|---|---|" + "---:|" * len(named) + "---|---|---:|---:|")
            wins = defaultdict(int)
            total_default = total_best = 0.0
            complete = True
            ratios = []
            pick_ratios = []
            picked_winner = 0
            for layer, passes in layers.items():
                entry = ctx.get(f"anvil.kernel.{model}:{layer}", "")
                repr_, _, also = entry.partition("; also: ")
                also = [a for a in also.split(",") if a]
                mult = 1 + len(also)
                lname = f"{layer}" + (f" (×{mult})" if mult > 1 else "")
                prob = short_problem(op, repr_)
                for pss in sorted(passes, key=lambda p: PASS_ORDER.index(p) if p in PASS_ORDER else 99):
                    vs = passes[pss]
                    times = {v: vs[v][0] for v in named if v in vs and vs[v][0] is not None}
                    best = min(times, key=times.get) if times else None
                    cells = []
                    for v in named:
                        if v not in vs:
                            cells.append("")
                        elif vs[v][0] is None:
                            cells.append("skip")
                        else:
                            c = fmt_ms(vs[v][0])
                            cells.append(f"**{c}**" if v == best else c)
                    d = vs.get("default")
                    pratio = "—"
                    if d is not None and d[1] in times and best:
                        pick_ratios.append(times[d[1]] / times[best])
                        pratio = f"{pick_ratios[-1]:.2f}"
                        picked_winner += d[1] == best
                    if d is None or d[0] is None:
                        dpick, dratio = ("error" if d else "—"), "—"
                        complete = False
                    else:
                        dpick = f"`{d[1]}`" if d[1] else "?"
                        dratio = f"{d[0] / times[best]:.2f}" if best else "—"
                        if best:
                            ratios.append(d[0] / times[best])
                            total_default += mult * d[0]
                            total_best += mult * times[best]
                    if best:
                        wins[best] += 1
                    w(f"| {lname} | {prob} | {pss} | " + " | ".join(cells) +
                      f" | {('`' + best + '`') if best else '—'} | {dpick} | {dratio} | {pratio} |")
            w("")
            if wins:
                w("Wins (layer × pass): " + ", ".join(f"`{v}` {n}" for v, n in sorted(wins.items(), key=lambda x: -x[1])) + ".")
            if ratios:
                gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
                worst = max(ratios)
                w(f"default / fastest: geometric mean {gm:.2f}, worst {worst:.2f}; whole model "
                  f"(every layer as often as the model runs it, all passes): default {total_default:.0f} ms, "
                  f"fastest per layer {total_best:.0f} ms ({total_default / total_best:.2f}x)"
                  + ("" if complete else "; some default runs failed") + ".")
            if pick_ratios:
                gm = math.exp(sum(math.log(r) for r in pick_ratios) / len(pick_ratios))
                w(f"default picked the fastest variant in {picked_winner} of {len(pick_ratios)} (layer, pass); "
                  f"the picked variant's own (forced) time over the fastest: geometric mean {gm:.2f}, "
                  f"worst {max(pick_ratios):.2f}.")
            w("")
    text = "\n".join(out) + "\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
