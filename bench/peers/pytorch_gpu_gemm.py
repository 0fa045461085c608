#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch.mm on the GPU beside anvil_bench's gemm/<variant>/<mode>/<shape>/device:cuda rows.

    python3 bench/peers/pytorch_gpu_gemm.py [--shapes dlbench_1024x2048x26752,...] [--min-time 0.5]

For each shape (NAME_MxNxK, C[M,N] = op(A) op(B), K the inner size) and transpose mode NN, NT,
TN, TT, in FP32 (TF32 off: torch.backends.cuda.matmul.allow_tf32 = False and matmul precision
"highest") and in TF32 (allow_tf32 = True), prints one JSON line with the mean GPU seconds of
one product and its FLOP/s (2 M N K per product).

A transposed operand is stored transposed and passed as a .t() view, so PyTorch hands cuBLAS a
transpose flag instead of copying: the same problem anvil's cuda.cublas variant solves.
Timing follows anvil_bench's GPU loop (bench/gpu_gemm_bench.h): CUDA events around spans of
`reps` back-to-back products, reps chosen so that a span holds at least 1 ms of GPU work,
warm-up first, spans repeated until `--min-time` seconds of GPU time; the result is the total
GPU time over the number of products. Output into C (`out=`), as anvil writes its C in place.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import provenance as P  # noqa: E402  (scripts/provenance.py: Note [Provenance])


def parse_shape(text):
    m = re.fullmatch(r"([A-Za-z0-9_]*?)_?(\d+)x(\d+)x(\d+)", text)
    if not m:
        raise SystemExit(f"pytorch_gpu_gemm.py: shape '{text}' is not NAME_MxNxK")
    return text, int(m[2]), int(m[3]), int(m[4])


def time_products(torch, run, min_time):
    """Mean GPU seconds of one run(): CUDA events around spans of back-to-back calls."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def span(reps):
        start.record()
        for _ in range(reps):
            run()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3

    for _ in range(3):  # warm-up: cuBLAS heuristics, kernel loading, clocks
        run()
    torch.cuda.synchronize()
    one = span(1)
    reps = int(min(1000, max(1, -(-1e-3 // max(one, 1e-7)))))
    span(reps)  # warm-up at the timed size
    total, calls = 0.0, 0
    while total < min_time:
        total += span(reps)
        calls += reps
    return total / calls, reps


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default="dlbench_1024x2048x26752")
    p.add_argument("--min-time", type=float, default=0.5, help="GPU seconds per row (default 0.5)")
    a = p.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("pytorch_gpu_gemm.py: torch.cuda.is_available() is False")
    dev = torch.device("cuda:0")
    facts = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
             "device_name": torch.cuda.get_device_name(0),
             "provenance": P.provenance(P.torch_libraries(torch), torch=torch)}
    gen = torch.Generator(device=dev).manual_seed(1)
    for shape in a.shapes.split(","):
        name, m, n, k = parse_shape(shape)
        for mode in ("NN", "NT", "TN", "TT"):
            ta, tb = mode[0] == "T", mode[1] == "T"
            # Stored as anvil stores them: A is [M, K] or, transposed, [K, M]; B is [K, N] or [N, K].
            a_store = torch.randn((k, m) if ta else (m, k), device=dev, generator=gen)
            b_store = torch.randn((n, k) if tb else (k, n), device=dev, generator=gen)
            A = a_store.t() if ta else a_store
            B = b_store.t() if tb else b_store
            C = torch.empty((m, n), device=dev)
            for precision in ("fp32", "tf32"):
                torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
                torch.set_float32_matmul_precision("highest" if precision == "fp32" else "high")
                seconds, reps = time_products(torch, lambda: torch.mm(A, B, out=C), a.min_time)
                print(json.dumps({"family": "gemm", "peer": "pytorch", "device": "cuda", "shape": name,
                                  "m": m, "n": n, "k": k, "mode": mode, "precision": precision,
                                  "seconds": seconds, "FLOP/s": 2.0 * m * n * k / seconds,
                                  "reps_per_span": reps, **facts}), flush=True)
            del a_store, b_store, A, B, C
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main(sys.argv[1:])
