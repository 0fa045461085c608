#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`gpu_kit.sh report DIR` (scripts/gpu_study_report.py) on the hand-made GPU study of
tests/fixtures/gpu_study: every section and table is produced with the fixture's numbers, the
part without a folder (peers) is named as missing, and so are the jobs of missing.txt; with the
steps folder removed, steps is named as missing too. No GPU, no kit.

    test_gpu_study_report.py FIXTURE_DIR GPU_KIT_SH     (CTest: gpu_study_report)
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layout_checks import figures_beside_tables, regenerate_above_tables, summary_first  # noqa: E402

from checks import FAILURES, check, finish  # noqa: E402  (beside this file)


def report(kit, folder):
    r = subprocess.run(["bash", kit, "report", folder], capture_output=True, text=True)
    check(r.returncode == 0, f"gpu_kit.sh report exited {r.returncode}: {r.stderr[-500:]}")
    with open(os.path.join(folder, "report.md")) as f:
        return f.read()


def main():
    fixture, kit = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "study")
        shutil.copytree(fixture, d)
        text = report(kit, d)
        for heading in ("## Parts", "## GPU tests", "## Steps over the batch sweep", "### torch.compile",
                        "## Convolution algorithms per layer", "## LSTM", "### LSTM fusion on the GPU",
                        "### PyTorch's cuDNN LSTM in FP32 and TF32", "## Memory: the largest training batch",
                        "### Peak GPU memory at the sweep batches", "## PyTorch alone",
                        "## Host time per variant (the profile part)"):
            check(heading in text, f"no section '{heading}'")
        rows = {
            "steps (3 repetitions, defaults and best)":
                "| alexnet | train_step | 64 | resident | fp32 | 8.10 (2.5 %) | 7901 | 8.40 (1.5 %) | 0.96 "
                "| 7.00 (1.5 %) | 1.16 | 914 | 957 |",
            "failed TF32 row": "| alexnet | train_step | 64 | resident | tf32 | hand-made failure |",
            "torch.compile's reason": "torch.compile not run: no C compiler",
            "conv layer": "| alexnet:conv2 | 16 | forward | cuda.cudnn.fft | 0.450 | "
                          "cuda.cudnn[CUDNN_CONVOLUTION_FWD_ALGO_FFT] | 0.500 | 1.11 | 0.300 | 1 |",
            "FFT count": "FFT families fastest on 1 of 1 layer-passes.",
            "LSTM fusion": "| lstm32 | 128 | forward_training | 4.000 | 10.00 | 2.50 | 2.000 | 2.00 |",
            "PyTorch LSTM TF32": "| layer | lstm32 | 128 | forward_training | 2.000 (1.0 %) | 1.500 (2.0 %) | 0.75 |",
            "largest batch": "| alexnet | 240 | 256 | 300 | 320 | - |",
            "budget-stopped probe": "| fcn5 | 16384 | - | not probed | - | stopped: the part's budget ran out |",
            "peak at a sweep batch": "| alexnet | 64 | 914 | 957 | 0.96 |",
            "missing part in the parts table": "| peers | **missing** |",
            "missing part named": "Missing parts: **peers**.",
            "missing part's section": "**Missing: no `peers` folder.**",
            "missing.txt job": "- steps-alexnet-b64: pytorch alexnet b64 torch.compile: exited 1",
            "timed-out test case": "- timeout | 60 | a hanging case",
            "sweep pairs without rows": "Sweep pairs without anvil rows: fcn5 b32,",
            "host profile title": "**resnet50 train_step batch 32 cuda resident** (40 steps; "
                                  "`profile/host_profile_resnet50.txt`): variants 26.52 ms per step",
            "host profile top row": "| conv2d | cuda.cudnn | 159 | 19.080 | 120.0 |",
            "host profile step row": "| model/resnet50/train_step/batch:32/device:cuda/input:resident | 36.50 | "
                                     "34.80 | 26.52 |",
        }
        for what, row in rows.items():
            check(row in text, f"{what}: no line containing\n  {row}")
        # Layout (Note [Report layout]): summary first, a Regenerate line above every table, the
        # steps plot captioned in the steps section.
        for fail in summary_first(text) + regenerate_above_tables(text):
            check(False, fail)
        check("anvil / PyTorch best step time: median 1.16" in text, "the summary lacks anvil / PyTorch best")
        figure_fails, images = figures_beside_tables(
            text, d, f"python3 scripts/gpu_study_report.py {d} > {d}/report.md")
        for fail in figure_fails:
            check(False, fail)
        check(images == ["steps_vs_batch.png"], f"plots {images}, want the steps plot")
        shutil.rmtree(os.path.join(d, "steps-alexnet-b64"))
        text = report(kit, d)
        check("Missing parts: **steps**, **peers**." in text, "steps not named missing once its folder is gone")
        check("**Missing: no `steps` folder.**" in text, "no missing note in the steps section")
    return finish("PASS: the GPU study report from the hand-made fixture")


if __name__ == "__main__":
    sys.exit(main())
