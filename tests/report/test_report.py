#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The benchmark report renders from a committed JSON fixture, and its tables hold the fixture's numbers.

    test_report.py REPORT_PY FIXTURE_DIR        (CTest: report_from_fixture, tests/CMakeLists.txt)

Runs scripts/report.py on a temporary copy of FIXTURE_DIR (tests/fixtures/report/: a trimmed
anvil_bench JSON with gemm/, model/ at two batches, two thread counts and the three phases, kernel/
one hand-made cuda record, and hand-made PyTorch/TensorFlow peer rows peer_<name>.jsonl), parses the markdown tables of report.md and compares every row with
values computed here, independently of the report code, from the fixture's JSON. Then checks that
every plot the report links exists and is a PNG, and renders once more without the cuda record to
check the "no GPU results" line. matplotlib is required: without it the test fails (CI installs
python3-matplotlib), since the plots are part of what is tested; when the python3 that runs the test
lacks it, the test re-runs itself with /usr/bin/python3 (Debian's, where the package installs).
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
from matplotlib_python import require_matplotlib  # noqa: E402  (beside this file)

from checks import FAILURES, check, finish  # noqa: E402  (beside this file)


def close(cell, want, digits=None, sig=None):
    """Does the printed cell hold `want` to the precision it was printed with?"""
    try:
        got = float(cell.replace("**", "").split()[0])
    except (ValueError, IndexError):
        return False
    if digits is not None:
        return abs(got - want) <= 0.5 * 10 ** -digits + 1e-12
    return abs(got - want) <= 0.5 * 10 ** (math.floor(math.log10(abs(want))) - sig + 1) * 1.0001


# ---------------------------------------------------------------------------------------------
# report.md -> tables

def tables(md):
    """[(headings, header, rows)]: headings = the '## ' and '### ' titles above the table, rows =
    lists of cells; `commands` maps a '## ' title to the Regenerate command given in it."""
    found, commands = [], {}
    h2 = h3 = ""
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            h2, h3 = line[3:].strip(), ""
        elif line.startswith("### "):
            h3 = line[4:].strip()
        elif line.startswith("Regenerate: `"):
            commands[h2] = line[len("Regenerate: `"):].rstrip("`")
        if line.startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-:|]+\|$", lines[i + 1]):
            header = cells(line)
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            found.append(((h2, h3), header, rows))
            continue
        i += 1
    return found, commands


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table(found, h2, h3=None):
    ts = [(hdr, rows) for (a, b), hdr, rows in found if a == h2 and (h3 is None or b == h3)]
    check(len(ts) == 1, f"one table under '{h2}' / '{h3}', found {len(ts)}")
    return ts[0] if ts else ([], [])


def by_key(header, rows, key_cols):
    idx = [header.index(c) for c in key_cols]
    out = {}
    for r in rows:
        out[tuple(r[i] for i in idx)] = dict(zip(header, r))
    return out


# ---------------------------------------------------------------------------------------------
# the fixture, read here independently of scripts/report.py

def load_fixture(d):
    benchmarks, ctx = [], {}
    for name in sorted(os.listdir(d)):
        if name.endswith(".json"):
            with open(os.path.join(d, name)) as f:
                data = json.load(f)
            benchmarks += data["benchmarks"]
            ctx.update(data.get("context", {}))
    recs = []
    for b in benchmarks:
        assert b.get("run_type", "iteration") == "iteration", "the fixture has no repetitions"
        parts = [p for p in b["name"].split("/") if not p.startswith(("min_time", "min_warmup_time", "real_time",
                                                                        "manual_time", "iterations"))]
        r = {"name": "/".join(parts), "parts": parts, "error": b.get("error_occurred", False),
             "label": b.get("label", ""), "b": b}
        r["keys"] = dict(p.split(":", 1) for p in parts[1:] if ":" in p)
        if not r["error"]:
            r["s"] = b["real_time"] * UNIT[b["time_unit"]]
        recs.append(r)
    return recs, ctx


def expect_gemm(found, recs):
    gemm = [r for r in recs if r["parts"][0] == "gemm"]
    check(gemm, "fixture has gemm/ records")
    for r in gemm:
        variant, mode, shape = r["parts"][1:4]
        hdr, rows = table(found, "GEMM: GFLOP/s per variant and transpose mode", f"{shape}, threads {r['keys']['threads']}")
        row = by_key(hdr, rows, ["variant"]).get((variant,))
        check(row is not None, f"gemm row {variant} {shape}")
        if row and not r["error"]:
            check(close(row[mode], r["b"]["FLOP/s"] / 1e9, digits=0), f"gemm {r['name']}: '{row[mode]}' vs {r['b']['FLOP/s'] / 1e9:.1f}")


MODEL_KEY = ["model", "phase", "lstm", "batch", "threads"]


def model_key(r):
    return (r["parts"][1], r["parts"][2], r["keys"].get("lstm", "default"), r["keys"]["batch"], r["keys"]["threads"])


def check_model_rows(what, hdr, rows, recs, s_col, **precision):
    """One row per record, keyed by MODEL_KEY, with its seconds per step and samples/s."""
    check(len(rows) == len(recs), f"{what}: {len(rows)} rows for {len(recs)} records")
    got = by_key(hdr, rows, MODEL_KEY)
    for r in recs:
        row = got.get(model_key(r))
        check(row is not None, f"{what}: row {model_key(r)}")
        if row:
            check(close(row[s_col], r["s"], **precision), f"{what} {model_key(r)}: {s_col} {row[s_col]} vs {r['s']}")
            check(close(row["samples/s"], r["b"]["samples/s"], digits=1), f"{what} {model_key(r)}: samples/s")
    return got


def expect_models(found, recs):
    hdr, rows = table(found, "Models: seconds per mini-batch")
    check_model_rows("model table", hdr, rows, [r for r in recs if r["parts"][0] == "model"], "s/step (median)", digits=4)


def expect_batch_sweep(found, commands, recs):
    h2 = "Models: seconds per step vs mini-batch size"
    hdr, rows = table(found, h2)
    steps = [r for r in recs if r["parts"][0] == "model" and r["parts"][2] in ("train_step", "inference_step")]
    batches = defaultdict(set)
    for r in steps:
        batches[r["parts"][1]].add(int(r["keys"]["batch"]))
    swept = [r for r in steps if len(batches[r["parts"][1]]) > 1]
    got = check_model_rows("batch sweep", hdr, rows, swept, "s/step", sig=4)
    for r in swept:
        row = got.get(model_key(r))
        check(row and close(row["ms/sample"], r["s"] / int(r["keys"]["batch"]) * 1e3, sig=4),
              f"batch sweep {model_key(r)}: ms/sample")
    models = sorted({r["parts"][1] for r in swept})
    want = (f"bash scripts/bench.sh --models {','.join(models)} "
            f"--threads {','.join(map(str, sorted({int(r['keys']['threads']) for r in swept})))} "
            f"--batches {','.join(map(str, sorted({int(r['keys']['batch']) for r in swept})))}")
    check(commands.get(h2, "").startswith(want), f"batch sweep command: {commands.get(h2)!r}, want {want!r}...")
    return models


def expect_phases(found, commands, recs):
    h2 = "Models: phases of the training step"
    hdr, rows = table(found, h2)
    cells_ = defaultdict(dict)
    train = {}
    for r in recs:
        if r["parts"][0] != "model" or "lstm" in r["keys"]:
            continue
        k = (r["parts"][1], r["keys"]["batch"], r["keys"]["threads"])
        if r["parts"][2] in ("forward", "backward", "update"):
            cells_[k][r["parts"][2]] = r["s"]
        elif r["parts"][2] == "train_step":
            train[k] = r["s"]
    check(cells_, "fixture has phase records")
    check(len(rows) == len(cells_), f"phase table: {len(rows)} rows for {len(cells_)} configurations")
    got = by_key(hdr, rows, ["model", "batch", "threads"])
    for k, ph in cells_.items():
        row = got.get(k)
        check(row is not None, f"phase row {k}")
        if not row:
            continue
        for p in ("forward", "backward", "update"):
            check(close(row[p + " ms"], ph[p] * 1e3, sig=4), f"phase {k} {p}: {row[p + ' ms']} vs {ph[p] * 1e3} ms")
        total = sum(ph.values())
        check(close(row["sum ms"], total * 1e3, sig=4), f"phase {k}: sum {row['sum ms']} vs {total * 1e3} ms")
        if k in train:
            check(close(row["train_step ms"], train[k] * 1e3, sig=4), f"phase {k}: train_step")
            check(close(row["sum / train_step"], total / train[k], digits=2), f"phase {k}: sum / train_step")
    check("--phases" in commands.get(h2, ""), f"phase table command has --phases: {commands.get(h2)!r}")
    return sorted({k[0] for k in cells_})


def expect_kernels(found, commands, recs, ctx):
    h2 = "Kernel variants per op: time over the fastest variant"
    groups = defaultdict(lambda: defaultdict(dict))  # (op, threads) -> (layer, pass) -> variant -> rec
    for r in recs:
        if r["parts"][0] != "kernel":
            continue
        op, variant, pss, layer = r["parts"][1:5]
        groups[(op, int(r["keys"]["threads"]))][(layer, pss)][variant] = r
    check(groups, "fixture has kernel/ records")
    for (op, t), probs in groups.items():
        hdr, rows = table(found, h2, f"{op}, {t} thread{'s' if t > 1 else ''}")
        got = by_key(hdr, rows, ["layer", "pass"])
        ratios = defaultdict(list)
        for (layer, pss), vs in probs.items():
            row = got.get((layer, pss))
            check(row is not None, f"kernel row {op} {t} {layer} {pss}")
            if not row:
                continue
            times = {v: r["s"] for v, r in vs.items() if v != "default" and not r["error"]}
            best = min(times.values())
            check(close(row["fastest ms"], best * 1e3, sig=3), f"kernel {layer} {pss}: fastest ms {row['fastest ms']} vs {best * 1e3}")
            for v, r in vs.items():
                if v == "default":
                    cell = row["default"]
                    check(close(cell, r["s"] / best, digits=2) and f"({r['label']})" in cell,
                          f"kernel {layer} {pss}: default '{cell}' vs {r['s'] / best:.3f} ({r['label']})")
                elif r["error"]:
                    check(row[f"`{v}`"] == "skip", f"kernel {layer} {pss} {v}: skip")
                else:
                    ratios[v].append(r["s"] / best)
                    check(close(row[f"`{v}`"], r["s"] / best, digits=2), f"kernel {layer} {pss} {v}: {row[f'`{v}`']} vs {r['s'] / best:.3f}")
            repr_ = ctx.get(f"anvil.kernel.{layer}", "")
            check(not repr_ or row["problem"], f"kernel {layer}: problem column")
        gm = by_key(hdr, rows, ["layer"]).get(("geometric mean",))
        check(gm is not None, f"kernel {op} {t}: geometric mean row")
        for v, rs in ratios.items():
            want = math.exp(sum(map(math.log, rs)) / len(rs))
            check(gm and close(gm[f"`{v}`"], want, digits=2), f"kernel {op} {t} {v}: geometric mean")
    check("--kernels" in commands.get(h2, ""), f"kernel table command has --kernels: {commands.get(h2)!r}")


def expect_gpu(found, recs):
    gpu = [r for r in recs if "cuda" in r["name"] and not r["error"]]
    if not gpu:
        return
    hdr, rows = table(found, "CPU vs GPU")
    check(len(rows) == len(gpu), f"CPU vs GPU table: {len(rows)} rows for {len(gpu)} cuda records")
    strip = lambda r: "/".join(p for p in r["parts"] if not re.match(r"^(cpu\.|cuda|default$|ref$|threads:|device:)", p))
    got = by_key(hdr, rows, ["benchmark"])
    for g in gpu:
        key = strip(g)
        row = got.get((key,))
        check(row is not None, f"CPU vs GPU row {key}")
        cpu = [r["s"] for r in recs if not r["error"] and "cuda" not in r["name"] and strip(r) == key]
        check(cpu, f"fixture has a CPU record for {key}")
        if row and cpu:
            check(close(row["GPU s"], g["s"], sig=4), f"CPU vs GPU {key}: GPU s")
            check(close(row["CPU s"], min(cpu), sig=4), f"CPU vs GPU {key}: CPU s {row['CPU s']} vs {min(cpu)}")
            check(close(row["CPU / GPU"], min(cpu) / g["s"], digits=2), f"CPU vs GPU {key}: ratio")


PEERS = {"pytorch": "PyTorch", "tensorflow": "TensorFlow"}


def load_peers(d):
    """{peer: {(model, phase, threads, batch): seconds}} from the fixture's peer_<name>.jsonl."""
    out = {}
    for peer in PEERS:
        path = os.path.join(d, f"peer_{peer}.jsonl")
        if os.path.exists(path):
            with open(path) as f:
                out[peer] = {(r["model"], r["phase"], str(r["threads"]), str(r["batch"])): r
                             for r in map(json.loads, f)}
    return out


def expect_peers(found, recs, peers):
    """Every anvil model step (default selection) that a peer also ran has one row with both
    times, the anvil/peer ratio and a '—' for a peer that did not run it."""
    check(peers, "fixture has peer_<name>.jsonl files")
    hdr, rows = table(found, "Side by side with the frameworks the papers compared")
    got = by_key(hdr, rows, ["model", "phase", "threads", "batch"])
    steps = [r for r in recs if r["parts"][0] == "model" and r["parts"][2] in ("train_step", "inference_step")
             and "lstm" not in r["keys"] and "device" not in r["keys"] and not r["error"]]
    keys = [(r["parts"][1], r["parts"][2], r["keys"]["threads"], r["keys"]["batch"]) for r in steps]
    want = [k for k in keys if any(k in p for p in peers.values())]
    check(len(rows) == len(want), f"side-by-side table: {len(rows)} rows for {len(want)} matched steps")
    for r, key in zip(steps, keys):
        if key not in want:
            continue
        row = got.get(key)
        check(row is not None, f"side-by-side row {key}")
        if not row:
            continue
        check(close(row["anvil s/step"], r["s"], digits=4), f"side-by-side {key}: anvil s/step")
        for peer, label in PEERS.items():
            pr = peers.get(peer, {}).get(key)
            if pr is None:
                check(row.get(f"{label} s/step") == "—", f"side-by-side {key}: {label} absent shows —")
                continue
            s = pr["median_of_rep_means_s"]
            check(close(row[f"{label} s/step"], s, digits=4), f"side-by-side {key}: {label} s/step")
            check(close(row[f"anvil/{label}"], r["s"] / s, digits=3), f"side-by-side {key}: anvil/{label}")
            check(close(row[f"{label} peak RSS MB"], pr["peak_rss_MB"], digits=0), f"side-by-side {key}: {label} RSS")


def render(report_py, src, drop=None):
    tmp = tempfile.mkdtemp(prefix="anvil_report_test_")
    for name in os.listdir(src):
        if name.endswith((".jsonl", ".txt")):  # the peers' rows and commands, as bench.sh writes them
            shutil.copy(os.path.join(src, name), tmp)
            continue
        if not name.endswith(".json"):
            continue
        with open(os.path.join(src, name)) as f:
            data = json.load(f)
        if drop:
            data["benchmarks"] = [b for b in data["benchmarks"] if drop not in b["name"]]
        with open(os.path.join(tmp, name), "w") as f:
            json.dump(data, f)
    p = subprocess.run([sys.executable, report_py, tmp], capture_output=True, text=True)
    print(p.stdout, end="")
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        sys.exit(f"FAIL: report.py exited with {p.returncode}")
    with open(os.path.join(tmp, "report.md")) as f:
        return tmp, f.read()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_report.py REPORT_PY FIXTURE_DIR")
    report_py, fixture = sys.argv[1:]
    require_matplotlib()  # the plots are part of the report under test
    recs, ctx = load_fixture(fixture)
    tmp, md = render(report_py, fixture)
    found, commands = tables(md)
    expect_gemm(found, recs)
    expect_models(found, recs)
    swept = expect_batch_sweep(found, commands, recs)
    phased = expect_phases(found, commands, recs)
    expect_kernels(found, commands, recs, ctx)
    expect_gpu(found, recs)
    expect_peers(found, recs, load_peers(fixture))
    check("frameworks_train_step.png" in md, "the side-by-side bar chart is in the report")
    plots = re.findall(r"!\[[^]]*\]\(([^)]+)\)", md)
    want = {f"{m}_batch_sweep.png" for m in swept} | {f"{m}_phases.png" for m in phased} | {"kernel_variants.png"}
    check(want <= set(plots), f"plots {sorted(want - set(plots))} missing from report.md")
    for p in plots:
        path = os.path.join(tmp, p)
        ok = os.path.isfile(path) and os.path.getsize(path) > 1000
        if ok:
            with open(path, "rb") as f:
                ok = f.read(8) == b"\x89PNG\r\n\x1a\n"
        check(ok, f"plot {p} is a PNG file")
    shutil.rmtree(tmp)
    tmp, md = render(report_py, fixture, drop="cuda")
    check("No GPU results" in md, "without cuda records the report says there are no GPU results")
    shutil.rmtree(tmp)
    sys.exit(finish(f"PASS: report.md from {fixture} holds the fixture's numbers; {len(plots)} plots"))


if __name__ == "__main__":
    main()
