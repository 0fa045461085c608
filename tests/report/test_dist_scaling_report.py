#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# scripts/dist_scaling_report.py on hand-made results for 1, 2 and 4 ranks: the efficiencies and
# throughput match hand computation, strong scaling is n/a where n does not divide the batch, and
# the all-reduce table has one column per rank count; the baselines section (triad, unfolded,
# uncoupled, bf16 buckets) only where they were recorded.
# Usage: test_dist_scaling_report.py REPORT_PY
import importlib.util
import json
import math
import os
import sys
import tempfile

spec = importlib.util.spec_from_file_location("dist_scaling_report", sys.argv[1])
sr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sr)

s, w = sr.efficiencies(1.0, 4, 0.5, 1.25)
assert math.isclose(s, 0.5) and math.isclose(w, 0.8), (s, w)
assert sr.efficiencies(1.0, 4, None, None) == (None, None)

ctx = {"cpu": "test cpu", "backend": "mpi", "backend_version": "v", "threads_per_rank": 1,
       "git": "abc", "loadavg_start": "0.1"}


def step(model, n, b, t, wait=0.0):
    return {"model": model, "ranks": n, "rank_batch": b, "step_s": t, "wait_s": wait}


with tempfile.TemporaryDirectory() as d:
    def put(name, doc):
        with open(os.path.join(d, name), "w") as f:
            json.dump(doc, f)
    for n in (2, 4):
        put(f"allreduce_np{n}.json", {"context": ctx, "allreduce": [
            {"bytes": 4, "time_us": 10.0 * n, "busbw_GBps": 0.001},
            {"bytes": 1024, "time_us": 20.0 * n, "busbw_GBps": 0.1}]})
    put("steps_np1.json", {"context": ctx, "steps": [step("fcn5", 1, 64, 1.0),
                                                     step("odd", 1, 6, 2.0)]})
    put("steps_np2_strong.json", {"steps": [step("fcn5", 2, 32, 0.625), step("odd", 2, 3, 1.25)]})
    put("steps_np2_weak.json", {"steps": [step("fcn5", 2, 64, 1.25, 0.25),
                                          step("odd", 2, 6, 2.5, 0.5)]})
    put("steps_np4_strong.json", {"steps": [step("fcn5", 4, 16, 0.5)]})  # 4 does not divide 6
    put("steps_np4_weak.json", {"steps": [step("fcn5", 4, 64, 2.0, 1.0),
                                          step("odd", 4, 6, 4.0, 1.0)]})
    put("steps_np4_weak_nooverlap.json", {"steps": [step("fcn5", 4, 64, 2.5, 1.5)]})
    text = sr.report(d)
    assert "### Baselines" not in text, text  # only where dist_bench.sh recorded them
    put("triad_np1.json", {"triad": {"total_GBps": 10.0}})
    put("triad_np2.json", {"triad": {"total_GBps": 16.0}})
    put("steps_np1_unfolded.json", {"steps": [step("fcn5", 1, 64, 1.1)]})
    put("steps_np2_uncoupled.json", {"steps": [step("fcn5", 2, 64, 1.2)]})
    bf = step("fcn5", 2, 64, 1.0)
    bf.update(step_s_min=0.9, step_s_max=1.3)
    put("steps_np2_weak_bf16.json", {"steps": [bf]})
    based = sr.report(d)

lines = text.splitlines()
assert "| bytes | 2 ranks | 4 ranks |" in lines, text
assert "| 1024 | 40.0 / 0.100 | 80.0 / 0.100 |" in lines, text
# fcn5 at 2 ranks: strong 1 / (2 x 0.625) = 80 %, weak 1 / 1.25 = 80 %, 2 x 64 / 1.25 = 102.4/s.
assert "| fcn5 | 64 | 2 | 0.625 | 80 % | 1.250 | 80 % | 102.4 | 20 % | n/a | 0.2500 |" in lines, text
# fcn5 at 4 ranks: strong 1 / (4 x 0.5) = 50 %, weak 50 %, 128/s, wait share 50 %, plain 1.5 s.
assert "| fcn5 | 64 | 4 | 0.500 | 50 % | 2.000 | 50 % | 128.0 | 50 % | 1.5000 | 1.0000 |" in lines, text
assert "| odd | 6 | 4 | n/a | n/a | 4.000 | 50 % | 6.0 | 25 % | n/a | 1.0000 |" in lines, text
assert "| fcn5 | 64 | 1 | 1.000 | 100 % | 1.000 | 100 % | 64.0 | n/a | n/a | n/a |" in lines, text
# fcn5 at 2 ranks, weak 1.25 s: vs uncoupled 1.2 / 1.25 = 96 %, vs unfolded 1.1 / 1.25 = 88 %,
# vs solo 1 / 1.25 = 80 %; the bf16 run with its spread; n/a where a baseline is missing.
blines = based.splitlines()
assert any(l.startswith("Memory-bandwidth triad") and "1 rank(s) 10.00 GB/s, 2 rank(s) 16.00 GB/s."
           in l for l in blines), based
assert "| fcn5 | 2 | 1.000 | 1.100 | 1.200 | 1.250 | 96 % | 88 % | 80 % | 1.000 [0.900..1.300] |" \
    in blines, based
assert "| fcn5 | 4 | 1.000 | 1.100 | n/a | 2.000 | n/a | 55 % | 50 % | n/a |" in blines, based
print("PASS")
