#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's cuDNN LSTM on the GPU beside anvil_bench's kernel/lstm/<variant>/<pass>/<model>:<layer>/batch:B/device:cuda rows
and the LSTM models' GPU steps (model/<m>/train_step/batch:B/device:cuda/input:resident).

    python3 bench/peers/pytorch_gpu_lstm.py [--min-time 0.5] [--reps 5] [--math fp32,tf32]
        [--layers-only | --steps-only]

Math (one pass over every row per entry of --math, "math" in each line): fp32 = TF32 off
(torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32 = False), tf32 =
both on; cudnn.benchmark on. One JSON line per row:
  kind "layer": one nn.LSTM(I, H) layer (PyTorch's layout: two bias vectors) at the shapes of
    bench/kernel_bench.cpp, pass forward_training (forward with autograd recording) or backward
    (backward alone, retain_graph, from one recorded forward), mean GPU seconds per call;
  kind "step": the DLBench LSTM language model of networks.md (embedding 10000 x 256, nn.LSTM 256
    with 2 layers, Linear 256 -> 10000 every step, CE summed over T and averaged over B,
    clip_grad_norm_(5), SGD lr 1.0; foreach left to PyTorch) with the batch already on the GPU
    ("resident"), at T = 32 / 64 and batch 128, 256, 512; phase train_step (whole training step)
    and inference_step (forward under no_grad, the hidden state carried).
Timing: CUDA events around spans of back-to-back calls, warm-up first, until --min-time seconds of
GPU time (as bench/peers/pytorch_gpu_gemm.py), --reps times: "seconds" is the median of the
repetitions' means, "rep_seconds" each, "spread_pct" their (max - min) over the median.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import provenance as P  # noqa: E402  (scripts/provenance.py: Note [Provenance])

LAYERS = [("lstm32", 32, b, 256, 256) for b in (128, 256, 512)] + \
         [("lstm64", 64, b, 256, 256) for b in (128, 256, 512)] + \
         [("ptb_small", 20, 20, 200, 200), ("lstm_imdb", 500, 500, 32, 100)]
STEPS = [("lstm32", 32, b) for b in (128, 256, 512)] + [("lstm64", 64, b) for b in (128, 256, 512)]


def time_reps(torch, run, min_time, reps):
    """(median of the repetitions' mean seconds per call, each repetition's, spread in %)."""
    each = [time_calls(torch, run, min_time) for _ in range(reps)]
    med = statistics.median(each)
    return med, each, (max(each) - min(each)) / med * 100


def time_calls(torch, run, min_time):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def span(reps):
        start.record()
        for _ in range(reps):
            run()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3

    for _ in range(3):
        run()
    torch.cuda.synchronize()
    one = span(1)
    reps = int(min(100, max(1, -(-1e-3 // max(one, 1e-7)))))
    total, calls = 0.0, 0
    while total < min_time:
        total += span(reps)
        calls += reps
    return total / calls


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--min-time", type=float, default=0.5)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--math", default="fp32", help="fp32, tf32 or both (fp32,tf32)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--layers-only", action="store_true")
    g.add_argument("--steps-only", action="store_true")
    a = p.parse_args(argv)
    maths = a.math.split(",")
    if any(m not in ("fp32", "tf32") for m in maths) or a.reps < 1:
        p.error("--math: fp32 and/or tf32; --reps: at least 1")
    import torch
    if not torch.cuda.is_available():
        sys.exit("pytorch_gpu_lstm.py: torch.cuda.is_available() is False")
    torch.backends.cudnn.benchmark = True
    for math in maths:
        run_math(a, torch, math)


def run_math(a, torch, math):
    tf32 = math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    dev = torch.device("cuda")
    facts = {"peer": "pytorch", "device": "cuda", "torch": torch.__version__,
             "cudnn": torch.backends.cudnn.version(), "device_name": torch.cuda.get_device_name(0),
             "tf32": tf32, "math": math,
             "config": {"name": "defaults", "cudnn_benchmark": True, "tf32": tf32, "graphs": False,
                        "compile": False, "channels_last": False, "foreach": "pytorch default"},
             "provenance": P.provenance(P.torch_libraries(torch), torch=torch)}
    torch.manual_seed(1)
    if not a.steps_only:
        for model, T, B, I, H in LAYERS:
            lstm = torch.nn.LSTM(I, H).to(dev)
            x = torch.randn(T, B, I, device=dev, requires_grad=True)
            dy = torch.randn(T, B, H, device=dev)
            fwd = time_reps(torch, lambda: lstm(x), a.min_time, a.reps)
            y, _ = lstm(x)
            bwd = time_reps(torch, lambda: y.backward(dy, retain_graph=True), a.min_time, a.reps)
            for pas, (s, each, spread) in (("forward_training", fwd), ("backward", bwd)):
                print(json.dumps(dict(facts, kind="layer", model=model, **{"pass": pas}, batch=B, T=T, I=I, H=H,
                                      seconds=s, rep_seconds=each, spread_pct=spread)), flush=True)
            del lstm, x, dy, y
            torch.cuda.empty_cache()
    if not a.layers_only:
        for model, T, B in STEPS:
            for phase in ("train_step", "inference_step"):
                emb = torch.nn.Embedding(10000, 256).to(dev)
                lstm = torch.nn.LSTM(256, 256, 2).to(dev)
                fc = torch.nn.Linear(256, 10000).to(dev)
                params = list(emb.parameters()) + list(lstm.parameters()) + list(fc.parameters())
                opt = torch.optim.SGD(params, lr=1.0)
                ids = torch.randint(0, 10000, (T, B), device=dev)
                tgt = torch.randint(0, 10000, (T, B), device=dev)
                state = [None]

                def train():
                    opt.zero_grad(set_to_none=True)
                    h, _ = lstm(emb(ids))
                    logits = fc(h.reshape(T * B, 256))
                    loss = torch.nn.functional.cross_entropy(logits, tgt.reshape(T * B), reduction="sum") / B
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(params, 5.0)
                    opt.step()

                def infer():
                    with torch.no_grad():
                        h, state[0] = lstm(emb(ids), state[0])
                        fc(h.reshape(T * B, 256))

                torch.cuda.reset_peak_memory_stats()
                s, each, spread = time_reps(torch, train if phase == "train_step" else infer, a.min_time, a.reps)
                print(json.dumps(dict(facts, kind="step", model=model, phase=phase, batch=B, T=T,
                                      input="resident", seconds=s, rep_seconds=each, spread_pct=spread,
                                      gpu_peak_alloc_MB=torch.cuda.max_memory_allocated() / 1048576.0)),
                      flush=True)
                del emb, lstm, fc, params, opt, state
                torch.cuda.empty_cache()

if __name__ == "__main__":
    main(sys.argv[1:])
