#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""compare_report.py pool: paired, run-stratified pooled ratios, intervals and verdicts, and the
refusal to pool runs of different machines.

    test_compare_pool.py COMPARE_REPORT_PY        (CTest: compare_report_pool, tests/CMakeLists.txt)

Writes small compare_pytorch.json runs whose rounds are chosen by hand so that the unpaired
ratio of medians (what `pool` computed before) and the paired, stratified ratio differ, pools
them through the module and through its command line, and checks every number against values
worked out here (Note [Paired, stratified pooling] in compare_report.py). Also: runs of two
machines are refused with an error naming both, a cell whose sides have different round counts
is refused, and the PyTorch side's pct_peak is rescaled to anvil's measured peak.
"""
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

from checks import FAILURES, check, finish  # noqa: E402  (beside this file)


def close(x, y):
    return abs(x - y) < 1e-12


def row(model, phase, threads, anvil, torch, target):
    ratio = statistics.median(anvil) / statistics.median(torch)
    return {"model": model, "phase": phase, "threads": threads, "batch": 128,
            "anvil_rounds_s": anvil, "torch_rounds_s": torch, "ratio_anvil_over_torch": ratio,
            "target_ratio": target}


CONTEXT = {"host_name": "vm", "anvil.cpu_model": "AMD EPYC", "num_cpus": 2, "mhz_per_cpu": 2596,
           "caches": [{"type": "Data", "level": 1, "size": 32768, "num_sharing": 1}]}


def write_runs(tmp, runs, contexts=None, machines=None):
    paths = []
    for i, rows in enumerate(runs):
        doc = {"rows": rows, "anvil_context": (contexts or [CONTEXT] * len(runs))[i]}
        if machines and machines[i] is not None:
            doc["machine"] = machines[i]
        paths.append(os.path.join(tmp, f"run{i}.json"))
        with open(paths[-1], "w") as f:
            json.dump(doc, f)
    return paths


def main():
    report_py = sys.argv[1]
    spec = importlib.util.spec_from_file_location("compare_report", report_py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    # Cell 1 (paired differs from unpaired): in both runs the host slowed down during round 2 for
    # both sides, and PyTorch's round 3 was slow on its own: paired ratios 0.9, 0.9, 0.6 in each
    # run (median 0.9), while median(anvil) / median(torch) over all rounds, the unpaired
    # pooling `pool` did before, is 0.9 / 1.5 = 0.6.
    # Cell 2 (stratified differs from unstratified): run 0 has 3 rounds at 0.8 on a host twice as
    # slow, run 1 has 7 rounds at 1.0. Every run weighs the same: the pooled ratio is 0.9 and
    # every stratified resample is 0.9 too; the plain median of the 10 paired ratios would be 1.0,
    # and so would the unpaired ratio of the medians.
    # Cell 3 ("at"): paired ratios 0.85 / 0.95 alternating. Cell 4: every round 1.1 ("outside").
    # Cell 5 ("inside"): every round 0.8.
    runs = [
        [row("lstm32", "train_step", 1, [0.9, 1.8, 0.9], [1.0, 2.0, 1.5], 0.9),
         row("lstm32", "train_step", 2, [1.6, 1.6, 1.6], [2.0, 2.0, 2.0], 0.9),
         row("lstm64", "train_step", 1, [0.85, 0.95, 0.85], [1.0, 1.0, 1.0], 0.9),
         row("lstm64", "inference_step", 1, [1.1, 1.1], [1.0, 1.0], 1.0),
         row("lstm64", "train_step", 2, [0.8, 1.6], [1.0, 2.0], 0.9)],
        [row("lstm32", "train_step", 1, [0.9, 1.8, 0.9], [1.0, 2.0, 1.5], 0.9),
         row("lstm32", "train_step", 2, [1.0] * 7, [1.0] * 7, 0.9),
         row("lstm64", "train_step", 1, [0.95, 0.85, 0.95, 0.85], [1.0, 1.0, 1.0, 1.0], 0.9),
         row("lstm64", "inference_step", 1, [2.2], [2.0], 1.0),
         row("lstm64", "train_step", 2, [0.4, 0.8], [0.5, 1.0], 0.9)],
    ]
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_runs(tmp, runs)
        cells = {(c["model"], c["phase"], c["threads"]): c for c in mod.pool(paths)}
        check(len(cells) == 5, f"five pooled cells, got {sorted(cells)}")

        c = cells[("lstm32", "train_step", 1)]
        unpaired = statistics.median([0.9, 1.8, 0.9] * 2) / statistics.median([1.0, 2.0, 1.5] * 2)
        check(close(unpaired, 0.6), f"fixture: the unpaired ratio of medians is 0.6, got {unpaired}")
        check(close(c["ratio"], 0.9), f"cell 1: paired ratio 0.9 (unpaired 0.6), got {c['ratio']}")
        check(close(c["runs"][0], 0.6) and close(c["runs_paired_median"][0], 0.9),
              f"cell 1 run 0: reported 0.6, paired median 0.9; got {c['runs']} {c['runs_paired_median']}")
        check(c["rounds"] == 6 and c["rounds_meeting_target"] == 6,
              f"cell 1 rounds {c['rounds']} meeting {c['rounds_meeting_target']}")
        lo, hi = c["ci95"]
        check(0.6 - 1e-12 <= lo < 0.9 and close(hi, 0.9), f"cell 1 interval {c['ci95']}")
        check(c["verdict"] == "inside", f"cell 1 verdict {c['verdict']}")

        c = cells[("lstm32", "train_step", 2)]
        check(close(c["ratio"], 0.9), f"cell 2: stratified ratio 0.9, got {c['ratio']}")
        check(close(c["ci95"][0], 0.9) and close(c["ci95"][1], 0.9),
              f"cell 2: each run constant, every stratified resample is 0.9; got {c['ci95']}")
        check(c["rounds"] == 10 and c["rounds_meeting_target"] == 3,
              f"cell 2 rounds {c['rounds']} meeting {c['rounds_meeting_target']}")
        check(c["verdict"] == "inside", f"cell 2 verdict {c['verdict']}")

        c = cells[("lstm64", "train_step", 1)]
        # Weights 1/3 per round of run 0, 1/4 of run 1: 0.85 holds 2/3 + 1/2 > half the total.
        check(close(c["ratio"], 0.85), f"cell 3 ratio {c['ratio']}")
        lo, hi = c["ci95"]
        check(lo >= 0.85 - 1e-12 and close(hi, 0.95), f"cell 3 interval {c['ci95']}")
        check(c["verdict"] == "at", f"cell 3 verdict {c['verdict']}")
        check(c["rounds"] == 7 and c["rounds_meeting_target"] == 4,
              f"cell 3 rounds {c['rounds']} meeting {c['rounds_meeting_target']}")

        c = cells[("lstm64", "inference_step", 1)]
        check(close(c["ratio"], 1.1) and c["rounds_meeting_target"] == 0,
              f"cell 4 ratio {c['ratio']} meeting {c['rounds_meeting_target']}")
        check(c["verdict"] == "outside", f"cell 4 verdict {c['verdict']}")

        c = cells[("lstm64", "train_step", 2)]
        check(close(c["ratio"], 0.8) and close(c["ci95"][0], 0.8) and close(c["ci95"][1], 0.8),
              f"cell 5 ratio {c['ratio']} interval {c['ci95']}")
        check(c["verdict"] == "inside", f"cell 5 verdict {c['verdict']}")

        # The weighted median is the plain median under equal weights.
        for v in ([3.0, 1.0, 2.0], [4.0, 1.0, 3.0, 2.0], [5.0]):
            check(close(mod.weighted_median(v, [1.0] * len(v)), statistics.median(v)),
                  f"weighted_median({v}) with equal weights")

        # The command line prints the same table it writes with --md.
        md = os.path.join(tmp, "pooled.md")
        out = subprocess.run([sys.executable, report_py, "pool", *paths, "--md", md],
                             capture_output=True, text=True)
        check(out.returncode == 0, f"pool exit {out.returncode}: {out.stderr}")
        with open(md) as f:
            text = f.read()
        check(text == out.stdout, "pool --md differs from what it printed")
        lines = [l for l in text.splitlines() if l.startswith("| lstm")]
        check(len(lines) == 5, f"five table rows, got {len(lines)}")
        check(any("| 0.600 (0.900) / 0.600 (0.900) |" in l and "| 0.900 |" in l for l in lines),
              f"cell 1 row in the table: {lines}")

        bad = subprocess.run([sys.executable, report_py, "pool", os.path.join(tmp, "missing.json")],
                             capture_output=True, text=True)
        check(bad.returncode != 0 and "compare_report.py pool" in bad.stderr,
              f"a missing run is a clear error: exit {bad.returncode}, stderr {bad.stderr!r}")

    # Two machines: refused, naming both runs and what differs.
    with tempfile.TemporaryDirectory() as tmp:
        other = dict(CONTEXT, **{"anvil.cpu_model": "Intel(R) Xeon(R) Processor"})
        paths = write_runs(tmp, runs, contexts=[CONTEXT, other])
        try:
            mod.pool(paths)
            check(False, "runs of two CPU models were pooled")
        except ValueError as e:
            msg = str(e)
            check("different machines" in msg and paths[0] in msg and paths[1] in msg
                  and "AMD EPYC" in msg and "Intel(R) Xeon(R) Processor" in msg,
                  f"the refusal names both runs and both CPUs: {msg}")
        out = subprocess.run([sys.executable, report_py, "pool", *paths], capture_output=True, text=True)
        check(out.returncode != 0 and "different machines" in out.stderr and out.stdout == "",
              f"command line refuses two machines: exit {out.returncode}, {out.stderr!r}")
        # Same CPU model, different VMs (their machine records differ): refused too.
        paths = write_runs(tmp, runs, machines=[{"machine_id_sha256": "aaaa", "model name": "AMD EPYC"},
                                                {"machine_id_sha256": "bbbb", "model name": "AMD EPYC"}])
        try:
            mod.pool(paths)
            check(False, "runs of two VMs (machine ids differ) were pooled")
        except ValueError as e:
            check("aaaa" in str(e) and "bbbb" in str(e), f"the refusal names both machine ids: {e}")
        # A run that records its machine and one that does not: cannot be shown to be one machine.
        paths = write_runs(tmp, runs, machines=[{"machine_id_sha256": "aaaa"}, None])
        try:
            mod.pool(paths)
            check(False, "a run with a machine record was pooled with one without")
        except ValueError as e:
            check("different machines" in str(e), f"machine record vs none: {e}")
        # Same machine record (its free-text source aside): pooled.
        paths = write_runs(tmp, runs, machines=[{"machine_id_sha256": "aaaa", "source": "x"},
                                                {"machine_id_sha256": "aaaa", "source": "y"}])
        check(len(mod.pool(paths)) == 5, "one machine, two runs: pooled")
        # Rounds that cannot be paired.
        paths = write_runs(tmp, [[row("lstm32", "train_step", 1, [0.9, 0.9, 0.9], [1.0, 1.0], 0.9)]])
        try:
            mod.pool(paths)
            check(False, "3 anvil rounds against 2 PyTorch rounds were pooled")
        except ValueError as e:
            check("cannot be paired" in str(e), f"unpaired rounds: {e}")

    # summarize: rounds paired by their number (r10 after r2, not after r1), the PyTorch side's
    # pct_peak against the peak anvil measured in the same round, the machine recorded, and the
    # peer's fallbacks shown.
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw")
        os.mkdir(raw)
        for r, peak in ((1, 100.0), (2, 110.0), (10, 120.0)):
            doc = {"context": dict(CONTEXT, **{"anvil.peak_gflops_per_core": str(peak),
                                               "anvil.peak_source": "measured"}),
                   "benchmarks": [{"name": "model/lstm32/train_step/batch:128/threads:1/iterations:1",
                                   "run_name": "model/lstm32/train_step/batch:128/threads:1",
                                   "real_time": 0.9e9 * r, "time_unit": "ns", "pct_peak": 40.0,
                                   "peak_rss_MB": 300, "alloc_peak_MB": 200, "step_median_s": 0.9 * r}]}
            with open(os.path.join(raw, f"anvil_lstm32_train_t1_r{r}.json"), "w") as f:
                json.dump(doc, f)
            peer = {"median_of_rep_means_s": 1.0 * r, "median_s": 1.0 * r, "mean_s": 1.0 * r,
                    "peak_rss_MB": 1500, "rss_after_import_MB": 500, "pct_peak": 50.0,
                    "peak_gflops_per_core": 2 * peak,
                    "config": {"allocator": "glibc", "choice": {
                        "requested": {"allocator": "tcmalloc"},
                        "fallbacks": ["allocator tcmalloc: libtcmalloc_minimal.so.4 not found; using glibc_nommap"]}}}
            with open(os.path.join(raw, f"torch_lstm32_train_t1_r{r}.jsonl"), "w") as f:
                f.write(json.dumps(peer) + "\n")
        out_json, out_md = os.path.join(tmp, "c.json"), os.path.join(tmp, "c.md")
        res = subprocess.run([sys.executable, report_py, "summarize", "--raw", raw, "--config", "preset",
                              "--json", out_json, "--md", out_md], capture_output=True, text=True)
        check(res.returncode == 0, f"summarize exit {res.returncode}: {res.stderr}")
        if res.returncode == 0:
            with open(out_json) as f:
                doc = json.load(f)
            r0 = doc["rows"][0]
            check(r0["anvil_rounds_s"] == [0.9, 1.8, 9.0] and r0["torch_rounds_s"] == [1.0, 2.0, 10.0],
                  f"rounds in round order: {r0['anvil_rounds_s']} {r0['torch_rounds_s']}")
            # PyTorch scored 50 % against twice the peak anvil measured in its round: 100 % of that peak.
            check(close(r0["torch_pct_peak"], 100.0), f"torch_pct_peak against anvil's peak: {r0['torch_pct_peak']}")
            check(close(r0["peak_gflops_per_core"], 110.0), f"peak of the row: {r0['peak_gflops_per_core']}")
            check("machine" in doc and doc["machine"].get("cpus"), f"machine record: {doc.get('machine')}")
            with open(out_md) as f:
                md = f.read()
            check("fallbacks on this machine" in md and "glibc_nommap" in md, "the peer's fallbacks in the table")
        os.remove(os.path.join(raw, "torch_lstm32_train_t1_r10.jsonl"))
        res = subprocess.run([sys.executable, report_py, "summarize", "--raw", raw, "--config", "preset",
                              "--json", out_json, "--md", out_md], capture_output=True, text=True)
        check(res.returncode != 0 and "do not pair up" in res.stderr,
              f"a round without its PyTorch pair is refused: {res.returncode} {res.stderr!r}")

    # One peak for both sides: the peer's pct_peak (scored against the peak it recorded, or its
    # old default of 242) rescaled to anvil's measured peak.
    check(close(mod.torch_pct_of({"pct_peak": 50.0}, 121.0), 100.0), "old peer output: 242 -> 121")
    check(close(mod.torch_pct_of({"pct_peak": 40.0, "peak_gflops_per_core": 110.0}, 110.0), 40.0),
          "peer scored against anvil's peak: unchanged")
    check(mod.torch_pct_of({"pct_peak": None}, 110.0) is None, "no pct_peak: none")
    check(mod.torch_pct_of({"pct_peak": 40.0}, None) is None, "no anvil peak: none")

    sys.exit(finish("compare_report.py pool: all checks passed"))


if __name__ == "__main__":
    main()
