# SPDX-License-Identifier: Apache-2.0
"""Inside a child process of the PyTorch peer (pytorch_models.py `child` and `probe-*`): the
timing loop, one model's train or inference step on the CPU or the GPU, the step's phase
breakdown and operator profile, and the probes (SGD implementations, the FCN-5 GEMMs as PyTorch
issues them, torch.mm against oneDNN).
"""
from __future__ import annotations

import json
import statistics
import sys
import time

from pytorch_nets import (
    MODELS, NETS, NetStep, SGD_LR, autocast_of, build_model, make_sgd, model_params_and_flops,
)
from pytorch_setup import (
    SGD_CANDIDATES, fork_per_phase, loaded_allocator, mkl_cpu_type, pct_of_peak, peak_rss_mb,
    peer_provenance, rss_now_mb, setup_torch, torch_facts,
)


def time_loop(step, warmup: int, reps: int, min_time: float, min_steps: int):
    """Runs `step` warmup times untimed, then `reps` repetitions of at least `min_steps` steps
    and `min_time` seconds each (Google Benchmark's MinTime(2.0) in anvil_bench). Returns the
    per-step seconds of every repetition."""
    for _ in range(warmup):
        step()
    per_rep = []
    for _ in range(reps):
        times, start = [], time.perf_counter()
        while len(times) < min_steps or time.perf_counter() - start < min_time:
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        per_rep.append(times)
    return per_rep


def step_record(a, per_rep, flops, rss_start, rss_import) -> dict:
    """The timing fields every CPU step record shares: the steps of each repetition, their
    statistics, % of peak, memory and the run's precision. median_s / mean_s are over all timed
    steps; median_of_rep_means_s is the statistic anvil_bench reports (Google Benchmark: mean
    time per iteration of each repetition, median over them)."""
    flat = [t for r in per_rep for t in r]
    rep_means = [statistics.fmean(r) for r in per_rep]
    return {
        "warmup_steps": a.warmup, "reps": a.reps, "steps": len(flat), "steps_per_rep": [len(r) for r in per_rep],
        "median_s": statistics.median(flat), "mean_s": statistics.fmean(flat), "min_s": min(flat),
        "rep_means_s": rep_means, "median_of_rep_means_s": statistics.median(rep_means),
        "pct_peak": pct_of_peak(flops, statistics.median(flat), a),
        "peak_gflops_per_core": a.peak or None, "peak_source": a.peak_source,
        "peak_rss_MB": peak_rss_mb(), "process": a.process, "rss_at_start_MB": rss_start, "rss_after_import_MB": rss_import,
        "precision": a.precision,
    }


def net_child_main(a, cfg: dict, rss_start: float) -> None:
    """child_main for the CNN and LSTM networks (NETS): same timing loop and JSON fields."""
    torch = setup_torch(a.threads, cfg)
    import torch.nn.functional as F
    rss_import = rss_now_mb()
    spec = NETS[a.model]
    batch = a.batch or spec["batch"]
    train = a.phase == "train"
    amp, autocast = autocast_of(torch, a.precision)
    ns = NetStep(torch, F, a.model, batch, train, cfg.get("sgd", "for_loop"), amp)
    macs = ns.macs_per_sample()
    per_rep = time_loop(ns.step, a.warmup, a.reps, a.min_time, a.min_steps)
    # Training counted as 3x the forward FLOPs (the nominal count anvil_bench uses).
    flops = 2.0 * macs * batch * (3.0 if train else 1.0)
    out = {
        "peer": "pytorch", "model": a.model, "phase": "train_step" if train else "inference_step",
        "threads": a.threads, "batch": batch, "params": sum(p.numel() for p in ns.net.parameters()),
        "params_networks_md": spec["params"], "macs_per_sample": macs,
        "optimizer": {"sgd_lr": spec["lr"], "momentum": spec["momentum"], "clip_grad_norm": spec.get("clip")}
        if train else None,
        **step_record(a, per_rep, flops, rss_start, rss_import),
        "config": dict(torch_facts(torch, dict(cfg, inference="eager", inference_by_model=None)),
                       autocast=autocast),
    }
    if spec["kind"] == "lstm":
        out["seq_len"] = spec["steps"]
    if a.profile:
        out["profile_top_ops"] = profile_ops(torch, ns.step, a.profile)
    out["provenance"] = peer_provenance(torch)
    print(json.dumps(out), flush=True)


def child_main(a) -> None:
    """One model at one thread count; --phase train,inference times both (fork_per_phase)."""
    fork_per_phase(a, phase_main, lambda: setup_torch(a.threads, json.loads(a.cfg_json)))


def phase_main(a) -> None:
    cfg = json.loads(a.cfg_json)
    rss_start = rss_now_mb()
    if a.model in NETS:
        net_child_main(a, cfg, rss_start)
        return
    torch = setup_torch(a.threads, cfg)
    import torch.nn.functional as F
    rss_import = rss_now_mb()
    fin, _, classes, _, _, default_batch = MODELS[a.model]
    batch = a.batch or default_batch
    net = build_model(torch, a.model)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, fin, generator=g)                   # synthetic N(0,1) features
    y = torch.randint(0, classes, (batch,), generator=g)       # uniform labels
    train = a.phase == "train"
    net.train(train)
    cuda = getattr(a, "device", "cpu") == "cuda"
    if cuda:
        return cuda_child_main(a, cfg, torch, F, net, x, y, batch, train, rss_start, rss_import)
    opt = make_sgd(torch, net.parameters(), SGD_LR[a.model], cfg.get("sgd", "for_loop")) if train else None
    amp, autocast = autocast_of(torch, a.precision)

    def train_step():
        opt.zero_grad(set_to_none=True)
        with amp():
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    def inference_step():
        with torch.inference_mode(), amp():
            net(x)

    # Parameters and FLOPs are counted on the dense model: to_mkldnn below replaces each
    # nn.Linear by a MkldnnLinear whose weights are buffers, so counting after it gave 0 for both.
    params, fwd_flops = model_params_and_flops(torch, net, batch)
    route = (cfg.get("inference_by_model") or {}).get(a.model, cfg.get("inference", "eager"))
    if not train and route == "mkldnn" and a.precision == "fp32":
        # oneDNN's fp32 inner product instead of MKL's sgemm (same precision): the model's
        # weights are converted once, as a deployment would; the input conversion and the
        # conversion of the output back to a dense tensor are part of every step.
        from torch.utils import mkldnn as mkldnn_utils
        net = mkldnn_utils.to_mkldnn(net.eval())

        def inference_step():
            with torch.inference_mode():
                net(x.to_mkldnn()).to_dense()

    step = train_step if train else inference_step
    per_rep = time_loop(step, a.warmup, a.reps, a.min_time, a.min_steps)
    flops = 3.0 * fwd_flops if train else fwd_flops
    out = {
        "peer": "pytorch", "model": a.model, "phase": "train_step" if train else "inference_step",
        "threads": a.threads, "batch": batch, "params": params,
        **step_record(a, per_rep, flops, rss_start, rss_import),
        "config": dict(torch_facts(torch, cfg), autocast=autocast),
    }
    if train and a.breakdown:
        out["phases"] = breakdown(torch, F, net, opt, x, y, a)
    if a.profile:
        out["profile_top_ops"] = profile_ops(torch, step, a.profile)
    out["provenance"] = peer_provenance(torch)
    print(json.dumps(out), flush=True)


def cuda_child_main(a, cfg, torch, F, net, x_host, y_host, batch, train, rss_start, rss_import) -> None:
    """child_main on the GPU (--device cuda): the same step and JSON fields, FP32 with TF32 off,
    the batch copied host -> device inside each step, torch.cuda.synchronize() ending each step
    so that the wall time of time_loop is the step's; peak memory = torch.cuda.max_memory_allocated
    (the caching allocator's peak of live tensors, what anvil's gpu_alloc_peak_MB counts)."""
    if not torch.cuda.is_available():
        sys.exit("--device cuda: torch.cuda.is_available() is False (a CPU-only wheel or no GPU)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    net = net.to(dev)
    opt = make_sgd(torch, net.parameters(), SGD_LR[a.model], cfg.get("sgd", "for_loop")) if train else None

    def train_step():
        x, y = x_host.to(dev), y_host.to(dev)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()

    def inference_step():
        with torch.inference_mode():
            net(x_host.to(dev))
        torch.cuda.synchronize()

    step = train_step if train else inference_step
    torch.cuda.reset_peak_memory_stats()
    per_rep = time_loop(step, a.warmup, a.reps, a.min_time, a.min_steps)
    flat = [t for r in per_rep for t in r]
    rep_means = [statistics.fmean(r) for r in per_rep]
    params, fwd_flops = model_params_and_flops(torch, net, batch)
    flops = 3.0 * fwd_flops if train else fwd_flops
    facts = torch_facts(torch, dict(cfg, inference="eager", inference_by_model=None))
    facts["cuda"] = {"device_name": torch.cuda.get_device_name(0), "torch_cuda": torch.version.cuda,
                     "cudnn": torch.backends.cudnn.version(),
                     "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                     "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}
    out = {
        "peer": "pytorch", "model": a.model, "phase": "train_step" if train else "inference_step",
        "threads": a.threads, "batch": batch, "params": params,
        "device": "cuda",
        "warmup_steps": a.warmup, "reps": a.reps, "steps": len(flat), "steps_per_rep": [len(r) for r in per_rep],
        "median_s": statistics.median(flat), "mean_s": statistics.fmean(flat), "min_s": min(flat),
        "rep_means_s": rep_means, "median_of_rep_means_s": statistics.median(rep_means),
        # No measured GPU peak to compare with: FLOP/s instead of a percentage.
        "pct_peak": None, "flops_per_s": flops / statistics.median(flat),
        "gpu_peak_alloc_MB": torch.cuda.max_memory_allocated() / 1048576.0,
        "gpu_peak_reserved_MB": torch.cuda.max_memory_reserved() / 1048576.0,
        "peak_rss_MB": peak_rss_mb(), "process": a.process, "rss_at_start_MB": rss_start, "rss_after_import_MB": rss_import,
        "config": facts,
        "provenance": peer_provenance(torch, on_gpu=True),
    }
    print(json.dumps(out), flush=True)


def breakdown(torch, F, net, opt, x, y, a) -> dict:
    """Median seconds of each part of the training step, timed separately (CPU ops are
    synchronous, so no sync is needed between them)."""
    parts = {"zero_grad": [], "forward_loss": [], "backward": [], "sgd_step": []}
    n = max(a.min_steps, 5)
    for i in range(n + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        loss = F.cross_entropy(net(x), y)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        if i:  # the first is a warm-up
            for k, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                parts[k].append(dt)
    return {k + "_median_s": statistics.median(v) for k, v in parts.items()}


def profile_ops(torch, step, steps: int) -> list:
    """Per-op self CPU time per step from torch.profiler: where PyTorch spends the step."""
    from torch.profiler import ProfilerActivity, profile
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    rows = []
    for e in sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:15]:
        rows.append({"op": e.key, "calls_per_step": e.count / steps,
                     "self_ms_per_step": e.self_cpu_time_total / 1000.0 / steps})
    return rows


def probe_sgd_main(a) -> None:
    """Seconds of opt.step() for each SGD implementation on the model's real gradients, timed
    alternately in one process (the update is a few % of the step: timing whole steps in
    separate processes would drown it in the host's noise)."""
    cfg = json.loads(a.cfg_json)
    torch = setup_torch(a.threads, cfg)
    import torch.nn.functional as F
    fin, _, classes, _, _, batch = MODELS[a.model]
    net = build_model(torch, a.model)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(batch, fin, generator=g), torch.randint(0, classes, (batch,), generator=g)
    F.cross_entropy(net(x), y).backward()
    opts = {c: make_sgd(torch, net.parameters(), SGD_LR[a.model], c) for c in SGD_CANDIDATES}
    times = {c: [] for c in opts}
    for i in range(a.iters + 1):
        for c, opt in opts.items():
            t0 = time.perf_counter()
            opt.step()
            if i:
                times[c].append(time.perf_counter() - t0)
    print(json.dumps({"probe": "sgd", "model": a.model, "threads": a.threads,
                      "median_s": {c: statistics.median(v) for c, v in times.items()},
                      "provenance": peer_provenance(torch)}), flush=True)


def probe_layer_gemms_main(a) -> None:
    """Seconds of each GEMM of one FCN training step as PyTorch issues it (forward
    F.linear = addmm with the [out, in] weight transposed: mode NT; input gradient dY @ W: NN;
    weight gradient dY^T @ X: TN), so that it can be set beside anvil_bench's
    gemm/<variant>/<mode>/fcn5_b64_<M>x<N>x<K> benchmarks. Each GEMM is timed alternately with the
    others, `iters` times; medians."""
    cfg = json.loads(a.cfg_json)
    torch = setup_torch(a.threads, cfg)
    import torch.nn.functional as F
    fin, hidden, classes, _, _, batch = MODELS[a.model]
    widths = [fin, *hidden, classes]
    g = torch.Generator().manual_seed(0)
    cases = []
    for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
        X = torch.randn(batch, n_in, generator=g)
        W = torch.randn(n_out, n_in, generator=g)
        b = torch.randn(n_out, generator=g)
        dY = torch.randn(batch, n_out, generator=g)
        cases.append((f"layer{i + 1} forward", "NT", batch, n_out, n_in, lambda X=X, W=W, b=b: F.linear(X, W, b)))
        if i > 0:  # autograd skips the input gradient of the first layer
            cases.append((f"layer{i + 1} dX", "NN", batch, n_in, n_out, lambda dY=dY, W=W: torch.mm(dY, W)))
        cases.append((f"layer{i + 1} dW", "TN", n_out, n_in, batch, lambda dY=dY, X=X: torch.mm(dY.t(), X)))
    times = {c[0]: [] for c in cases}
    for it in range(a.iters + 1):
        for name, _, _, _, _, f in cases:
            t0 = time.perf_counter()
            f()
            if it:
                times[name].append(time.perf_counter() - t0)
    rows = []
    for name, mode, m, n, k, _ in cases:
        sec = statistics.median(times[name])
        rows.append({"gemm": name, "mode": mode, "m": m, "n": n, "k": k, "median_s": sec,
                     "gflops": 2.0 * m * n * k / sec / 1e9})
    print(json.dumps({"probe": "layer_gemms", "model": a.model, "threads": a.threads, "rows": rows,
                      "sum_s": sum(r["median_s"] for r in rows), "provenance": peer_provenance(torch)}),
          flush=True)


def probe_gemm_main(a) -> None:
    """torch.mm GFLOP/s on the FCN-5 shapes (batch 64 and 1024) at the given thread count."""
    cfg = json.loads(a.cfg_json)
    torch = setup_torch(a.threads, cfg)
    g = torch.Generator().manual_seed(0)
    res = {"probe": "gemm", "threads": a.threads, "cfg": cfg, "mkl_cpu": mkl_cpu_type(torch),
           "allocator": loaded_allocator(), "shapes": []}
    k, n = 26752, 2048
    for m in (64, 1024):
        A = torch.randn(m, k, generator=g)
        B = torch.randn(k, n, generator=g)
        C = torch.empty(m, n)
        torch.mm(A, B, out=C)  # warm-up: MKL's buffers, page faults
        ts, start = [], time.perf_counter()
        while len(ts) < 3 or (time.perf_counter() - start < a.min_time and len(ts) < 50):
            t0 = time.perf_counter()
            torch.mm(A, B, out=C)
            ts.append(time.perf_counter() - t0)
        flop = 2.0 * m * n * k
        entry = {"m": m, "n": n, "k": k, "runs": len(ts), "gflops_best": flop / min(ts) / 1e9,
                 "gflops_median": flop / statistics.median(ts) / 1e9}
        if a.onednn:
            entry["onednn"] = probe_onednn(torch, A, B, flop, a.min_time)
        res["shapes"].append(entry)
    res["provenance"] = peer_provenance(torch)
    print(json.dumps(res), flush=True)


def probe_onednn(torch, A, B, flop: float, min_time: float) -> dict:
    """The oneDNN routes PyTorch offers for the same product, for the record: the fp32 inner
    product of torch.utils.mkldnn (inference only) and matmul with
    torch.backends.mkldnn.matmul.fp32_precision = 'bf16' (bf16 arithmetic: not eligible, it
    changes the numerics)."""
    def best(f):
        f()
        ts, start = [], time.perf_counter()
        while len(ts) < 3 or (time.perf_counter() - start < min_time and len(ts) < 50):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        return flop / min(ts) / 1e9
    out = {}
    W = B.t().contiguous()  # nn.Linear's [out, in] weight
    Am, Wm = A.to_mkldnn(), W.to_mkldnn()
    with torch.inference_mode():
        out["mkldnn_linear_fp32_gflops_best"] = best(lambda: torch._C._nn.mkldnn_linear(Am, Wm, None))
    mk = torch.backends.mkldnn.matmul
    old = mk.fp32_precision
    try:
        mk.fp32_precision = "bf16"
        out["matmul_bf16_precision_gflops_best_NOT_ELIGIBLE"] = best(lambda: torch.mm(A, B))
    except (AttributeError, RuntimeError) as e:
        out["matmul_bf16_precision_error"] = str(e)
    finally:
        mk.fp32_precision = old
    return out
