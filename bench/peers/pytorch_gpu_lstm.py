#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's cuDNN LSTM on the GPU beside anvil_bench's gpu_lstm/<variant>/<pass>/<model>:lstm rows
and the LSTM models' GPU steps (model/<m>/train_step/batch:B/device:cuda/input:resident).

    python3 bench/peers/pytorch_gpu_lstm.py [--min-time 0.5] [--layers-only | --steps-only]

FP32 with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32
= False), cudnn.benchmark on. One JSON line per row:
  kind "layer": one nn.LSTM(I, H) layer (PyTorch's layout: two bias vectors) at the shapes of
    bench/gpu_lstm_bench.cpp, pass forward_training (forward with autograd recording) or backward
    (backward alone, retain_graph, from one recorded forward), mean GPU seconds per call;
  kind "step": the DLBench LSTM language model of networks.md (embedding 10000 x 256, nn.LSTM 256
    with 2 layers, Linear 256 -> 10000 every step, CE summed over T and averaged over B,
    clip_grad_norm_(5), SGD lr 1.0) with the batch already on the GPU ("resident"), at T = 32 / 64
    and batch 128, 256, 512; whole training step, mean GPU seconds.
Timing: CUDA events around spans of back-to-back calls, warm-up first, until --min-time seconds of
GPU time (as bench/peers/pytorch_gpu_gemm.py).
"""
import argparse
import json
import sys

LAYERS = [("lstm32", 32, b, 256, 256) for b in (128, 256, 512)] + \
         [("lstm64", 64, b, 256, 256) for b in (128, 256, 512)] + \
         [("ptb_small", 20, 20, 200, 200), ("lstm_imdb", 500, 500, 32, 100)]
STEPS = [("lstm32", 32, b) for b in (128, 256, 512)] + [("lstm64", 64, b) for b in (128, 256, 512)]


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
    g = p.add_mutually_exclusive_group()
    g.add_argument("--layers-only", action="store_true")
    g.add_argument("--steps-only", action="store_true")
    a = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        sys.exit("pytorch_gpu_lstm.py: torch.cuda.is_available() is False")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    facts = {"peer": "pytorch", "device": "cuda", "torch": torch.__version__,
             "cudnn": torch.backends.cudnn.version(), "device_name": torch.cuda.get_device_name(0),
             "tf32": False}
    torch.manual_seed(1)
    if not a.steps_only:
        for model, T, B, I, H in LAYERS:
            lstm = torch.nn.LSTM(I, H).to(dev)
            x = torch.randn(T, B, I, device=dev, requires_grad=True)
            dy = torch.randn(T, B, H, device=dev)
            fwd = time_calls(torch, lambda: lstm(x), a.min_time)
            y, _ = lstm(x)
            bwd = time_calls(torch, lambda: y.backward(dy, retain_graph=True), a.min_time)
            for pas, s in (("forward_training", fwd), ("backward", bwd)):
                print(json.dumps(dict(facts, kind="layer", model=model, **{"pass": pas}, batch=B, T=T, I=I, H=H,
                                      seconds=s)), flush=True)
            del lstm, x, dy, y
            torch.cuda.empty_cache()
    if not a.layers_only:
        for model, T, B in STEPS:
            emb = torch.nn.Embedding(10000, 256).to(dev)
            lstm = torch.nn.LSTM(256, 256, 2).to(dev)
            fc = torch.nn.Linear(256, 10000).to(dev)
            params = list(emb.parameters()) + list(lstm.parameters()) + list(fc.parameters())
            opt = torch.optim.SGD(params, lr=1.0)
            ids = torch.randint(0, 10000, (T, B), device=dev)
            tgt = torch.randint(0, 10000, (T, B), device=dev)

            def step():
                opt.zero_grad(set_to_none=True)
                h, _ = lstm(emb(ids))
                logits = fc(h.reshape(T * B, 256))
                loss = torch.nn.functional.cross_entropy(logits, tgt.reshape(T * B), reduction="sum") / B
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 5.0)
                opt.step()

            torch.cuda.reset_peak_memory_stats()
            s = time_calls(torch, step, a.min_time)
            print(json.dumps(dict(facts, kind="step", model=model, phase="train_step", batch=B, T=T,
                                  input="resident", seconds=s,
                                  gpu_peak_alloc_MB=torch.cuda.max_memory_allocated() / 1048576.0)), flush=True)
            del emb, lstm, fc, params, opt
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
