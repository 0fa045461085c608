#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""report.md's layout (Note [Report layout], scripts/report_layout.py) on the committed fixture.

    test_report_layout.py REPORT_PY FIXTURE_DIR     (CTest: report_layout, tests/CMakeLists.txt)

Renders tests/fixtures/report in a temporary copy and checks: the summary block comes first and
its thread-scaling and anvil/PyTorch lines hold ratios computed here from the fixture's JSON; a
Regenerate line above every table; each plot a PNG, below a table of its section, with its
caption; the thread-scaling plot drawn for a model that ran at two thread counts. Then, with
Google Benchmark repetition aggregates added to the JSON, that the records carry the stddev
aggregate the error bars are drawn from.
"""
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import finish  # noqa: E402
from layout_checks import figures_beside_tables, regenerate_above_tables, summary_first  # noqa: E402
from matplotlib_python import require_matplotlib  # noqa: E402

UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def train_steps(data):
    """(model, batch, threads) -> seconds of the fixture's model training steps."""
    out = {}
    for b in data["benchmarks"]:
        m = re.match(r"model/(\w+)/train_step/batch:(\d+)/threads:(\d+)/", b["name"])
        if m and not b.get("error_occurred") and "lstm:" not in b["name"]:
            out[(m.group(1), int(m.group(2)), int(m.group(3)))] = b["real_time"] * UNIT[b["time_unit"]]
    return out


def expected_summary(fixture, data):
    steps = train_steps(data)
    speedups = sorted(steps[(m, b, 1)] / steps[(m, b, 2)] for (m, b, t) in steps if t == 1 and (m, b, 2) in steps)
    want = [f"speedup {speedups[0]:.2f}-{speedups[-1]:.2f}×"]
    ratios = []
    with open(os.path.join(fixture, "peer_pytorch.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            key = (r["model"], r["batch"], r["threads"])
            if r["phase"] == "train_step" and r["threads"] == 1 and key in steps:
                ratios.append(steps[key] / r["median_of_rep_means_s"])
    gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
    want.append(f"anvil / PyTorch training-step time at 1 thread(s): geometric mean {gm:.2f}")
    return want


def with_repetitions(data):
    """The JSON as a run with --benchmark_repetitions=3 writes it: iterations plus mean, median,
    stddev and cv aggregates (here for the fcn5 batch 64 training steps only)."""
    out = dict(data, benchmarks=[])
    stddevs = {}
    for b in data["benchmarks"]:
        out["benchmarks"].append(b)
        if not re.match(r"model/fcn5/train_step/batch:64/", b["name"]):
            continue
        times = [b["real_time"] * f for f in (0.9, 1.0, 1.1)]
        mean = sum(times) / 3
        sd = math.sqrt(sum((t - mean) ** 2 for t in times) / 2)
        stddevs[b["name"]] = sd * UNIT[b["time_unit"]]
        for name, value in (("mean", mean), ("median", times[1]), ("stddev", sd), ("cv", sd / mean)):
            out["benchmarks"].append(dict(b, run_name=b["name"], run_type="aggregate", aggregate_name=name,
                                          real_time=value, name=b["name"] + "_" + name))
    return out, stddevs


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_report_layout.py REPORT_PY FIXTURE_DIR")
    report_py, fixture = sys.argv[1:]
    require_matplotlib()
    with open(os.path.join(fixture, "anvil_bench.json")) as f:
        data = json.load(f)
    tmp = tempfile.mkdtemp(prefix="anvil_report_layout_")
    fails = []
    try:
        for name in os.listdir(fixture):
            shutil.copy(os.path.join(fixture, name), tmp)
        p = subprocess.run([sys.executable, report_py, tmp], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"FAIL: report.py exited with {p.returncode}: {p.stderr}")
        with open(os.path.join(tmp, "report.md")) as f:
            md = f.read()
        command = f"python3 scripts/report.py {tmp}"
        fails += summary_first(md)
        summary = md.split("## Run context")[0]
        fails += [f"summary lacks {w!r}" for w in expected_summary(fixture, data) if w not in summary]
        fails += regenerate_above_tables(md)
        figure_fails, images = figures_beside_tables(md, tmp, command)
        fails += figure_fails
        if "fcn5_train_vs_threads.png" not in images:
            fails.append("no thread-scaling plot for fcn5 (ran at 1 and 2 threads)")

        # Error bars: the stddev aggregate reaches the records the plots draw.
        sys.path.insert(0, os.path.dirname(os.path.abspath(report_py)))
        spec = importlib.util.spec_from_file_location("report", report_py)
        report = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(report)
        repeated, stddevs = with_repetitions(data)
        recs = {r["name"]: r for r in report.collect(repeated["benchmarks"])}
        for name, sd in stddevs.items():
            got = recs.get(name, {}).get("stddev")
            if got is None or abs(got - sd) > 1e-9 * sd:
                fails.append(f"{name}: stddev {got}, want the aggregate's {sd}")
    finally:
        shutil.rmtree(tmp)
    sys.exit(finish(f"PASS: report.md layout: summary first, a Regenerate line above every table, "
                    f"{len(images)} captioned plots beside their tables, stddev aggregates kept "
                    "for the error bars", fails))


if __name__ == "__main__":
    main()
