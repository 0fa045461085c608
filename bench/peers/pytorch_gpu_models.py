#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch on the GPU beside anvil_bench's model/<m>/<phase>/batch:<b>[/resident][/tf32]/device:cuda.

    python3 bench/peers/pytorch_gpu_models.py --model alexnet --phases train,inference --batch 128
        [--steps copied,resident] [--math fp32,tf32] [--warmup 3] [--min-time 0.5] [--min-steps 10]

The FCN/MLP models and the CNNs of networks.md (built by pytorch_models.py, the CPU peer, so the
networks are the same), one JSON line per (step definition, math):
  step  copied   = the batch copied from pageable host memory inside every step (anvil's
                   .../device:cuda rows), resident = the batch already on the GPU
                   (.../resident/device:cuda);
  math  fp32     = TF32 off for matmuls and cuDNN (allow_tf32 = False, matmul precision
                   "highest"), tf32 = both on (.../resident/tf32/device:cuda).
torch.backends.cudnn.benchmark = True (cuDNN's algorithm search per shape, as anvil's cuda.cudnn).
Timing as anvil's GPU steps: CUDA events around each whole step (which ends with the device
synchronised), `--warmup` steps first, then steps until `--min-time` seconds and `--min-steps`;
median seconds per step. Memory: torch.cuda.max_memory_allocated over the timed steps (the
caching allocator's peak of live tensors, what anvil's gpu_alloc_peak_MB counts), reset per row.
The configuration is recorded in every line; nothing here depends on a CPU allocator.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_models as pm  # noqa: E402  (the CPU peer: network builders and tables)


def build(torch, name):
    if name in pm.MODELS:
        net = pm.build_model(torch, name)
        fin, classes = pm.MODELS[name][0], pm.MODELS[name][2]
        return net, (fin,), classes, pm.SGD_LR.get(name, 0.01), 0.0
    spec = pm.NETS[name]
    if spec["kind"] != "cnn":
        raise SystemExit(f"pytorch_gpu_models.py: {name} is not an FCN/MLP model or a CNN")
    return pm.build_net(torch, name), spec["input"], spec["classes"], spec["lr"], spec["momentum"]


def set_math(torch, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def time_steps(torch, step, warmup, min_time, min_steps):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times, t0 = [], time.perf_counter()
    while len(times) < min_steps or time.perf_counter() - t0 < min_time:
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--phases", default="train,inference")
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--steps", default="copied,resident")
    p.add_argument("--math", default="fp32,tf32")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--min-time", type=float, default=0.5)
    p.add_argument("--min-steps", type=int, default=10)
    a = p.parse_args()

    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        raise SystemExit("pytorch_gpu_models.py: torch.cuda.is_available() is False")
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    net, in_shape, classes, lr, momentum = build(torch, a.model)
    net = net.to(dev)
    g = torch.Generator().manual_seed(1)
    x_host = torch.randn(a.batch, *in_shape, generator=g)
    y_host = torch.randint(0, classes, (a.batch,), generator=g)
    x_dev, y_dev = x_host.to(dev), y_host.to(dev)
    for phase in a.phases.split(","):
        if phase not in ("train", "inference"):
            raise SystemExit(f"pytorch_gpu_models.py: unknown phase '{phase}' (train, inference)")
        run_phase(a, torch, F, net, phase == "train", lr, momentum, dev, x_host, y_host, x_dev, y_dev)


def run_phase(a, torch, F, net, train, lr, momentum, dev, x_host, y_host, x_dev, y_dev):
    net.train(train)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum, foreach=False) if train else None
    for step_kind in a.steps.split(","):
        for math in a.math.split(","):
            if step_kind == "copied" and math == "tf32":
                continue  # anvil times TF32 with the batch resident only
            set_math(torch, math == "tf32")

            def batch():
                return (x_host.to(dev), y_host.to(dev)) if step_kind == "copied" else (x_dev, y_dev)

            def train_step():
                x, y = batch()
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(net(x), y).backward()
                opt.step()
                torch.cuda.synchronize()

            def inference_step():
                x, _ = batch()
                with torch.inference_mode():
                    net(x)
                torch.cuda.synchronize()

            step = train_step if train else inference_step
            step()  # cudnn.benchmark's search for this math, outside the peak
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            times = time_steps(torch, step, a.warmup, a.min_time, a.min_steps)
            print(json.dumps({
                "peer": "pytorch", "device": "cuda", "model": a.model,
                "phase": "train_step" if train else "inference_step", "batch": a.batch,
                "step": step_kind, "math": math, "steps": len(times),
                "median_s": statistics.median(times), "mean_s": statistics.fmean(times),
                "min_s": min(times),
                "gpu_peak_alloc_MB": torch.cuda.max_memory_allocated() / 1048576.0,
                "gpu_peak_reserved_MB": torch.cuda.max_memory_reserved() / 1048576.0,
                "config": {"torch": torch.__version__, "cuda": torch.version.cuda,
                           "cudnn": torch.backends.cudnn.version(), "cudnn_benchmark": True,
                           "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                           "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                           "device_name": torch.cuda.get_device_name(0),
                           "optimizer": f"SGD lr={lr} momentum={momentum} foreach=False"},
            }), flush=True)


if __name__ == "__main__":
    main()
