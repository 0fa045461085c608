#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# scripts/dist_sim.py (Note [Bucket-order simulator]) on the hand-made timelines of
# tests/fixtures/dist_sim/timeline.json, whose answers were worked out by hand, and its validation
# table rendered through scripts/dist_report.py from the committed 2-16-rank runs, each row checked
# against the measured step it names. Usage: test_dist_sim.py REPO_ROOT
import importlib.util
import json
import math
import os
import sys

root = sys.argv[1]


def module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(root, "scripts", name + ".py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


sim = module("dist_sim")
fixture = json.load(open(os.path.join(root, "tests", "fixtures", "dist_sim", "timeline.json")))
curve = sim.Curve(fixture["allreduce"])
assert math.isclose(curve.time(1500), 0.075) and math.isclose(curve.time(8000), 0.4)
for case in fixture["cases"]:
    got = sim.simulate(case["ready_s"], case["bucket_bytes"], curve.time, case["backward_s"],
                       case["forward_s"], case["update_s"], overlap=case["overlap"])
    for key, want in case["expect"].items():
        have = got[key]
        ok = (all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(have, want)) and
              len(have) == len(want)) if isinstance(want, list) else \
            math.isclose(have, want, abs_tol=1e-12)
        assert ok, (case["name"], key, have, want)
try:
    sim.simulate([0.1], [1000, 2000], curve.time, 0.5)
    raise AssertionError("a timeline with fewer ready times than buckets was accepted")
except ValueError as e:
    assert "1 ready times for 2 buckets" in str(e), e

# Ready shares by bytes when nothing was recorded: 1, 3 -> 25 %, 100 %.
sizes, frac, src = sim.timeline({"model": "m", "bucket_mb": 25.0, "bucket_bytes": [100, 300]}, {})
assert frac == [0.25, 1.0] and src == "approx. (bytes)", (frac, src)

# DataParallel's timeline (bucket_complete_s) is preferred to the ready clock's times, which a
# hook's progress call can delay (Note [Bucket ready times]).
row = {"model": "m", "bucket_mb": 25.0, "bucket_bytes": [100, 300], "bucket_ready_s": [0.5, 2.0],
       "bucket_complete_s": [0.4, 1.0], "bucket_ready_backward_s": 2.0}
sizes, frac, src = sim.timeline(row, {})
assert frac == [0.2, 0.5] and src == "recorded", (frac, src)
del row["bucket_complete_s"]
assert sim.timeline(row, {})[1] == [0.25, 1.0]

# The validation table from the committed H200-host runs, through the distributed report.
folder = os.path.join(root, "docs", "results", "h200_2026-11-26", "dist", "scaling")
report = module("dist_report").report(folder)
assert "### Bucket-order simulator against the measured steps (projected)" in report, report
assert "Inputs of every simulated (projected) number" in report
measured = {}
for n in (2, 4, 8, 16):
    for kind in ("weak", "strong"):
        for r in json.load(open(os.path.join(folder, f"steps_np{n}_{kind}.json")))["steps"]:
            measured[(r["model"], n, kind)] = r["step_s"]
seen = set()
for line in report.splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if len(cells) != 11 or not cells[1].isdigit():
        continue
    model, n, kind, meas, simulated, err = cells[0], int(cells[1]), cells[2], float(cells[6]), \
        float(cells[7]), float(cells[8].rstrip(" %"))
    late, late_err = float(cells[9]), float(cells[10].rstrip(" %"))
    assert abs(100 * (late / meas - 1) - late_err) < 1.0, line
    # Starting buckets at their ready times can only make the step shorter or equal.
    assert simulated <= late + 5e-4, line
    if (model, n, kind) in measured:
        assert abs(meas - measured[(model, n, kind)]) < 5e-4, line
        seen.add((model, n, kind))
    assert abs(100 * (simulated / meas - 1) - err) < 1.0, line
assert seen == set(measured), sorted(set(measured) - seen)
print("PASS")
