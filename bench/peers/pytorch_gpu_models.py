#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch on the GPU beside anvil_bench's model/<m>/<phase>/batch:<b>/device:cuda/input:<src>[/tf32].

    python3 bench/peers/pytorch_gpu_models.py --model resnet50 --batch 32
        [--phases train,inference] [--configs defaults,best,compile] [--steps copied,pinned,resident]
        [--best-steps resident] [--math fp32,tf32] [--reps 5] [--rep-time 0.2] [--min-steps 5]
        [--warmup 3] [--compile-mode default] [--dry-run]
    python3 bench/peers/pytorch_gpu_models.py --model vgg16 --probe-max-batch [--start 64] [--cap 4096]
    python3 bench/peers/pytorch_gpu_models.py --model vgg16 --batch 32 --configs compile --explain "why"

Models: the FCNs, the CNNs and the LSTM language models of networks.md, built by
pytorch_models.py (the CPU peer), so the networks are the same. Optimizer as anvil's timing
optimizer (models/*.cpp ModelInfo::optimizer, parsed by models/training_step.cpp): SGD lr 0.01
(FCN-5/8, AlexNet), lr 0.01 momentum 0.9 (ResNet-50, VGG16), lr 1.0 with clip_grad_norm_(5)
(LSTM-32/64, loss summed over T and averaged over B, hidden state carried between steps).

One JSON line per (config, phase, step definition, math); its "config" records the configuration:
  defaults  what PyTorch does untouched: SGD with `foreach` left to PyTorch (on CUDA it picks the
            foreach implementation), NCHW, cudnn.benchmark False (PyTorch's default), eager;
  best      channels_last (CNNs), cudnn.benchmark True with cudnn.benchmark_limit 0 (every
            algorithm tried), and the whole step (forward + loss + backward + clip + SGD) captured
            in one CUDA graph after warm-up steps on a side stream ("whole network capture" of
            PyTorch's CUDA-graphs documentation) and replayed; SGD needs no `capturable`
            (it keeps no step counter);
  compile   torch.compile(model) (mode --compile-mode) on top of defaults; where it cannot run
            (no Triton, no C compiler, an exception) the row says why in "error".
Step definitions (networks.md): copied = the batch copied from pageable host memory in every step
(anvil's input:pageable), pinned = page-locked batches copied on a side stream one step ahead
(anvil's input:pinned), resident = the batch already on the GPU. Math: fp32 = TF32 off for
matmuls and cuDNN, tf32 = both on. The defaults run every step definition in FP32 and the
resident one in TF32 (as anvil); best and compile run --best-steps (resident) in both.

Timing as anvil's GPU steps: CUDA events around each whole step, which ends with the device
synchronised; --warmup steps first; then --reps repetitions, each of at least --min-steps steps and
--rep-time seconds. median_s = the median of the repetitions' medians; spread_pct = (max - min)
of those over median_s; mean_s and min_s over every timed step. Memory:
torch.cuda.max_memory_allocated over the timed steps (under graphs it includes the graph's pool).
--probe-max-batch: the largest training batch (defaults, resident, FP32) that runs two steps
without torch.cuda.OutOfMemoryError, by doubling from --start, then bisection to --resolution.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_models as pm  # noqa: E402  (the CPU peer: network builders and tables)
from pytorch_setup import P  # noqa: E402  (scripts/provenance.py: Note [Provenance])

CONFIGS = ("defaults", "best", "compile")
STEPS = ("copied", "pinned", "resident")


def spec_of(name):
    """(kind, input shape or (T,), classes/vocab, lr, momentum, clip) of a model."""
    if name in pm.MODELS:
        fin, _, classes = pm.MODELS[name][0], pm.MODELS[name][1], pm.MODELS[name][2]
        return "fcn", (fin,), classes, pm.SGD_LR.get(name, 0.01), 0.0, 0.0
    if name not in pm.NETS:
        raise SystemExit(f"pytorch_gpu_models.py: unknown model {name}")
    s = pm.NETS[name]
    if s["kind"] == "cnn":
        return "cnn", s["input"], s["classes"], s["lr"], s["momentum"], 0.0
    return "lstm", (s["steps"],), s["vocab"], s["lr"], s["momentum"], s.get("clip", 0.0)


def rows_planned(a):
    """[(config, phase, step, math)] in the order they run."""
    out = []
    for config in a.configs.split(","):
        if config not in CONFIGS:
            raise SystemExit(f"pytorch_gpu_models.py: unknown config '{config}' ({', '.join(CONFIGS)})")
        for phase in a.phases.split(","):
            if phase not in ("train", "inference"):
                raise SystemExit(f"pytorch_gpu_models.py: unknown phase '{phase}' (train, inference)")
            steps = a.steps if config == "defaults" else a.best_steps
            for step in steps.split(","):
                if step not in STEPS:
                    raise SystemExit(f"pytorch_gpu_models.py: unknown step '{step}' ({', '.join(STEPS)})")
                for math in a.math.split(","):
                    if math not in ("fp32", "tf32"):
                        raise SystemExit(f"pytorch_gpu_models.py: unknown math '{math}' (fp32, tf32)")
                    if config == "defaults" and step != "resident" and math == "tf32":
                        continue  # anvil times TF32 with the batch resident only
                    out.append((config, phase, step, math))
    return out


def compile_unavailable(torch):
    """Why torch.compile cannot run here, or None (Inductor's GPU code is Triton, whose launcher
    is built with the host C compiler)."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    try:
        import triton  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return f"triton does not import ({type(e).__name__}: {e})"
    cc = os.environ.get("CC")
    if not (cc and shutil.which(cc)) and not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
        return "no C compiler (cc, gcc, clang) for Triton's launcher"
    return None


def uses_channels_last(config, name):
    return config == "best" and spec_of(name)[0] == "cnn"


def optimizer_text(name):
    _, _, _, lr, momentum, clip = spec_of(name)
    return f"SGD lr={lr} momentum={momentum}" + (f" clip_grad_norm_({clip})" if clip else "")


class Step:
    """One configuration's training or inference step of one model at one batch and step
    definition; run() enqueues one whole step (the caller synchronises)."""

    def __init__(self, torch, F, name, batch, train, config, step, compile_mode):
        self.torch, self.F, self.train, self.step_kind = torch, F, train, step
        kind, shape, classes, lr, momentum, clip = spec_of(name)
        self.kind, self.clip, self.batch = kind, clip, batch
        dev = torch.device("cuda")
        net = pm.build_model(torch, name) if kind == "fcn" else pm.build_net(torch, name)
        net = net.to(dev).train(train)
        self.channels_last = uses_channels_last(config, name)
        fmt = torch.channels_last if self.channels_last else torch.contiguous_format
        if self.channels_last:
            net = net.to(memory_format=torch.channels_last)
        self.net = net
        self.fwd = net
        if config == "compile":
            self.fwd = torch.compile(net, mode=None if compile_mode == "default" else compile_mode)
        g = torch.Generator().manual_seed(1)
        if kind == "lstm":
            x = torch.randint(0, classes, (batch, shape[0]), generator=g)        # ids [B, T]
            y = torch.randint(0, classes, (shape[0], batch), generator=g)        # targets [T, B]
            spec = pm.NETS[name]
            z = torch.zeros(spec["layers"], batch, spec["hidden"], device=dev)
            self.state = (z, z.clone())  # carried between steps (static buffers: graph-safe)
        else:
            x = torch.randn(batch, *shape, generator=g).contiguous(memory_format=fmt) \
                if kind == "cnn" else torch.randn(batch, *shape, generator=g)
            y = torch.randint(0, classes, (batch,), generator=g)
        self.x_host, self.y = x, y.to(dev)
        self.x_dev = x.to(dev)  # resident batch; also the copy target of the copied definition
        if step == "pinned":  # two device buffers: step k computes on one while k+1 is copied
            self.x_pin = x.pin_memory()
            self.bufs = [x.to(dev), x.to(dev)]
            self.copy_stream = torch.cuda.Stream()
            self.copied = [torch.cuda.Event(), torch.cuda.Event()]
            self.used = [torch.cuda.Event(), torch.cuda.Event()]
            self.k = 0
            with torch.cuda.stream(self.copy_stream):
                self.bufs[0].copy_(self.x_pin, non_blocking=True)
            self.copied[0].record(self.copy_stream)
        self.opt = None
        self.params = list(net.parameters())
        if train:  # foreach left to PyTorch in every configuration
            self.opt = torch.optim.SGD(self.params, lr=lr, momentum=momentum)
        self.graph = None

    def input(self):
        torch = self.torch
        if self.graph is not None:  # the captured step reads x_dev: copy the batch into it
            if self.step_kind == "copied":
                self.x_dev.copy_(self.x_host)
            elif self.step_kind == "pinned":
                self.x_dev.copy_(self.x_pin, non_blocking=True)
            return self.x_dev
        if self.step_kind == "resident":
            return self.x_dev
        if self.step_kind == "copied":
            return self.x_host.to(self.x_dev.device)
        cur, nxt = self.k % 2, (self.k + 1) % 2
        main = torch.cuda.current_stream()
        main.wait_event(self.copied[cur])
        self.copy_stream.wait_event(self.used[nxt])  # that buffer's last reader has finished
        with torch.cuda.stream(self.copy_stream):
            self.bufs[nxt].copy_(self.x_pin, non_blocking=True)
        self.copied[nxt].record(self.copy_stream)
        self.k += 1
        self._cur = cur
        return self.bufs[cur]

    def body(self, x, zero_grad=True):
        torch, F = self.torch, self.F
        if self.train:
            if zero_grad:
                self.opt.zero_grad(set_to_none=True)
            if self.kind == "lstm":
                logits, (h, c) = self.fwd(x, self.state)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.y.reshape(-1),
                                       reduction="sum") / self.batch
            else:
                loss = F.cross_entropy(self.fwd(x), self.y)
            loss.backward()
            if self.clip:
                torch.nn.utils.clip_grad_norm_(self.params, self.clip)
            self.opt.step()
        else:
            with torch.no_grad():
                out = self.fwd(x, self.state) if self.kind == "lstm" else self.fwd(x)
            if self.kind == "lstm":
                h, c = out[1]
        if self.kind == "lstm":
            with torch.no_grad():
                self.state[0].copy_(h)
                self.state[1].copy_(c)

    def run(self):
        if self.graph is not None:
            self.input()
            self.graph.replay()
            return
        self.body(self.input())
        if self.step_kind == "pinned":
            self.used[self._cur].record(self.torch.cuda.current_stream())

    def capture(self, warmup):
        """Whole-step capture (PyTorch docs, "whole network capture"): warm-up on a side stream
        (cudnn.benchmark's search, the optimizer's momentum buffers), then one captured step."""
        torch = self.torch
        x = self.x_dev
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(max(3, warmup)):
                self.body(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        if self.train:
            self.opt.zero_grad(set_to_none=True)  # backward allocates .grad in the graph's pool
        with torch.cuda.graph(g):
            self.body(x, zero_grad=False)
        torch.cuda.synchronize()
        self.graph = g


def set_math(torch, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def time_reps(torch, run, warmup, reps, rep_time, min_steps):
    """Per repetition the median step time (CUDA events, the step synchronised), and every step."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    rep_medians, every = [], []
    for _ in range(reps):
        times, t0 = [], time.perf_counter()
        while len(times) < min_steps or time.perf_counter() - t0 < rep_time:
            start.record()
            run()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) * 1e-3)
        rep_medians.append(statistics.median(times))
        every.extend(times)
    return rep_medians, every


def config_record(torch, model, config, math, compile_mode, foreach):
    return {"name": config, "foreach": foreach,
            "channels_last": uses_channels_last(config, model),
            "graphs": config == "best", "compile": compile_mode if config == "compile" else False,
            "tf32": math == "tf32", "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_benchmark_limit": getattr(torch.backends.cudnn, "benchmark_limit", None),
            "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "device_name": torch.cuda.get_device_name(0),
            "optimizer": optimizer_text(model)}


def sgd_foreach(torch, step_obj):
    """What SGD's foreach default resolves to for these parameters (PyTorch's own choice)."""
    if step_obj is None or step_obj.opt is None:
        return None
    try:
        from torch.optim.optimizer import _default_to_fused_or_foreach
        _, foreach = _default_to_fused_or_foreach(step_obj.params, differentiable=False, use_fused=False)
        return bool(foreach)
    except Exception:  # noqa: BLE001  (a private helper; its signature may change)
        return "pytorch default (not resolved)"


def run_row(a, torch, F, config, phase, step, math):
    base = {"peer": "pytorch", "device": "cuda", "model": a.model, "batch": a.batch,
            "phase": "train_step" if phase == "train" else "inference_step", "step": step, "math": math}
    set_math(torch, math == "tf32")
    torch.backends.cudnn.benchmark = config == "best"
    if hasattr(torch.backends.cudnn, "benchmark_limit"):
        torch.backends.cudnn.benchmark_limit = 0 if config == "best" else a.default_benchmark_limit
    s = None
    try:
        if config == "compile":
            why = compile_unavailable(torch)
            if why:
                raise RuntimeError(f"torch.compile not run: {why}")
        s = Step(torch, F, a.model, a.batch, phase == "train", config, step, a.compile_mode)
        t0 = time.perf_counter()
        if config == "best":
            s.capture(a.warmup)
        else:
            s.run()  # the first step: cudnn's search, torch.compile's compilation
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        torch.cuda.reset_peak_memory_stats()
        reps, every = time_reps(torch, s.run, a.warmup, a.reps, a.rep_time, a.min_steps)
        med = statistics.median(reps)
        row = dict(base, steps=len(every), reps=len(reps), median_s=med, mean_s=statistics.fmean(every),
                   min_s=min(every), rep_medians_s=reps, spread_pct=(max(reps) - min(reps)) / med * 100,
                   first_step_s=first_s,
                   gpu_peak_alloc_MB=torch.cuda.max_memory_allocated() / 1048576.0,
                   gpu_peak_reserved_MB=torch.cuda.max_memory_reserved() / 1048576.0)
    except Exception as e:  # noqa: BLE001  (a row that cannot run says why; the others still run)
        msg = str(e).strip().splitlines()
        row = dict(base, error=f"{type(e).__name__}: {msg[0][:300] if msg else ''}")
    row["config"] = config_record(torch, a.model, config, math, a.compile_mode, sgd_foreach(torch, s))
    row["provenance"] = pm.peer_provenance(torch, on_gpu=True)
    print(json.dumps(row), flush=True)
    del s
    torch.cuda.empty_cache()


def probe_max_batch(a, torch, F):
    """Doubling from --start, then bisection: one JSON line per probe and a final max_batch line."""
    set_math(torch, False)

    def fits(b):
        import gc
        s = None
        try:
            s = Step(torch, F, a.model, b, True, "defaults", "resident", "default")
            torch.cuda.reset_peak_memory_stats()
            for _ in range(2):
                s.run()
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() / 1048576.0
            ok, why = True, None
        except Exception as e:  # noqa: BLE001  out of memory, or a kernel refusing the size
            oom = isinstance(e, torch.cuda.OutOfMemoryError)
            ok, peak = False, None
            why = ("" if oom else "not out of memory: ") + f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        s = None
        gc.collect()
        torch.cuda.empty_cache()
        print(json.dumps({"peer": "pytorch", "device": "cuda", "kind": "memory_probe", "model": a.model,
                          "batch": b, "fits": ok, "gpu_peak_alloc_MB": peak, "oom": why,
                          "provenance": pm.peer_provenance(torch, on_gpu=True)}), flush=True)
        return ok

    lo, hi, b = 0, None, a.start
    while b <= a.cap:
        if fits(b):
            lo, b = b, b * 2
        else:
            hi = b
            break
    while hi is not None and hi - lo > max(1, int(lo * a.resolution)):
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    print(json.dumps({"peer": "pytorch", "device": "cuda", "kind": "max_batch", "model": a.model,
                      "max_batch": lo, "first_oom": hi, "cap": a.cap,
                      "note": "cap reached without running out of memory" if hi is None else "",
                      "device_name": torch.cuda.get_device_name(0), "torch": torch.__version__,
                      "provenance": pm.peer_provenance(torch, on_gpu=True)}), flush=True)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int)
    p.add_argument("--phases", default="train,inference")
    p.add_argument("--configs", default="defaults,best")
    p.add_argument("--steps", default="copied,pinned,resident", help="step definitions of the defaults")
    p.add_argument("--best-steps", default="resident", help="step definitions of best and compile")
    p.add_argument("--math", default="fp32,tf32")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rep-time", type=float, default=0.2)
    p.add_argument("--min-steps", type=int, default=5)
    p.add_argument("--compile-mode", default="default")
    p.add_argument("--default-benchmark-limit", type=int, default=10,
                   help="cudnn.benchmark_limit outside 'best' (PyTorch's default, 10)")
    p.add_argument("--dry-run", action="store_true", help="print the rows it would time; no torch")
    p.add_argument("--explain", metavar="REASON",
                   help="print one error row per planned row saying REASON (a run that was stopped)")
    p.add_argument("--probe-max-batch", action="store_true")
    p.add_argument("--start", type=int, default=64)
    p.add_argument("--cap", type=int, default=65536)
    p.add_argument("--resolution", type=float, default=1 / 16)
    a = p.parse_args(argv)
    spec_of(a.model)
    if a.probe_max_batch:
        if a.dry_run:
            print(f"probe {a.model}: training batches {a.start}, {a.start * 2}, ... up to {a.cap}, then bisection")
            return 0
    else:
        if a.batch is None:
            p.error("--batch is required unless --probe-max-batch")
        plan = rows_planned(a)
        if a.dry_run or a.explain:
            prov = P.provenance() if a.explain else None
            for config, phase, step, math in plan:
                if a.explain:
                    print(json.dumps({"peer": "pytorch", "device": "cuda", "model": a.model, "batch": a.batch,
                                      "phase": f"{phase}_step" if phase == "train" else "inference_step",
                                      "step": step, "math": math, "error": a.explain,
                                      "config": {"name": config}, "provenance": prov}))
                else:
                    print(f"{a.model} batch {a.batch}: {config} {phase} {step} {math}")
            return 0
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        raise SystemExit("pytorch_gpu_models.py: torch.cuda.is_available() is False")
    if a.probe_max_batch:
        probe_max_batch(a, torch, F)
        return 0
    for config, phase, step, math in plan:
        run_row(a, torch, F, config, phase, step, math)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
