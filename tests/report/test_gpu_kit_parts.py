#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The GPU study's parts without a GPU and without a packed kit:
  1. `gpu_kit.sh run --dry-run --part X` exits 0 for every part, with ANVIL_GPU_KIT_DIR pointing
     at an empty folder, and prints its jobs and an estimate; a part that needs more than one call
     lists the calls; an unknown part exits 2.
  2. scripts/gpu_study.py's runner with a stand-in anvil_bench and a stand-in python (this file's
     --fake-bench / --fake-python modes): the memory part's bisection finds the largest batch the
     stand-in accepts (out-of-memory error rows above 300), every job is logged in jobs.tsv, and
     with a budget too small for the steps part the jobs not started are named in missing.txt;
     the part's provenance.json and each record it writes carry the provenance fields.

    test_gpu_kit_parts.py REPO_ROOT     (CTest: gpu_kit_parts)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from checks import FAILURES, check, finish  # noqa: E402  (beside this file)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from provenance_check import provenance_problems  # noqa: E402  (tests/)


def fake_bench(argv):
    """anvil_bench stand-in: a training step at batch B fits when B <= 300, else the error row."""
    opts = dict(a.split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    b = int(opts.get("--anvil_batches", "64"))
    name = re.sub(r"[\^$]", "", opts.get("--benchmark_filter", "model/x")).split("(")[0] + "/manual_time"
    row = {"name": name, "run_name": name, "run_type": "iteration", "real_time": 1.0, "time_unit": "ms",
           "gpu_alloc_peak_MB": b * 2.0}
    if b > 300:
        row = {"name": name, "run_name": name, "run_type": "iteration", "error_occurred": True,
               "error_message": f"out of memory on cuda:0 allocating {b} MB"}
    if "--benchmark_out" in opts:
        with open(opts["--benchmark_out"], "w") as f:
            json.dump({"benchmarks": [row]}, f)
    return 0


def fake_python(argv):
    """python stand-in for the PyTorch peer: one line per call."""
    if "--probe-max-batch" in argv:
        model = argv[argv.index("--model") + 1]
        print(json.dumps({"peer": "pytorch", "kind": "max_batch", "model": model, "max_batch": 280,
                          "first_oom": 296, "cap": 8192, "note": ""}))
    return 0


def main():
    if sys.argv[1] == "--fake-bench":
        return fake_bench(sys.argv[2:])
    if sys.argv[1] == "--fake-python":
        return fake_python(sys.argv[2:])
    root = sys.argv[1]
    kit = os.path.join(root, "scripts", "gpu_kit.sh")
    study = os.path.join(root, "scripts", "gpu_study.py")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, ANVIL_GPU_KIT_DIR=os.path.join(tmp, "no-kit"))
        for part in ("tests", "steps", "layers", "lstm", "memory", "peers", "profile"):
            r = subprocess.run(["bash", kit, "run", "--dry-run", "--part", part, "--out", os.path.join(tmp, "o")],
                               capture_output=True, text=True, env=env, timeout=60)
            check(r.returncode == 0, f"--dry-run --part {part} exited {r.returncode}: {r.stderr[-400:]}")
            check("estimate" in r.stdout, f"--dry-run --part {part} printed no estimate:\n{r.stdout[-400:]}")
            if part == "steps":
                check("anvil_bench" in r.stdout and "--benchmark_repetitions=5" in r.stdout
                      and "pytorch_gpu_models.py" in r.stdout, "the steps plan lacks its commands")
                check("--part steps --models alexnet --batches 16,32,64,128" in r.stdout,
                      "the steps plan does not list the calls that fit:\n" + r.stdout[-1500:])
        r = subprocess.run(["bash", kit, "run", "--dry-run", "--part", "nope"], capture_output=True, text=True, env=env)
        check(r.returncode == 2, f"an unknown part exited {r.returncode}")
        check(not os.path.exists(os.path.join(tmp, "no-kit")), "a dry run made the kit folder")

        me = os.path.abspath(__file__)
        bench = os.path.join(tmp, "anvil_bench")
        py = os.path.join(tmp, "python")
        for path, mode in ((bench, "--fake-bench"), (py, "--fake-python")):
            with open(path, "w") as f:
                f.write(f"#!/bin/sh\nexec {sys.executable} {me} {mode} \"$@\"\n")
            os.chmod(path, 0o755)
        mem = os.path.join(tmp, "memory")
        r = subprocess.run([sys.executable, study, "run", "--part", "memory", "--models", "alexnet", "--out", mem,
                            "--bench", bench, "--python", py, "--budget", "120"], capture_output=True, text=True,
                           timeout=300)
        check(r.returncode == 0, f"memory part exited {r.returncode}: {r.stderr[-400:]}")
        rows = [json.loads(l) for l in open(os.path.join(mem, "anvil_memory.jsonl"))]
        best = [x for x in rows if x["kind"] == "max_batch"]
        # 128 fits, 256 fits, 512 not; bisection: 384 no, 320 no, 288 yes, 304 no -> 288 (within 1/16)
        check(best and best[0]["max_batch"] == 288 and best[0]["first_oom"] == 304,
              f"anvil's largest batch: {best}")
        probes = [x["batch"] for x in rows if x["kind"] == "memory_probe"]
        # Note [Provenance]: the part's provenance.json and every record the runner writes.
        for x in rows + [json.load(open(os.path.join(mem, "provenance.json")))]:
            check(not provenance_problems(x.get("provenance", {})),
                  f"provenance of {x.get('kind', 'provenance.json')}: {provenance_problems(x.get('provenance', {}))}")
        check(probes == [128, 256, 512, 384, 320, 288, 304], f"probe order {probes}")
        peer = open(os.path.join(mem, "peer_memory.jsonl")).read()
        check('"max_batch": 280' in peer, "the PyTorch probe's line is not in peer_memory.jsonl")
        jobs = open(os.path.join(mem, "jobs.tsv")).read().splitlines()
        check(len(jobs) == 2 and all(j.startswith("ok\t") for j in jobs), f"jobs.tsv: {jobs}")
        steps = os.path.join(tmp, "steps")
        r = subprocess.run([sys.executable, study, "run", "--part", "steps", "--models", "vgg16", "--batches", "32",
                            "--out", steps, "--bench", bench, "--python", py, "--budget", "70"],
                           capture_output=True, text=True, timeout=300)
        check(r.returncode == 0, f"steps part exited {r.returncode}: {r.stderr[-400:]}")
        missing = open(os.path.join(steps, "missing.txt")).read()
        check("pytorch vgg16 b32 torch.compile: not run:" in missing,
              f"a job past the budget is not named in missing.txt:\n{missing}")
        check(os.path.exists(os.path.join(steps, "anvil_vgg16_b32.json")), "the anvil steps job wrote no JSON")
    return finish("PASS: gpu_kit.sh run --dry-run for every part; the part runner with stand-ins")


if __name__ == "__main__":
    sys.exit(main())
