#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The docs check's "status" and "notrun" rules on a throw-away repository.

    test_status_check.py REPO_ROOT

A stale "has not yet run on a GPU" sentence must be reported when a results folder shows the
component ran on a GPU, and not when the sentence names something no folder shows (NCCL across
several GPUs), nor inside docs/results/, nor when NOT_RUN_EXCEPTIONS excuses it (an entry that
excuses nothing is reported); docs/status.md must be reported missing, then out of date once a
newer results folder arrives, and pass after scripts/status_table.py rewrites it.
Note [Status is generated from the results folders].
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_harness import Harness  # noqa: E402

h = Harness(sys.argv[1])
root, expect = h.root, h.expect


def run_check(repo):
    return h.run_check(repo, "status,notrun")


def benchmark_json(names, gpu):
    context = {"num_cpus": 16, "anvil.cpu_model": "Some CPU"}
    if gpu:
        context["anvil.cuda"] = "CUDA runtime 13.0; cuda:0 NVIDIA Test GPU (sm_90, 80.0 GiB)"
    return json.dumps({"context": context, "benchmarks": [{"name": n} for n in names]})


with tempfile.TemporaryDirectory() as tmp:
    repo = pathlib.Path(tmp)
    (repo / "scripts").mkdir()
    shutil.copy(root / "scripts" / "status_table.py", repo / "scripts")
    cpu = repo / "docs" / "results" / "cpu_2026-01-01"
    cpu.mkdir(parents=True)
    (cpu / "bench.json").write_text(benchmark_json(["model/alexnet/train_step/batch:16"], False))
    # History may stay as it was written.
    (cpu / "README.md").write_text("The CNN paths have not yet run on a GPU.\n")
    (repo / "README.md").write_text(
        "# demo\n\nThe CPU steps are measured. The CNN and LSTM paths have not yet run on a\n"
        "GPU. NCCL across several GPUs has not run.\n")

    status, out = run_check(repo)
    expect(status == 1 and "[status] docs/status.md is out of date" in out,
           f"a missing docs/status.md was not reported:\n{out}")
    expect("[notrun]" not in out, f"a sentence was reported before any GPU result:\n{out}")

    gpu = repo / "docs" / "results" / "gpu_2026-01-02"
    gpu.mkdir()
    (gpu / "steps.json").write_text(benchmark_json(
        ["model/resnet50/train_step/batch:32/device:cuda/input:resident"], True))
    subprocess.run([sys.executable, str(repo / "scripts" / "status_table.py"), str(repo)],
                   check=True, capture_output=True)
    page = (repo / "docs" / "status.md").read_text()
    expect("| GPU conv, pooling, batch norm (cuDNN, own) | NVIDIA Test GPU | 2026-01-02 | "
           "[gpu_2026-01-02](results/gpu_2026-01-02/) | 1 benchmark row |" in page, page)
    expect("| NCCL across 2+ GPUs | | never |" in page, page)
    status, out = run_check(repo)
    expect(status == 1, f"the check passed on a stale sentence:\n{out}")
    expect("[notrun] README.md:3: says 'not yet run' of a GPU" in out and "gpu_2026-01-02" in out,
           f"the stale sentence was not reported with its line and folder:\n{out}")
    expect(out.count("[notrun]") == 1, f"a true or historical sentence was reported:\n{out}")
    expect("[status]" not in out, f"a fresh docs/status.md was reported:\n{out}")

    (repo / "README.md").write_text("# demo\n\nSee docs/status.md. NCCL across several GPUs "
                                    "has not run.\n")
    status, out = run_check(repo)
    expect(status == 0, f"the check still fails after the fix:\n{out}")

    newer = repo / "docs" / "results" / "gpu_2026-02-01"
    newer.mkdir()
    (newer / "steps.json").write_text(benchmark_json(
        ["model/lstm32/train_step/batch:128/device:cuda/input:resident"], True))
    status, out = run_check(repo)
    expect(status == 1 and "[status] docs/status.md is out of date" in out,
           f"an out-of-date docs/status.md was not reported:\n{out}")
    status, _ = subprocess.run([sys.executable, str(repo / "scripts" / "status_table.py"),
                                str(repo), "--check"], capture_output=True).returncode, None
    expect(status == 1, "status_table.py --check passed on an out-of-date page")

    # An excused sentence (NOT_RUN_EXCEPTIONS) passes; the entries that excuse nothing any more
    # are reported. The LSTM ran on a GPU now (gpu_2026-02-01).
    subprocess.run([sys.executable, str(repo / "scripts" / "status_table.py"), str(repo)],
                   check=True, capture_output=True)
    (repo / "docs" / "cuda.md").write_text(
        "The LSTM test was rewritten. The new version has not run on a GPU yet.\n\n"
        "The LSTM paths have not run on a GPU.\n")
    status, out = run_check(repo)
    expect("docs/cuda.md:1:" not in out, f"an excused sentence was reported:\n{out}")
    expect("[notrun] docs/cuda.md:3: says 'not run'" in out,
           f"a stale sentence beside an excused one was not reported:\n{out}")
    expect("excuses no sentence of docs/cuda.md" in out and
           "'The new version has not run on a' excuses" not in out,
           f"the unused exceptions (only those) were not reported:\n{out}")

sys.exit(h.finish("test_status_check"))
