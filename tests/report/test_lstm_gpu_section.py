#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The report's "LSTM fusion on the GPU" section (scripts/report_sections.py) holds the numbers of
the rows it was given.

    test_lstm_gpu_section.py SCRIPTS_DIR     (CTest: report_lstm_gpu_section, tests/CMakeLists.txt)

Hand-made records as scripts/report.py parses them (kernel/lstm/<variant>/<pass>/<model>:<layer>/
batch:B/device:cuda rows, GPU model steps with input:resident / input:pinned) and PyTorch rows as
bench/peers/pytorch_gpu_lstm.py prints them; checks every cell against values computed here, a dash
where a row is missing, and the one-line note when the run has no GPU LSTM rows.
"""
import json
import os
import sys
import tempfile

from checks import FAILURES, check, finish  # noqa: E402  (beside this file)


def main():
    sys.path.insert(0, sys.argv[1])
    import report_sections as rs
    records = []
    layer = {("cuda.custom.fused", "forward_training"): 0.004, ("cuda.custom.unfused", "forward_training"): 0.010,
             ("cuda.custom.fused", "backward"): 0.008}  # unfused backward missing
    for (variant, pas), s in layer.items():
        records.append({"name": f"kernel/lstm/{variant}/{pas}/lstm32:lstm.l0/batch:128/device:cuda/manual_time",
                        "family": "kernel", "seconds": s})
    records.append({"name": "model/lstm32/train_step/batch:128/device:cuda/input:resident", "family": "model",
                    "model": "lstm32", "phase": "train_step", "batch": "128", "device": "cuda",
                    "input": "resident", "seconds": 0.0075})
    records.append({"name": "model/lstm32/train_step/batch:128/device:cuda/input:pinned", "family": "model",
                    "model": "lstm32", "phase": "train_step", "batch": "128", "device": "cuda",
                    "input": "pinned", "seconds": 0.0080})
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "peer_pytorch_cuda_lstm.jsonl"), "w") as f:
            f.write(json.dumps({"kind": "layer", "model": "lstm32", "batch": 128, "pass": "forward_training",
                                "seconds": 0.002, "device_name": "NVIDIA H100"}) + "\n")
            f.write(json.dumps({"kind": "step", "model": "lstm32", "batch": 128, "seconds": 0.0050,
                                "device_name": "NVIDIA H100"}) + "\n")
        out = []
        rs.lstm_gpu_section(records, out, d)
        text = "\n".join(out)
        check("## LSTM fusion on the GPU" in text, "no section title")
        check("NVIDIA H100" in text, "device name missing")
        check("| lstm32 | 128 | forward_training | 4.000 | 10.00 | 2.50 | 2.000 | 2.00 |" in text,
              "forward row wrong:\n" + text)
        check("| lstm32 | 128 | backward | 8.000 | — | — | — | — |" in text, "backward row wrong:\n" + text)
        check("| lstm32 | 128 | 7.500 | 8.000 | 5.000 | 1.50 |" in text, "step row wrong:\n" + text)
        empty = []
        rs.lstm_gpu_section([], empty, d)
        check(any("No GPU LSTM rows" in l for l in empty), "no note for a run without GPU LSTM rows")
        # The CPU vs GPU key drops the step definition, so GPU rows meet their CPU twins.
        check(rs.device_free_key("model/fcn5/train_step/batch:64/device:cuda/input:pinned")
              == "model/fcn5/train_step/batch:64", "device_free_key keeps input:")
    sys.exit(finish("ok"))


if __name__ == "__main__":
    main()
