#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The alias map of anvil_bench's row names: an older name -> the name the same row has today, so that
committed results keep reading (the report, kernel_winners.py). Python 3 standard library only.

    kernel/<op>/<v>/<pass>/<model>:<layer>/threads:<t>        (CPU kernel rows before 2026-11-28)
 -> kernel/<op>/<v>/<pass>/<model>:<layer>/batch:<b>/device:cpu/threads:<t>
    (b from the run's context entry anvil.kernel_batch.<model>; without it the batch part is left out)
    gpu_lstm/<v>/<pass>/<model>:lstm/batch:<b>/device:cuda   (GPU LSTM layer rows before 2026-11-28)
 -> kernel/lstm/<v>/<pass>/<model>:lstm/batch:<b>/device:cuda
The GPU conv rows (kernel/conv2d/.../batch:<b>/device:cuda) kept their names.
"""
import re

OLD_CPU_KERNEL = re.compile(r"^kernel/([^/]+)/([^/]+)/([^/]+)/([^/:]+):([^/]+)/threads:(\d+)(.*)$")
OLD_GPU_LSTM = re.compile(r"^gpu_lstm/([^/]+)/([^/]+)/([^/:]+):([^/]+)/batch:(\d+)/device:cuda(.*)$")


def canonical(name, context=None):
    """Today's name of a row named `name` in a run with JSON context `context`."""
    m = OLD_CPU_KERNEL.match(name)
    if m:
        op, variant, pass_, model, layer, threads, rest = m.groups()
        batch = (context or {}).get(f"anvil.kernel_batch.{model}")
        batch_part = f"/batch:{batch}" if batch else ""
        return f"kernel/{op}/{variant}/{pass_}/{model}:{layer}{batch_part}/device:cpu/threads:{threads}{rest}"
    m = OLD_GPU_LSTM.match(name)
    if m:
        variant, pass_, model, layer, batch, rest = m.groups()
        return f"kernel/lstm/{variant}/{pass_}/{model}:{layer}/batch:{batch}/device:cuda{rest}"
    return name


def canonical_run(data):
    """A loaded Google Benchmark JSON with every row's name and run_name made canonical (in place)."""
    context = data.get("context", {})
    for b in data.get("benchmarks", []):
        for key in ("name", "run_name"):
            if key in b:
                b[key] = canonical(b[key], context)
    return data
