#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# scripts/dist_report.py on hand-made results: the efficiencies match hand computation, and the
# simulator section says why a model without bucket sizes is not simulated (the simulator itself:
# test_dist_sim.py); scripts/dist_overlap_report.py (beside it) forms the paired overlap ratios.
# Usage: test_dist_report.py path/to/dist_report.py
import importlib.util
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layout_checks import figures_beside_tables, regenerate_above_tables, summary_first  # noqa: E402
from matplotlib_python import require_matplotlib  # noqa: E402

require_matplotlib()  # the report's plots are checked too
spec = importlib.util.spec_from_file_location("dist_report", sys.argv[1])
dr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dr)

alpha, beta = 20e-6, 1 / 2e9  # 20 us, 2 GB/s
rows = [{"bytes": s, "time_us": (2 * alpha + s * beta) * 1e6} for s in (4 << i for i in range(27))]
s = 50 * 1048576

with tempfile.TemporaryDirectory() as d:
    ctx = {"cpu": "test cpu", "backend": "mpi", "backend_version": "v", "threads_per_rank": 1,
           "git": "abc"}
    json.dump({"context": ctx, "allreduce": [dict(r, algbw_GBps=0, busbw_GBps=0) for r in rows]},
              open(os.path.join(d, "allreduce_np2.json"), "w"))
    def step(t, wait, batch, bwd=0.5):
        return {"model": "m", "rank_batch": batch, "step_s": t, "wait_s": wait, "backward_s": bwd,
                "grad_bytes": s}
    for name, row in [("steps_np1.json", step(1.0, 0.0, 8)),
                      ("steps_np2_strong.json", step(0.625, 0.1, 4)),
                      ("steps_np2_weak.json", step(1.25, 0.05, 8)),
                      ("steps_np2_weak_nooverlap.json", step(1.3, 0.2, 8))]:
        json.dump({"context": ctx, "steps": [row]}, open(os.path.join(d, name), "w"))
    text = dr.report(d)
    # Layout (Note [Report layout]): summary first with the measured efficiencies, a regenerate
    # line above every table, the bandwidth plot captioned below its table.
    fails = summary_first(text) + regenerate_above_tables(text)
    figure_fails, images = figures_beside_tables(text, d, f"python3 scripts/dist_report.py {d} > {d}/report.md")
    fails += figure_fails
    assert not fails, fails
    assert images == ["allreduce_bandwidth.png"], images
    assert "- m, 2 ranks: strong 80 %, weak 80 %" in text, text[:600]

assert "### All-reduce (sum, f32), 2 ranks" in text
# strong 1 / (2 * 0.625) = 80 %, weak 1 / 1.25 = 80 %, share 0.05 / 1.25 = 4 %, hidden 1 - 0.05/0.2,
# step time saved (1.3 - 1.25) / 0.2 = 25 %.
line = next(l for l in text.splitlines() if l.startswith("| m | 8 |"))
assert "| 80 % | 1.250 | 80 % | 4 % | 0.2000 | 0.0500 | 75 % | 25 % |" in line, line
# "m" is in neither the runs' bucket records nor the layout run: said, not silently dropped.
assert "Not simulated: no bucket sizes for model 'm'" in text, text

# The paired overlap report: two runs (rounds) of one mode, pairs pooled; the ratios are medians
# over pairs, never ratios of medians.
spec = importlib.util.spec_from_file_location(
    "dist_overlap_report", os.path.join(os.path.dirname(sys.argv[1]), "dist_overlap_report.py"))
orep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(orep)
def pair(after, ov, wait_after, wait_ov):
    return {"step_after_s": after, "step_overlap_s": ov, "wait_after_s": wait_after,
            "wait_overlap_s": wait_ov, "wait_hidden": 1 - wait_ov / wait_after,
            "step_saved": (after - ov) / wait_after, "exposed_after_s": wait_after / 2,
            "exposed_overlap_s": wait_ov / 4, "exposed_hidden": 1 - wait_ov / wait_after / 2,
            "backward_overlap_s": 1.0 + wait_ov, "backward_after_s": 1.0}
with tempfile.TemporaryDirectory() as d:
    ctx = {"cpu": "test cpu", "backend_version": "v", "ranks": 2, "threads_per_rank": 1,
           "mpi_progress": "thread", "loadavg_start": "3.50 2.00 1.00 1/100 7"}
    for r, pairs in [(1, [pair(2.0, 1.5, 1.0, 0.2), pair(3.0, 2.9, 1.0, 0.5)]),
                     (2, [pair(2.0, 1.2, 1.0, 0.1)])]:
        row = {"model": "m", "rank_batch": 8, "buckets": 2, "pairs": pairs}
        json.dump({"context": ctx, "overlap": [row]},
                  open(os.path.join(d, f"overlap_thread_r{r}.json"), "w"))
    text = orep.report(d)
# wait hidden per pair: 80, 50, 90 % -> median 80; step saved 50, 10, 80 % -> median 50.
line = next(l for l in text.splitlines() if l.startswith("| m | 8 | 2 | thread | 3 |"))
# backward overlapped - after: 0.2, 0.5, 0.1 -> median +0.200.
assert "| 80 % (50..90) | 0.500 | 0.050 | 90 % (75..95) | +0.200 | 50 % (10..80) |" in line, line
assert "2 run(s)" in text and "3.50" in text, text
print("PASS")
