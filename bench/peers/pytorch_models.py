#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch peer of anvil_bench's model step benchmarks (networks.md, "How a step is timed").

Times the DLBench step -- zero_grad(set_to_none=True) + forward + F.cross_entropy + backward +
plain SGD (lr 0.01) -- and the inference step (forward under torch.inference_mode()) for the
fully connected networks of networks.md, with PyTorch configured at its best on this machine,
and prints one JSON object per (model, phase, threads, batch) on stdout.

The CNN and LSTM networks of networks.md (NETS: alexnet, vgg16, resnet50, cnn_mnist, cnn_cifar,
lstm32, lstm64, ptb_small) are written out in pytorch_nets.py (torchvision is not used) with their
parameter counts asserted against networks.md, and timed the same way (NetStep): CNNs on N(0,1) images with
SGD (momentum 0.9 for resnet50/vgg16, none for the others); the LSTM language models on a
synthetic stream of uniform random ids, hidden state carried across mini-batches and detached,
loss = CE summed over T averaged over B, clip_grad_norm_(5), SGD lr 1.0; their inference step runs
under torch.no_grad() in eval mode. `check` builds each of them and runs one step at a small batch.

The configuration matters more than usual on this machine (an AMD EPYC with AVX-512; the VM
measured reports Zen 4, TOOLCHAIN.md says Zen 5): PyTorch's PyPI wheel takes its fp32 GEMMs
from a statically linked MKL 2024.2, which picks its generic code path on AMD CPUs
(mkl_serv_cpu_detect() == 0; 65-88 % of the core's FMA peak instead of 93-95 %) unless its
`mkl_serv_intel_cpu_true` is interposed; its CPU tensors come straight from malloc, so glibc
mmap()s and munmap()s every large tensor (page faults on each step, ~40 % on the FCN-5 step)
unless an allocator that keeps large blocks is used. Both only take effect through the
environment a process *starts* with (LD_PRELOAD, OMP_*, MKL_*, MALLOC_*), so this script is a
launcher: every measurement runs in a fresh child process whose environment is built from a
configuration, which is also what keeps peak RSS per configuration.

Subcommands (the default is `run`):
  run    time models:  pytorch_models.py run --models fcn5 --threads 1,2 --reps 3 [--breakdown]
         [--profile STEPS] [--config preset|FILE] [--precision fp32|bf16]
         --precision bf16 runs each step's forward and loss under
         torch.autocast("cpu", dtype=torch.bfloat16) (backward and optimizer outside it, as
         PyTorch's AMP recipe does), beside anvil_bench --anvil_precision=bf16; fp32 by default.
  tune   measure the candidate settings and write the fastest configuration as JSON:
           pytorch_models.py tune --out pytorch_config.json
         (MKL code path by torch.mm GFLOP/s at 1 thread; allocator by the FCN-5 training step at
          1 thread; SGD implementation by opt.step() alone; OpenMP wait policy by the step at 2
          threads; inference route, eager vs torch.utils.mkldnn, by each model's inference step)
  probe-gemm          torch.mm GFLOP/s on the FCN-5 shapes under one configuration [--onednn]
  probe-layer-gemms   each GEMM of an FCN training step as PyTorch issues it
  check  build the CNN/LSTM networks, assert their parameter counts and MACs, one step each:
           pytorch_models.py check [--models alexnet,lstm32] [--batch 2]
A configuration is either a JSON file written by `tune` or `preset` (the choice measured when
this script was written, see PRESET in pytorch_setup.py).

The parts: pytorch_nets.py (the networks), pytorch_setup.py (configurations and child
processes), pytorch_timing.py (what a child times); this file is the command line.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# The peer's parts (this file is the command line; see each module's docstring). They sit beside
# this file, which other scripts and the tests also load by path (tensorflow_models.py,
# compare_report.py, tests/report/test_peer_config.py), so its folder goes on the path first.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Also re-exported: what other scripts and the tests read from this module.
from pytorch_nets import (  # noqa: E402
    GPU_BATCHES, MODELS, NETS, NetStep, SGD_LR, VGG16_CFG, build_model, build_net,
    model_params_and_flops,
)
from pytorch_setup import (  # noqa: E402
    ALLOCATOR_CANDIDATES, INFERENCE_CANDIDATES, JEMALLOC, MKL_CANDIDATES, PRESET, SGD_CANDIDATES,
    TCMALLOC, WAIT_CANDIDATES, child_env, effective_config, ensure_allocators, find_library,
    fma_peak_gflops, fork_per_phase, load_config, log, pct_of_peak, peak_rss_mb, peer_provenance,
    resolve_peak, rss_now_mb, run_child, shim_buildable,
)
from pytorch_timing import (  # noqa: E402
    child_main, probe_gemm_main, probe_layer_gemms_main, probe_sgd_main, time_loop,
)


def run_main(a) -> None:
    cfg = load_config(a.config)
    ensure_allocators()
    cfg = effective_config(cfg)
    cuda = a.device == "cuda"
    if cuda and a.precision != "fp32":
        sys.exit(f"--precision {a.precision}: the GPU rows run fp32 only (pytorch_gpu_models.py)")
    if cuda:
        cfg = dict(cfg, device="cuda")
    peak, peak_source = resolve_peak(a.peak)
    for model in a.models.split(","):
        if model not in MODELS and model not in NETS:
            sys.exit(f"unknown model '{model}'; known: {', '.join([*MODELS, *NETS])}")
        if cuda and model not in MODELS:
            sys.exit(f"--device cuda times the FCN/MLP models only ({', '.join(MODELS)}), not '{model}'")
        # On the GPU the host threads hardly matter: the first --threads value only.
        threads = [int(v) for v in a.threads.split(",")]
        # On the CPU one child per (model, threads) times every phase, each in a process forked
        # after the imports (fork_per_phase); on the GPU one child per phase.
        phase_groups = a.phases.split(",") if cuda else [a.phases]
        for t in threads[:1] if cuda else threads:
            for phase in phase_groups:
                for batch in ([a.batch] if a.batch or not cuda else GPU_BATCHES[model]):
                    args = ["child", "--model", model, "--phase", phase, "--threads", str(t),
                            "--reps", str(a.reps), "--warmup", str(a.warmup), "--min-time", str(a.min_time),
                            "--min-steps", str(a.min_steps), "--peak", str(peak), "--peak-source", peak_source]
                    if batch:
                        args += ["--batch", str(batch)]
                    if cuda:
                        args += ["--device", "cuda"]
                    if a.precision != "fp32":
                        args += ["--precision", a.precision]
                    if a.breakdown and model in MODELS:  # the FCN step only
                        args.append("--breakdown")
                    if a.profile:
                        args += ["--profile", str(a.profile)]
                    for obj in run_child(cfg, t, args):
                        print(json.dumps(obj), flush=True)


def med(v):
    return statistics.median(v) if v else float("nan")


def pick(scores: dict, lower_is_better: bool, margin: float = 0.02) -> str:
    """The first candidate (candidates are listed simplest first) within `margin` of the best:
    on this noisy host a difference under 2 % is not evidence for a more exotic setting."""
    best = min(scores.values()) if lower_is_better else max(scores.values())
    for c, v in scores.items():
        if (v <= best * (1 + margin)) if lower_is_better else (v >= best * (1 - margin)):
            return c
    return next(iter(scores))


def tune_main(a) -> None:
    """Measures every candidate, interleaving them round by round so that the host's noise falls
    on all of them alike, and keeps the fastest of each kind."""
    libs = ensure_allocators()
    report = {"rounds": a.rounds, "machine": platform_facts(), "gemm": {}, "allocator": {}, "sgd": {},
              "omp_wait_policy": {}, "libraries": libs}
    chosen = dict(PRESET, source="tune")

    # 1. MKL code path: torch.mm GFLOP/s at 1 thread (allocator/wait policy do not matter here).
    log("[tune] MKL code path: torch.mm GFLOP/s at 1 thread")
    shim_ok, why = shim_buildable()
    mkl_c = [c for c, v in MKL_CANDIDATES.items() if shim_ok or not v.get("shim")]
    if not shim_ok:
        log(f"[tune] the MKL shim cannot be built ({why}): its candidates are left out")
        report["fallbacks"] = [f"mkl: shim candidates left out ({why})"]
    runs = {c: [] for c in mkl_c}
    cpu = {}
    onednn = {64: [], 1024: []}
    peaks = {c: [] for c in mkl_c}
    for r in range(a.rounds):
        for c in mkl_c:
            peaks[c].append(fma_peak_gflops())
            # oneDNN does not go through MKL: its routes are timed once per round, with "default".
            extra = ["--onednn"] if c == "default" else []
            res = run_child({"mkl": c, "allocator": "glibc", "omp_wait_policy": "PASSIVE"}, 1,
                            ["probe-gemm", "--threads", "1", "--min-time", "1.0", *extra])[0]
            runs[c].append({s["m"]: s["gflops_best"] for s in res["shapes"]})
            cpu[c] = res["mkl_cpu"]
            for s in res["shapes"]:
                if "onednn" in s:
                    onednn[s["m"]].append(s["onednn"])
            log(f"  round {r} {c:20s} FMA peak now {peaks[c][-1] or float('nan'):6.1f}  "
                + "  ".join(f"M={m}: {g:6.1f}" for m, g in runs[c][-1].items())
                + (f"  oneDNN: {[s.get('onednn') for s in res['shapes']]}" if extra else ""))
    report["onednn"] = {f"M{m}": {k: med([x[k] for x in v if k in x]) for k in v[0]} for m, v in onednn.items() if v}
    for c, rs in runs.items():
        pk = [p for p in peaks[c] if p]
        report["gemm"][c] = {"mkl_cpu": cpu[c], "fma_peak_gflops_median": med(pk)} | {
            f"M{m}_fraction_of_fma_peak_median": med([x[m] / p for x, p in zip(rs, peaks[c]) if p]) for m in (64, 1024)} | {
            f"M{m}_gflops_best_of_rounds": max(x[m] for x in rs) for m in (64, 1024)} | {
            f"M{m}_gflops_median_of_rounds": med([x[m] for x in rs]) for m in (64, 1024)}
    # Rank by the median over rounds of the slower of the two shapes' GFLOP/s (both matter).
    chosen["mkl"] = pick({c: med([min(x.values()) for x in runs[c]]) for c in runs}, lower_is_better=False)
    log(f"[tune] MKL: {chosen['mkl']}")

    def step_time(cfg, threads, model="fcn5", phase="train"):
        obj = run_child(cfg, threads, ["child", "--model", model, "--phase", phase, "--threads",
                                       str(threads), "--reps", "1", "--warmup", "2",
                                       "--min-time", str(a.step_time), "--min-steps", "4"])[0]
        return obj["median_s"], obj["peak_rss_MB"]

    # 2. Allocator, by the FCN-5 training step at 1 thread.
    log("[tune] allocator: fcn5 train step, 1 thread")
    alloc_c = [c for c, v in ALLOCATOR_CANDIDATES.items() if not v.get("preload") or libs.get(v["preload"])]
    res = {c: [] for c in alloc_c}
    rss = {c: [] for c in alloc_c}
    for r in range(a.rounds):
        for c in alloc_c:
            s, m = step_time(dict(chosen, allocator=c), 1)
            res[c].append(s)
            rss[c].append(m)
            log(f"  round {r} {c:20s} {s:.4f} s/step  peak RSS {m:.0f} MB")
    report["allocator"] = {c: {"median_s": med(v), "runs_s": v, "peak_rss_MB": med(rss[c]), "runs_peak_rss_MB": rss[c]}
                           for c, v in res.items()}
    # Among the candidates tied on time (within 2 % of the fastest), the smallest peak RSS wins:
    # glibc without mmap ties on time but fragments (its peak RSS varied by 400 MB between runs).
    fastest = min(med(v) for v in res.values())
    tied = [c for c in alloc_c if med(res[c]) <= fastest * 1.02]
    chosen["allocator"] = min(tied, key=lambda c: med(rss[c]))
    log(f"[tune] allocator: {chosen['allocator']}")

    # 3. SGD implementation (for-loop / foreach / fused), by the FCN-5 training step at 1 thread.
    log("[tune] SGD implementation: fcn5 opt.step() alone, 1 thread, alternating in one process")
    res = {c: [] for c in SGD_CANDIDATES}
    for r in range(a.rounds):
        obj = run_child(chosen, 1, ["probe-sgd", "--model", "fcn5", "--threads", "1", "--iters", "15"])[0]
        for c in SGD_CANDIDATES:
            res[c].append(obj["median_s"][c])
        log(f"  round {r} " + "  ".join(f"{c}: {v:.4f} s" for c, v in obj["median_s"].items()))
    report["sgd"] = {c: {"median_s": med(v), "runs_s": v, "what": "opt.step() only"} for c, v in res.items()}
    chosen["sgd"] = pick({c: med(v) for c, v in res.items()}, lower_is_better=True)
    log(f"[tune] SGD: {chosen['sgd']}")

    # 4. OpenMP wait policy, by the FCN-5 training step at 2 threads (at 1 thread nobody waits).
    threads = min(2, os.cpu_count() or 1)
    log(f"[tune] OMP_WAIT_POLICY: fcn5 train step, {threads} threads")
    res = {c: [] for c in WAIT_CANDIDATES}
    for r in range(a.rounds):
        for c in WAIT_CANDIDATES:
            s, _ = step_time(dict(chosen, omp_wait_policy=c), threads)
            res[c].append(s)
            log(f"  round {r} {c:20s} {s:.4f} s/step")
    report["omp_wait_policy"] = {c: {"median_s": med(v), "runs_s": v, "threads": threads} for c, v in res.items()}
    # PASSIVE is listed first (the project's default: on a shared host spinning threads steal
    # other processes' cycles), so ACTIVE must win by more than the noise to be chosen.
    chosen["omp_wait_policy"] = pick({c: med(v) for c, v in res.items()}, lower_is_better=True)
    log(f"[tune] OMP_WAIT_POLICY: {chosen['omp_wait_policy']}")

    # 5. Inference route (eager MKL vs torch.utils.mkldnn), by the FCN-5 inference step at 1 and
    # 2 threads (the sum of the two medians decides).
    log("[tune] inference route: fcn5 inference step")
    res = {c: {1: [], threads: []} for c in INFERENCE_CANDIDATES}
    for r in range(a.rounds):
        for t in sorted({1, threads}):
            for c in INFERENCE_CANDIDATES:
                s, _ = step_time(dict(chosen, inference=c), t, phase="inference")
                res[c][t].append(s)
                log(f"  round {r} {c:20s} threads {t} {s:.4f} s/step")
    report["inference"] = {c: {f"threads_{t}_median_s": med(v) for t, v in d.items()} for c, d in res.items()}
    chosen["inference"] = pick({c: sum(med(v) for v in d.values()) for c, d in res.items()}, lower_is_better=True)
    log(f"[tune] inference: {chosen['inference']}")
    # The route's benefit depends on the shapes (weight reorders, conversions), so the smaller
    # models get their own choice, at 1 thread.
    by_model = {"fcn5": chosen["inference"]}
    report["inference_by_model"] = {}
    for model in (m for m in MODELS if m != "fcn5"):
        res = {c: [] for c in INFERENCE_CANDIDATES}
        for r in range(a.rounds):
            for c in INFERENCE_CANDIDATES:
                s, _ = step_time(dict(chosen, inference=c), 1, model=model, phase="inference")
                res[c].append(s)
        report["inference_by_model"][model] = {c: {"threads_1_median_s": med(v)} for c, v in res.items()}
        by_model[model] = pick({c: med(v) for c, v in res.items()}, lower_is_better=True)
        log(f"  {model:10s} " + "  ".join(f"{c}: {med(v):.5f} s" for c, v in res.items()) + f" -> {by_model[model]}")
    chosen["inference_by_model"] = by_model

    import torch  # the children measured; this process names the version they ran
    out = {"chosen": chosen, "measurements": report, "provenance": peer_provenance(torch)}
    text = json.dumps(out, indent=2)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)


def check_main(a) -> None:
    """Builds every CNN/LSTM network (asserting its parameter count against networks.md), counts
    its forward MACs per sample and runs one training and one inference step at a small batch:
    a smoke test of the definitions, in this process, without the tuned configuration."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    names = a.models.split(",") if a.models else list(NETS)
    for name in names:
        spec = NETS[name]
        t0 = time.perf_counter()
        row = {"model": name}
        for phase in ("train", "inference"):
            ns = NetStep(torch, F, name, a.batch, phase == "train", "for_loop")
            ns.step()
            ns.step()
            row["params"] = sum(p.numel() for p in ns.net.parameters())
        row["params_networks_md"] = spec["params"]
        row["macs_per_sample"] = ns.macs_per_sample()
        if spec.get("macs"):
            rel = row["macs_per_sample"] / spec["macs"]
            assert 0.98 < rel < 1.02, f"{name}: {row['macs_per_sample']:.4g} MACs, networks.md says {spec['macs']:.4g}"
        row["seconds"] = round(time.perf_counter() - t0, 2)
        row["provenance"] = peer_provenance(torch)
        print(json.dumps(row), flush=True)


def platform_facts() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model, "cpus": os.cpu_count(), "loadavg": os.getloadavg()}


def phase_list(v: str) -> str:
    """argparse type of the children's --phase: train, inference or a comma list of both."""
    if not v or any(ph not in ("train", "inference") for ph in v.split(",")):
        raise argparse.ArgumentTypeError(f"train, inference or train,inference, not '{v}'")
    return v


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd")

    def common(q, launcher: bool):
        q.add_argument("--reps", type=int, default=3, help="timed repetitions (each >= --min-time)")
        q.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps")
        q.add_argument("--min-time", type=float, default=2.0, help="seconds per repetition (anvil_bench: 2.0)")
        q.add_argument("--min-steps", type=int, default=5, help="steps per repetition at least")
        q.add_argument("--batch", type=int, default=0, help="mini-batch (default: the model's CPU batch)")
        q.add_argument("--peak", type=float, default=None,
                       help="per-core FP32 FMA peak in GFLOP/s for pct_peak (compare_pytorch.sh and bench.sh pass "
                            "the one anvil_bench measured); default: measured here with a 512-bit FMA loop, "
                            "no pct_peak where that cannot run")
        q.add_argument("--peak-source", default="given with --peak", help=argparse.SUPPRESS)
        q.add_argument("--breakdown", action="store_true", help="also time zero_grad/forward/backward/step separately")
        q.add_argument("--profile", type=int, default=0, metavar="STEPS", help="also profile STEPS steps per op")
        q.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                       help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16) "
                            "(anvil_bench --anvil_precision=bf16); CPU only")
        q.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                       help="cuda: the FCN/MLP step on the GPU (FP32, TF32 off), at networks.md's GPU "
                            "batch sweep unless --batch is given")

    r = sub.add_parser("run", help="time models (one process per model and threads; a forked one per phase)")
    r.add_argument("--models", default="fcn5")
    r.add_argument("--threads", default="1,2")
    r.add_argument("--phases", default="train,inference")
    r.add_argument("--config", default="preset", help="'preset' or a JSON file written by `tune`")
    common(r, True)

    c = sub.add_parser("child", help=argparse.SUPPRESS)
    c.add_argument("--model", required=True)
    c.add_argument("--phase", type=phase_list, required=True, help="train, inference or train,inference")
    c.add_argument("--threads", type=int, required=True)
    c.add_argument("--cfg-json", required=True)
    common(c, False)

    g = sub.add_parser("probe-gemm", help="torch.mm GFLOP/s on the FCN-5 shapes under one configuration")
    g.add_argument("--threads", type=int, default=1)
    g.add_argument("--min-time", type=float, default=1.0)
    g.add_argument("--onednn", action="store_true", help="also time PyTorch's oneDNN routes")
    g.add_argument("--cfg-json", default=None)
    g.add_argument("--config", default="preset")

    q = sub.add_parser("probe-sgd", help=argparse.SUPPRESS)
    q.add_argument("--model", default="fcn5")
    q.add_argument("--threads", type=int, default=1)
    q.add_argument("--iters", type=int, default=15)
    q.add_argument("--cfg-json", required=True)

    lg = sub.add_parser("probe-layer-gemms", help="each GEMM of an FCN training step as PyTorch issues it")
    lg.add_argument("--model", default="fcn5")
    lg.add_argument("--threads", type=int, default=1)
    lg.add_argument("--iters", type=int, default=7)
    lg.add_argument("--cfg-json", default=None)
    lg.add_argument("--config", default="preset")

    t = sub.add_parser("tune", help="measure the candidate settings; write the fastest configuration")
    t.add_argument("--rounds", type=int, default=3)
    t.add_argument("--step-time", type=float, default=1.5, help="seconds of timed steps per candidate run")
    t.add_argument("--out", default="")

    ck = sub.add_parser("check", help="build the CNN/LSTM networks, assert parameter counts, one step each")
    ck.add_argument("--models", default="", help=f"default: all of {','.join(NETS)}")
    ck.add_argument("--batch", type=int, default=2)
    ck.add_argument("--threads", type=int, default=1)

    argv = sys.argv[1:]
    if not argv or argv[0] not in ("run", "child", "probe-gemm", "probe-sgd", "probe-layer-gemms", "tune", "check",
                                   "-h", "--help"):
        argv = ["run", *argv]
    a = p.parse_args(argv)
    if a.cmd == "child":
        child_main(a)
    elif a.cmd == "probe-gemm":
        if a.cfg_json is None:  # called by hand: launch itself under the configuration
            for obj in run_child(effective_config(load_config(a.config)), a.threads,
                                 ["probe-gemm", "--threads", str(a.threads), "--min-time", str(a.min_time)]
                                 + (["--onednn"] if a.onednn else [])):
                print(json.dumps(obj))
        else:
            probe_gemm_main(a)
    elif a.cmd == "probe-sgd":
        probe_sgd_main(a)
    elif a.cmd == "probe-layer-gemms":
        if a.cfg_json is None:  # called by hand: launch itself under the configuration
            for obj in run_child(effective_config(load_config(a.config)), a.threads, ["probe-layer-gemms", "--model", a.model,
                                 "--threads", str(a.threads), "--iters", str(a.iters)]):
                print(json.dumps(obj))
        else:
            probe_layer_gemms_main(a)
    elif a.cmd == "tune":
        tune_main(a)
    elif a.cmd == "check":
        check_main(a)
    else:
        run_main(a)


if __name__ == "__main__":
    main()
