#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""compare_report.py pool: pooled ratios, counts, intervals and verdicts of several compare runs.

    test_compare_pool.py COMPARE_REPORT_PY        (CTest: compare_report_pool, tests/CMakeLists.txt)

Writes three small compare_pytorch.json runs whose rounds are chosen by hand, pools them through
the module and through its command line, and checks every number against values computed here:
the pooled ratio of the medians, the rounds meeting the target, an interval that contains the
point and narrows to it when all rounds agree, and the three verdicts.
"""
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)


def row(model, phase, threads, anvil, torch, target):
    ratio = statistics.median(anvil) / statistics.median(torch)
    return {"model": model, "phase": phase, "threads": threads, "batch": 128,
            "anvil_rounds_s": anvil, "torch_rounds_s": torch, "ratio_anvil_over_torch": ratio,
            "target_ratio": target}


def main():
    report_py = sys.argv[1]
    spec = importlib.util.spec_from_file_location("compare_report", report_py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    # Cell 1: every round at 0.8 of PyTorch (inside 0.9). Cell 2: rounds alternate 0.85 / 0.95
    # (point 0.9 or below, interval across 0.9: "at"). Cell 3: every round at 1.1 (outside 1.0).
    runs = [
        [row("lstm32", "train_step", 1, [0.8, 1.6, 0.8], [1.0, 2.0, 1.0], 0.9),
         row("lstm32", "train_step", 2, [0.85, 0.95, 0.85], [1.0, 1.0, 1.0], 0.9),
         row("lstm64", "inference_step", 1, [1.1, 1.1], [1.0, 1.0], 1.0)],
        [row("lstm32", "train_step", 1, [0.8, 0.8], [1.0, 1.0], 0.9),
         row("lstm32", "train_step", 2, [0.95, 0.85, 0.95, 0.85], [1.0, 1.0, 1.0, 1.0], 0.9),
         row("lstm64", "inference_step", 1, [2.2], [2.0], 1.0)],
    ]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, rows in enumerate(runs):
            paths.append(os.path.join(tmp, f"run{i}.json"))
            with open(paths[-1], "w") as f:
                json.dump({"rows": rows}, f)
        cells = {(c["model"], c["phase"], c["threads"]): c for c in mod.pool(paths)}
        check(len(cells) == 3, f"three pooled cells, got {sorted(cells)}")

        c = cells[("lstm32", "train_step", 1)]
        a = [0.8, 1.6, 0.8, 0.8, 0.8]
        t = [1.0, 2.0, 1.0, 1.0, 1.0]
        check(c["rounds"] == 5, f"cell 1 rounds {c['rounds']}")
        check(abs(c["ratio"] - statistics.median(a) / statistics.median(t)) < 1e-12, f"cell 1 ratio {c['ratio']}")
        check(c["rounds_meeting_target"] == 5, f"cell 1 rounds meeting {c['rounds_meeting_target']}")
        check(abs(c["ci95"][0] - 0.8) < 1e-12 and abs(c["ci95"][1] - 0.8) < 1e-12,
              f"cell 1: identical rounds give a zero-width interval, got {c['ci95']}")
        check(c["verdict"] == "inside", f"cell 1 verdict {c['verdict']}")
        check(len(c["runs"]) == 2 and abs(c["runs"][0] - 0.8) < 1e-12, f"cell 1 runs {c['runs']}")

        c = cells[("lstm32", "train_step", 2)]
        a = [0.85, 0.95, 0.85, 0.95, 0.85, 0.95, 0.85]
        check(c["rounds"] == 7 and c["rounds_meeting_target"] == 4,
              f"cell 2 rounds {c['rounds']} meeting {c['rounds_meeting_target']}")
        check(abs(c["ratio"] - statistics.median(a)) < 1e-12, f"cell 2 ratio {c['ratio']}")
        lo, hi = c["ci95"]
        check(lo <= c["ratio"] <= hi and lo >= 0.85 - 1e-12 and hi <= 0.95 + 1e-12 and hi > 0.9,
              f"cell 2 interval {c['ci95']} around {c['ratio']}")
        check(c["verdict"] == "at", f"cell 2 verdict {c['verdict']}")

        c = cells[("lstm64", "inference_step", 1)]
        check(abs(c["ratio"] - 1.1) < 1e-12 and c["rounds_meeting_target"] == 0,
              f"cell 3 ratio {c['ratio']} meeting {c['rounds_meeting_target']}")
        check(c["verdict"] == "outside", f"cell 3 verdict {c['verdict']}")

        # The command line prints the same table it writes with --md.
        md = os.path.join(tmp, "pooled.md")
        out = subprocess.run([sys.executable, report_py, "pool", *paths, "--md", md],
                             capture_output=True, text=True)
        check(out.returncode == 0, f"pool exit {out.returncode}: {out.stderr}")
        with open(md) as f:
            text = f.read()
        check(text == out.stdout, "pool --md differs from what it printed")
        lines = [l for l in text.splitlines() if l.startswith("| lstm")]
        check(len(lines) == 3, f"three table rows, got {len(lines)}")
        check(any("| 0.800 |" in l and "| inside |" in l for l in lines), "cell 1 row in the table")

        bad = subprocess.run([sys.executable, report_py, "pool", os.path.join(tmp, "missing.json")],
                             capture_output=True, text=True)
        check(bad.returncode != 0 and "compare_report.py pool" in bad.stderr,
              f"a missing run is a clear error: exit {bad.returncode}, stderr {bad.stderr!r}")

    if FAILURES:
        print("FAILED:\n  " + "\n  ".join(FAILURES))
        sys.exit(1)
    print("compare_report.py pool: all checks passed")


if __name__ == "__main__":
    main()
