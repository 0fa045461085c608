#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Prints the tables docs/findings.md derives from the raw files of this folder (the H100 run of
# 2026-11-25): CPU thread scaling on the 16-core Xeon (anvil and PyTorch, speed-ups over 1
# thread), GPU against the best CPU result, anvil's GPU steps over PyTorch's, and the cuBLAS
# transpose penalty with its remedies.
# Reads only the files beside it; `python3 docs/results/h100_2026-11-25/derived_tables.py`.
import json
import pathlib
import re

HERE = pathlib.Path(__file__).resolve().parent


def bench_records(name):
    return json.loads((HERE / name).read_text())["benchmarks"]


def jsonl(name):
    return [json.loads(line) for line in (HERE / name).read_text().splitlines() if line.strip()]


def anvil_cpu_steps():
    """(model, phase, batch, threads) -> median step in s (step_median_s) of the anvil CPU run."""
    out = {}
    for r in bench_records("anvil_cpu_scale_xeon16.json"):
        m = re.match(r"model/(\w+)/(train|inference)_step/batch:(\d+)/threads:(\d+)/", r["name"])
        if m:
            out[(m[1], m[2], int(m[3]), int(m[4]))] = r["step_median_s"]
    return out


def torch_cpu_steps():
    out = {}
    for r in jsonl("torch_cpu_scale_xeon16.jsonl"):
        phase = "train" if r["mode"] == "train" else "inference"
        out[(r["net"], phase, r["batch"], r["threads"])] = r["median_s"]
    return out


def anvil_gpu_steps():
    """(model, phase, batch) -> mean step in s over the CUDA-event spans (no median is recorded)."""
    out = {}
    for r in bench_records("anvil_gpu_models.json"):
        m = re.match(r"model/(\w+)/(train|inference)_step/batch:(\d+)/device:cuda", r["name"])
        if m:
            assert r["time_unit"] == "ms"
            out[(m[1], m[2], int(m[3]))] = r["real_time"] / 1e3
    return out


def torch_gpu_steps(name, h2d=None):
    out = {}
    for r in jsonl(name):
        if h2d is not None and r.get("h2d") != h2d:
            continue
        phase = "train" if r["mode"] == "train" else "inference"
        out[(r["net"], phase, r["batch"])] = r["median_s"]
    return out


def thread_scaling():
    a, t = anvil_cpu_steps(), torch_cpu_steps()
    print("## CPU thread scaling, 16-core Xeon: s/step (median) and speed-up over 1 thread")
    print("| model | phase | engine | 1 | 2 | 4 | 8 | 16 | 16 vs 1 | 16 vs 8 |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for key in sorted({k[:3] for k in a}):
        for engine, steps in (("anvil", a), ("PyTorch", t)):
            s = [steps.get(key + (n,)) for n in (1, 2, 4, 8, 16)]
            if None in s:
                continue
            cells = " | ".join(f"{x:.3f}" for x in s)
            print(f"| {key[0]} b{key[2]} | {key[1]} | {engine} | {cells} | "
                  f"{s[0] / s[4]:.1f}x | {s[3] / s[4]:.2f}x |")


def gpu_vs_cpu():
    a, t = anvil_cpu_steps(), torch_cpu_steps()
    best_cpu = {}
    for steps, engine in ((a, "anvil"), (t, "PyTorch")):
        for (model, phase, batch, threads), s in steps.items():
            k = (model, phase, batch)
            if k not in best_cpu or s < best_cpu[k][0]:
                best_cpu[k] = (s, f"{engine} {threads} thr")
    gpu = {"anvil (pageable copy)": anvil_gpu_steps(),
           "PyTorch pageable": torch_gpu_steps("torch_gpu_h2d.jsonl", "pageable"),
           "PyTorch resident": torch_gpu_steps("torch_gpu_fp32.jsonl")}
    print("\n## GPU (H100, FP32) against the best CPU result (16-core Xeon), same model and batch")
    print("| model | phase | batch | best CPU s/step | GPU | GPU s/step | CPU / GPU |")
    print("|---|---|---:|---:|---|---:|---:|")
    for k in sorted(best_cpu):
        for name, steps in gpu.items():
            if k in steps:
                cpu_s, who = best_cpu[k]
                print(f"| {k[0]} | {k[1]} | {k[2]} | {cpu_s:.4f} ({who}) | {name} | "
                      f"{steps[k] * 1e3:.2f} ms | {cpu_s / steps[k]:.1f}x |")
    # Throughput: the CPU ran FCN-5 at batch 64 only; the GPU's largest batch is its best rate.
    cpu_s, who = best_cpu[("fcn5", "train", 64)]
    print("\nFCN-5 training throughput, samples/s: best CPU (batch 64, "
          f"{who}) {64 / cpu_s:.0f}")
    for name, steps in gpu.items():
        s = steps[("fcn5", "train", 1024)]
        print(f"  {name}, batch 1024: {1024 / s:.0f} ({1024 / s / (64 / cpu_s):.1f}x the CPU)")


def gpu_vs_pytorch():
    a = anvil_gpu_steps()
    peers = [("pageable", torch_gpu_steps("torch_gpu_h2d.jsonl", "pageable")),
             ("pinned", torch_gpu_steps("torch_gpu_h2d.jsonl", "pinned")),
             ("resident", torch_gpu_steps("torch_gpu_fp32.jsonl"))]
    print("\n## anvil's GPU step over PyTorch's (H100, FP32; < 1: anvil faster). anvil copies the"
          " batch from pageable memory; PyTorch: pageable (the same step), pinned, resident")
    print("| model | phase | batch | anvil ms | / pageable | / pinned | / resident |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for k in sorted(a):
        print(f"| {k[0]} | {k[1]} | {k[2]} | {a[k] * 1e3:.2f} | " +
              " | ".join(f"{a[k] / p[k]:.2f}" for _, p in peers) + " |")


def transpose_penalty():
    times, shapes = {}, []
    for r in bench_records("anvil_gpu_gemm.json"):
        if r.get("run_type") == "iteration" and "/device:cuda" in r["name"]:
            name = r["name"].split("/device:")[0]
            times[name] = r["real_time"]
            shape = name.split("/")[-1]
            if shape not in shapes:
                shapes.append(shape)
    print("\n## cuBLAS transpose penalty and remedies on the H100 (ms per GEMM; ratios: mode over"
          " NN, remedy over the direct mode, folded SGD over GEMM-then-update)")
    print("| shape | variant | NN | NT | TN | TT | NT/NN | TN/NN | TT/NN | T->NN vs NT | vs TN |"
          " vs TT | fold/grad |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def ratio(a, b):
        return f"{times[a] / times[b]:.2f}" if a in times and b in times else "-"

    for shape in shapes:
        for v in ("cuda.cublas", "cuda.cublas.tf32", "cuda.custom.gemm_tiled"):
            g = {m: f"gemm/{v}/{m}/{shape}" for m in ("NN", "NT", "TN", "TT")}
            if not all(x in times for x in g.values()):
                continue
            cells = [f"{times[g[m]]:.3f}" for m in ("NN", "NT", "TN", "TT")]
            cells += [ratio(g[m], g["NN"]) for m in ("NT", "TN", "TT")]
            cells += [ratio(f"gemm_remedy/{v}/transpose_then_NN/{m}/{shape}", g[m])
                      for m in ("NT", "TN", "TT")]
            cells.append(ratio(f"gemm_remedy/{v}/fold_sgd/{shape}",
                               f"gemm_remedy/{v}/grad_then_update/{shape}"))
            print(f"| {shape} | {v} | " + " | ".join(cells) + " |")
    shape = "dlbench_1024x2048x26752"
    print("(PyTorch torch.mm on the same GPU, DLBench shape, ms: " + ", ".join(
        f"{r['precision']} {r['mode']} {r['seconds'] * 1e3:.3f}"
        for r in jsonl("peer_pytorch_cuda_gemm.jsonl")
        if r["shape"] == shape) + ")")


if __name__ == "__main__":
    thread_scaling()
    gpu_vs_cpu()
    gpu_vs_pytorch()
    transpose_penalty()
