#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch peer of anvil_bench's model step benchmarks (networks.md, "How a step is timed").

Times the DLBench step -- zero_grad(set_to_none=True) + forward + F.cross_entropy + backward +
plain SGD (lr 0.01) -- and the inference step (forward under torch.inference_mode()) for the
fully connected networks of networks.md, with PyTorch configured at its best on this machine,
and prints one JSON object per (model, phase, threads, batch) on stdout.

The CNN and LSTM networks of networks.md (NETS: alexnet, vgg16, resnet50, cnn_mnist, cnn_cifar,
lstm32, lstm64, ptb_small) are written out below (torchvision is not used) with their parameter
counts asserted against networks.md, and timed the same way (NetStep): CNNs on N(0,1) images with
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
this script was written, see PRESET below).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# ---------------------------------------------------------------------------------------------
# Models (networks.md). Same definitions as anvil's models/fcn.cpp: nn.Linear stacks, whose
# weight layout [out, in] is also anvil's; the loss is applied by the step, not the model.
# ---------------------------------------------------------------------------------------------
MODELS = {
    # name: (input features, hidden widths, classes, activation, dropout p, DLBench/CPU batch)
    "fcn5": (26752, [2048, 2048, 2048], 26752, "sigmoid", 0.0, 64),
    "fcn8": (26752, [2048] * 6, 26752, "sigmoid", 0.0, 64),
    "fcn_r": (784, [2048, 4096, 1024], 10, "sigmoid", 0.0, 64),
    "mlp_mnist": (784, [512, 512], 10, "relu", 0.2, 80),
}
# The CNN and LSTM networks of networks.md (built by build_net() below). "params" is the exact
# count of networks.md; "extra_params" what PyTorch's layout adds to it (nn.LSTM has two bias
# vectors per layer, b_ih and b_hh, where networks.md's LSTM has one: +8H per layer), so that
# build_net() can assert params == networks.md + extra. Optimizer (networks.md, "How a step is
# timed"): plain SGD lr 0.01 for AlexNet; momentum 0.9 for ResNet-50 and VGG16 (allowed by
# networks.md, and what their training recipes use); lr 1.0 with clip_grad_norm_(5) for the
# LSTMs. cnn_mnist/cnn_cifar were trained with Adadelta/RMSprop in Keras; here plain SGD lr 0.01
# (the update is a negligible part of their step, and anvil_bench times them with SGD too).
NETS = {
    "alexnet": {"kind": "cnn", "input": (3, 224, 224), "classes": 1000, "batch": 16,
                "lr": 0.01, "momentum": 0.0, "params": 62378344, "extra_params": 0, "macs": 1.14e9},
    "vgg16": {"kind": "cnn", "input": (3, 224, 224), "classes": 1000, "batch": 16,
              "lr": 0.01, "momentum": 0.9, "params": 138357544, "extra_params": 0, "macs": 15.5e9},
    "resnet50": {"kind": "cnn", "input": (3, 224, 224), "classes": 1000, "batch": 16,
                 "lr": 0.01, "momentum": 0.9, "params": 25557032, "extra_params": 0, "macs": 4.09e9},
    "cnn_mnist": {"kind": "cnn", "input": (1, 28, 28), "classes": 10, "batch": 128,
                  "lr": 0.01, "momentum": 0.0, "params": 1199882, "extra_params": 0, "macs": None},
    "cnn_cifar": {"kind": "cnn", "input": (3, 32, 32), "classes": 10, "batch": 32,
                  "lr": 0.01, "momentum": 0.0, "params": 1250858, "extra_params": 0, "macs": None},
    # Word-level LSTM language models: vocabulary V, embedding/hidden width H, layers, unroll T.
    "lstm32": {"kind": "lstm", "vocab": 10000, "hidden": 256, "layers": 2, "steps": 32, "batch": 128,
               "lr": 1.0, "momentum": 0.0, "clip": 5.0, "params": 6180624, "extra_params": 2 * 4 * 256},
    "lstm64": {"kind": "lstm", "vocab": 10000, "hidden": 256, "layers": 2, "steps": 64, "batch": 128,
               "lr": 1.0, "momentum": 0.0, "clip": 5.0, "params": 6180624, "extra_params": 2 * 4 * 256},
    # Zaremba et al. "small": init U(-0.1, 0.1); 4,651,600 + 1,600 (second biases) in PyTorch.
    "ptb_small": {"kind": "lstm", "vocab": 10000, "hidden": 200, "layers": 2, "steps": 20, "batch": 20,
                  "lr": 1.0, "momentum": 0.0, "clip": 5.0, "params": 4651600, "extra_params": 2 * 4 * 200,
                  "init_range": 0.1},
}

# The DLBench step uses plain SGD (networks.md). anvil_bench's model_bench.cpp takes the lr from
# the model's optimizer string ("sgd lr=0.01", "sgd lr=0.05" for fcn_r, "adam lr=1e-3" for
# mlp_mnist), always with SGD; mirrored here (the lr does not change the work done).
SGD_LR = {"fcn5": 0.01, "fcn8": 0.01, "fcn_r": 0.05, "mlp_mnist": 1e-3}
# --device cuda: networks.md's GPU mini-batch sweep (mlp_mnist has its one batch), the batches
# anvil_bench's model/<name>/<phase>/batch:<b>/device:cuda rows run at. FP32 only: TF32 is
# switched off for matmuls and cuDNN; the batch is copied host -> device inside every step and
# the step ends with torch.cuda.synchronize() (networks.md, "How a step is timed").
GPU_BATCHES = {"fcn5": [32, 64, 128, 256, 512, 1024], "fcn8": [32, 64, 128, 256, 512, 1024],
               "fcn_r": [32, 64, 128, 256, 512, 1024], "mlp_mnist": [80]}

# ---------------------------------------------------------------------------------------------
# Configuration candidates. Each maps to environment variables / preloads of the child process.
# ---------------------------------------------------------------------------------------------
SHIM_SOURCE = "int mkl_serv_intel_cpu_true(void) { return 1; }\n"

# How MKL is steered to its AVX-512 kernels on an AMD CPU.
MKL_CANDIDATES = {
    "default": {},
    # Honoured by MKL up to 2020.0 only; kept to show that it no longer works.
    "debug_cpu_type_5": {"env": {"MKL_DEBUG_CPU_TYPE": "5"}},
    # Only caps the ISA MKL may use; it does not lift the vendor check.
    "enable_avx512": {"env": {"MKL_ENABLE_INSTRUCTIONS": "AVX512"}},
    # The well-known workaround: MKL asks mkl_serv_intel_cpu_true() whether to trust CPUID's
    # feature bits; libtorch_cpu.so exports that symbol and calls it through the PLT, so a
    # preloaded definition returning 1 makes MKL dispatch on features (-> AVX-512 kernels).
    "shim": {"shim": True},
    "shim+enable_avx512": {"shim": True, "env": {"MKL_ENABLE_INSTRUCTIONS": "AVX512"}},
}

JEMALLOC = "libjemalloc.so.2"
TCMALLOC = "libtcmalloc_minimal.so.4"
BIG = str(1 << 40)
ALLOCATOR_CANDIDATES = {
    "glibc": {},
    # The knobs the glibc manual offers. M_MMAP_THRESHOLD is capped at 32 MiB on 64-bit glibc,
    # so the 219 MB FCN weight gradients are still mmap()ed; the trim threshold keeps the heap.
    "glibc_thresholds": {"env": {"MALLOC_MMAP_THRESHOLD_": str(32 << 20),
                                 "MALLOC_TRIM_THRESHOLD_": BIG, "MALLOC_TOP_PAD_": str(64 << 20)}},
    # No mmap at all: every block comes from the heap and freed blocks are reused, never trimmed.
    "glibc_nommap": {"env": {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": BIG}},
    "jemalloc": {"preload": JEMALLOC},
    # jemalloc sends blocks >= 8 MiB to a "huge" arena that returns them to the OS at once;
    # oversize_threshold:0 and no decay keep them for reuse.
    "jemalloc_retain": {"preload": JEMALLOC,
                        "env": {"MALLOC_CONF": "oversize_threshold:0,dirty_decay_ms:-1,muzzy_decay_ms:-1"}},
    "tcmalloc": {"preload": TCMALLOC, "env": {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": BIG}},
}

WAIT_CANDIDATES = ["PASSIVE", "ACTIVE"]
SGD_CANDIDATES = ["for_loop", "foreach", "fused"]
# Inference step: eager nn.Linear (MKL sgemm) or the model converted with
# torch.utils.mkldnn.to_mkldnn (oneDNN fp32 inner product; inference only, no autograd).
INFERENCE_CANDIDATES = ["eager", "mkldnn"]

# What `tune` chose on this machine when the script was written (2-vCPU AMD EPYC VM, CPU family
# 25 model 17 = Zen 4 "Genoa"; torch 2.15.0 with MKL 2024.2): the shim (MKL at 93-95 % of the
# core's FMA peak instead of 65-88 %), an allocator that keeps large blocks (tcmalloc,
# glibc_nommap and jemalloc_retain are within a few % of each other, ~30 % faster steps than
# glibc or stock jemalloc; tcmalloc has the smaller, steadier peak RSS), PASSIVE waiting (ACTIVE
# 8-40 % slower on this shared host), the plain for-loop SGD (foreach/fused are no faster on
# CPU), oneDNN for inference except mlp_mnist.
# `tune` re-derives it; compare_pytorch.sh tunes by default.
PRESET = {
    "mkl": "shim",
    "allocator": "tcmalloc",
    "omp_wait_policy": "PASSIVE",
    "sgd": "for_loop",
    "inference": "mkldnn",
    "inference_by_model": {"fcn5": "mkldnn", "fcn8": "mkldnn", "fcn_r": "mkldnn", "mlp_mnist": "eager"},
    "flush_denormal": True,
    "source": "preset (bench/peers/pytorch_models.py)",
}

# Environment variables recorded with every result because they change what PyTorch does.
ENV_OF_INTEREST = ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND",
                   "OMP_PLACES", "GOMP_SPINCOUNT", "KMP_AFFINITY", "KMP_BLOCKTIME",
                   "MKL_DEBUG_CPU_TYPE", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "MKL_DYNAMIC",
                   "LD_PRELOAD", "MALLOC_CONF", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                   "MALLOC_MMAP_MAX_", "MALLOC_TOP_PAD_", "TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD",
                   "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
                   "TORCH_MKLDNN_MATMUL_MIN_DIM", "CUDA_VISIBLE_DEVICES"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Building a child's environment
# ---------------------------------------------------------------------------------------------
_workdir = None


def workdir() -> str:
    """A temporary directory for the MKL shim, removed when the launcher exits."""
    global _workdir
    if _workdir is None:
        _workdir = tempfile.mkdtemp(prefix="anvil-torch-peer-")
        import atexit
        atexit.register(shutil.rmtree, _workdir, True)
    return _workdir


def build_shim() -> str:
    """Compiles the mkl_serv_intel_cpu_true shim with gcc into the temp dir; returns its path."""
    path = os.path.join(workdir(), "libmkl_intel_cpu_true.so")
    if not os.path.exists(path):
        src = os.path.join(workdir(), "mkl_intel_cpu_true.c")
        with open(src, "w") as f:
            f.write(SHIM_SOURCE)
        cc = shutil.which("gcc") or shutil.which("cc")
        if not cc:
            raise RuntimeError("the MKL shim needs gcc (apt-get install gcc)")
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", path, src], check=True)
    return path


# A calibration of the core this process is given right now: 512-bit FMAs on 12 independent
# accumulators (>= 8 reach a core's peak). TOOLCHAIN.md's 242 GFLOP/s is a Zen 5 core; the VM
# this was written on reports CPU family 25 model 17 (Zen 4 "Genoa", AVX-512 executed as two
# 256-bit halves: 117 GFLOP/s, and the same with 256-bit FMAs), and other processes on the host
# take their share too. So GEMM GFLOP/s are also reported as a fraction of this figure, taken
# just before each probe.
FMA_PEAK_SOURCE = r"""
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(void) {
  __m512 a[12], b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 12; i++) a[i] = _mm512_set1_ps((float)i);
  const long n = 60000000;
  double t0 = now();
  for (long k = 0; k < n; k++) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  double t = now() - t0;
  float s = 0;
  for (int i = 0; i < 12; i++) s += _mm512_reduce_add_ps(a[i]);
  printf("%.3f %g\n", n * 12 * 32.0 / t / 1e9, s);
  return 0;
}
"""


def fma_peak_gflops() -> float | None:
    """Single-core FP32 FMA GFLOP/s available right now (None without gcc or AVX-512)."""
    exe = os.path.join(workdir(), "fma_peak")
    try:
        if not os.path.exists(exe):
            src = exe + ".c"
            with open(src, "w") as f:
                f.write(FMA_PEAK_SOURCE)
            subprocess.run([shutil.which("gcc") or "cc", "-O2", "-mavx512f", "-o", exe, src], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = subprocess.run([exe], stdout=subprocess.PIPE, text=True, check=True)
        return float(r.stdout.split()[0])
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None


def resolve_peak(given: float | None) -> tuple[float, str]:
    """The per-core peak pct_peak is scored against, and where it came from: the one given
    (compare_pytorch.sh and bench.sh give anvil_bench's measured peak, so that both sides are
    scored against one peak), else this machine's, measured now; 0 when neither is available
    (pct_peak is then null)."""
    if given:
        return given, "given with --peak"
    measured = fma_peak_gflops()
    if measured:
        return measured, "measured by the peer: 512-bit FMA loop, 12 accumulators, 1 thread"
    return 0.0, "none: no --peak and the FMA loop could not run (no gcc or no AVX-512)"


def pct_of_peak(flops: float, seconds: float, a) -> float | None:
    """Achieved FLOP/s as a percentage of threads x the per-core peak (None without a peak)."""
    return flops / seconds / (a.peak * 1e9 * a.threads) * 100.0 if a.peak else None


def find_library(name: str) -> str | None:
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return None


def ensure_allocators() -> dict:
    """Finds jemalloc/tcmalloc, installing the Debian packages with apt-get if they are missing
    (and we may). Returns {library name: path or None}."""
    packages = {JEMALLOC: "libjemalloc2", TCMALLOC: "libtcmalloc-minimal4"}
    missing = [pkg for lib, pkg in packages.items() if not find_library(lib)]
    if missing and shutil.which("apt-get") and os.geteuid() == 0:
        log(f"[torch-peer] installing {' '.join(missing)} with apt-get")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:  # stale package lists: refresh once and retry
            subprocess.run(["apt-get", "update"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *missing],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {lib: find_library(lib) for lib in packages}


# Note [Peer fallbacks]
# The preset (and a tuned configuration) asks for tcmalloc and for the MKL shim, which need
# libtcmalloc_minimal.so.4 and a C compiler. Machines without them (the lent GPU machines have
# no tcmalloc/jemalloc and no apt) must still time PyTorch, in the best configuration they
# allow, and say which one that was. effective_config() makes that choice before any child is
# started: a missing allocator library gives way to the next allocator that keeps large blocks
# (ALLOCATOR_FALLBACKS: tcmalloc, jemalloc_retain, then glibc without mmap, which needs no
# library and was within a few % of tcmalloc in `tune`), and a shim that cannot be built gives
# way to MKL's default code path. The requested values and a line per fallback are recorded in
# the configuration itself, which every child copies into its JSON ("config" -> "choice").
# Whether MKL then really runs its AVX-512 path is measured, not assumed: the child records
# mkl_serv_cpu_detect() (0 = generic) and the allocator it finds in its own memory map.
ALLOCATOR_FALLBACKS = ["tcmalloc", "jemalloc_retain", "glibc_nommap"]


def shim_buildable() -> tuple[bool, str]:
    """Whether the MKL shim can be built here (a C compiler that builds it), and why not."""
    try:
        build_shim()
        return True, ""
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        return False, str(e)


def effective_config(cfg: dict, find=None, shim=None) -> dict:
    """`cfg` as this machine can run it (Note [Peer fallbacks]): the same dict when everything it
    asks for is available, else a copy with the allocator and/or MKL setting replaced, plus
    "requested" (what was asked for) and "fallbacks" (one line per replacement). `find(lib)`
    locates a library (find_library), `shim()` says whether the MKL shim builds
    (shim_buildable); both are parameters so that the choice is testable without torch."""
    find = find or find_library
    shim = shim or shim_buildable
    out = dict(cfg)
    fallbacks = list(cfg.get("fallbacks") or [])
    requested = {"mkl": cfg.get("mkl", "default"), "allocator": cfg.get("allocator", "glibc")}
    alloc = requested["allocator"]
    if alloc not in ALLOCATOR_CANDIDATES:
        raise ValueError(f"effective_config: unknown allocator '{alloc}' (known: {', '.join(ALLOCATOR_CANDIDATES)})")
    lib = ALLOCATOR_CANDIDATES[alloc].get("preload")
    if lib and not find(lib):
        order = [alloc] + [c for c in ALLOCATOR_FALLBACKS if c != alloc]
        usable = next(c for c in order if not ALLOCATOR_CANDIDATES[c].get("preload")
                      or find(ALLOCATOR_CANDIDATES[c]["preload"]))
        out["allocator"] = usable
        fallbacks.append(f"allocator {alloc}: {lib} not found; using {usable}")
    mkl = requested["mkl"]
    if mkl not in MKL_CANDIDATES:
        raise ValueError(f"effective_config: unknown MKL setting '{mkl}' (known: {', '.join(MKL_CANDIDATES)})")
    if MKL_CANDIDATES[mkl].get("shim"):
        ok, why = shim()
        if not ok:
            # Keep the rest of the setting (its environment), without the shim.
            usable = "enable_avx512" if MKL_CANDIDATES[mkl].get("env") else "default"
            out["mkl"] = usable
            fallbacks.append(f"mkl {mkl}: the mkl_serv_intel_cpu_true shim cannot be built ({why}); "
                             f"using {usable} (MKL picks its own code path)")
    if fallbacks:
        out["requested"] = cfg.get("requested") or requested
        out["fallbacks"] = fallbacks
        for line in fallbacks[len(cfg.get("fallbacks") or []):]:
            log(f"[torch-peer] fallback: {line}")
    return out


def child_env(cfg: dict, threads: int) -> dict:
    """The environment of a child process that runs PyTorch under configuration `cfg`."""
    env = dict(os.environ)
    # Remove anything inherited that would silently change the configuration under test.
    for k in ("LD_PRELOAD", "MKL_DEBUG_CPU_TYPE", "MKL_ENABLE_INSTRUCTIONS", "MALLOC_CONF",
              "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_",
              "MALLOC_TOP_PAD_", "GOMP_SPINCOUNT", "MKL_VERBOSE"):
        env.pop(k, None)
    # Threads explicitly, for OpenMP (PyTorch's intra-op pool) and MKL alike; the child also
    # calls torch.set_num_threads(threads).
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    wait = cfg.get("omp_wait_policy")
    if wait and wait != "unset":
        env["OMP_WAIT_POLICY"] = wait
    else:
        env.pop("OMP_WAIT_POLICY", None)
    if cfg.get("device", "cpu") != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the wheel is a CUDA build: keep it off any GPU
    # The wheel warns at import that NumPy is missing, to_mkldnn that TorchScript is deprecated.
    env.setdefault("PYTHONWARNINGS", "ignore")
    preload = []
    mkl = MKL_CANDIDATES[cfg.get("mkl", "default")]
    if mkl.get("shim"):
        preload.append(build_shim())
    env.update(mkl.get("env", {}))
    alloc = ALLOCATOR_CANDIDATES[cfg.get("allocator", "glibc")]
    if alloc.get("preload"):
        path = find_library(alloc["preload"])
        if not path:  # effective_config() replaces a missing allocator before this is reached
            raise RuntimeError(f"allocator {alloc['preload']} not found "
                               "(apt-get install libjemalloc2 libtcmalloc-minimal4, or run the "
                               "configuration through effective_config)")
        preload.append(path)
    env.update(alloc.get("env", {}))
    if preload:
        env["LD_PRELOAD"] = " ".join(preload)
    return env


def run_child(cfg: dict, threads: int, args: list[str], timeout: float = 1800) -> list[dict]:
    """Runs this script's `child`/`probe-gemm` subcommand in a fresh process under `cfg` and
    returns the JSON objects it printed."""
    cmd = [sys.executable, os.path.abspath(__file__), *args, "--cfg-json", json.dumps(cfg)]
    r = subprocess.run(cmd, env=child_env(cfg, threads), stdout=subprocess.PIPE, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"child failed (rc {r.returncode}): {' '.join(args)}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


# ---------------------------------------------------------------------------------------------
# Inside a child: what PyTorch actually runs with
# ---------------------------------------------------------------------------------------------
def status_mb(field: str) -> float:
    """A kB field of /proc/self/status (VmRSS:, VmHWM:) in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def rss_now_mb() -> float:
    return status_mb("VmRSS:")


def peak_rss_mb() -> float:
    """The resident high-water mark of this process (VmHWM)."""
    return status_mb("VmHWM:")


def adopt_parent_residency() -> int:
    """In a process just forked: touches every page of a file mapping (library code and data)
    that is resident in the parent, so that this process starts with the parent's RSS, as a fresh
    process that had run the same imports would. fork() copies the page table entries of
    anonymous memory but not of file mappings: without this a forked child's RSS is ~240 MB
    (PyTorch) short of a fresh one's, and its peak RSS would not compare with anvil's. Returns
    the pages touched. Reads the parent's /proc/PID/pagemap (bit 63: present)."""
    import ctypes
    page = os.sysconf("SC_PAGE_SIZE")
    ppid = os.getppid()
    touched = 0
    with open(f"/proc/{ppid}/maps") as maps, open(f"/proc/{ppid}/pagemap", "rb") as pagemap:
        for line in maps:
            f = line.split()
            if len(f) < 6 or not f[5].startswith("/") or not f[1].startswith("r"):
                continue  # anonymous, [vdso] and the like, or unreadable
            start, end = (int(v, 16) for v in f[0].split("-"))
            pagemap.seek(start // page * 8)
            entries = pagemap.read((end - start) // page * 8)
            for k in range(len(entries) // 8):
                if entries[8 * k + 7] & 0x80:  # bit 63 of the little-endian entry
                    ctypes.string_at(start + k * page, 1)
                    touched += 1
    return touched


def fork_per_phase(a, phase_main, preimport) -> None:
    """A child's --phase train,inference: runs preimport() (the framework's import: 2-3 s), then
    each phase in a process forked from this one, which first takes on this process's resident
    pages (adopt_parent_residency), so that each phase's peak RSS is what a fresh process would
    have, without paying the import again. Forked before any thread pool exists (the imports and
    the thread settings start none)."""
    phases = a.phase.split(",")
    if len(phases) == 1:
        phase_main(argparse.Namespace(**{**vars(a), "process": "fresh"}))
        return
    preimport()
    for phase in phases:
        sys.stdout.flush()
        sys.stderr.flush()
        rss_parent = rss_now_mb()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                adopt_parent_residency()
                phase_main(argparse.Namespace(**{**vars(a), "phase": phase, "process": {
                    "forked after the imports": True, "parent_rss_MB": rss_parent,
                    "rss_after_adopting_MB": rss_now_mb()}}))
            except BaseException:  # noqa: BLE001 -- report anything, then leave without cleanup
                import traceback
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            sys.exit(f"child: the {phase} phase failed (wait status {status})")


def loaded_allocator() -> str:
    """Which malloc the process really uses, read from its own memory map."""
    with open("/proc/self/maps") as f:
        maps = f.read()
    for lib, name in (("libjemalloc", "jemalloc"), ("libtcmalloc", "tcmalloc")):
        if lib in maps:
            return name
    return "glibc"


def mkl_cpu_type(torch) -> dict:
    """MKL's own view of the CPU: mkl_serv_cpu_detect() is the code-path index MKL dispatches on
    (0 = generic, 7 = AVX-512 on this build), called inside libtorch_cpu.so where MKL lives."""
    import ctypes
    try:
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
        return {"mkl_serv_cpu_detect": int(lib.mkl_serv_cpu_detect()),
                "mkl_serv_cpuiszen": int(lib.mkl_serv_cpuiszen())}
    except (OSError, AttributeError) as e:
        return {"error": str(e)}


def torch_facts(torch, cfg: dict) -> dict:
    show = torch.__config__.show()
    blas = next((l.strip(" -") for l in show.splitlines() if "Math Kernel Library" in l or "OpenBLAS" in l), "")
    dnn = next((l.strip(" -") for l in show.splitlines() if "MKL-DNN" in l or "oneDNN" in l), "")
    mk = torch.backends.mkldnn
    facts = {
        "torch_version": torch.__version__,
        "python": sys.version.split()[0],
        "blas": blas,
        "onednn": dnn,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "mkldnn_enabled": bool(mk.enabled),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "allocator": loaded_allocator(),
        "mkl_cpu": mkl_cpu_type(torch),
        "env": {k: os.environ[k] for k in ENV_OF_INTEREST if k in os.environ},
        "choice": {k: cfg.get(k) for k in ("mkl", "allocator", "omp_wait_policy", "sgd", "inference",
                                           "inference_by_model", "flush_denormal", "source",
                                           "requested", "fallbacks")},
    }
    try:
        facts["mkldnn_matmul_fp32_precision"] = str(mk.matmul.fp32_precision)
    except AttributeError:
        pass
    return facts


def setup_torch(threads: int, cfg: dict):
    import torch
    torch.set_num_threads(threads)
    try:
        # Eager mode never runs ops concurrently: one inter-op thread is enough.
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    # Denormals are never wanted in a benchmark (they only make x86 slower), so flush them.
    torch.set_flush_denormal(bool(cfg.get("flush_denormal", True)))
    return torch


def build_model(torch, name: str, seed: int = 1):
    nn = torch.nn
    fin, hidden, classes, act, p, _ = MODELS[name]
    torch.manual_seed(seed)
    layers, width = [], fin
    for h in hidden:
        layers += [nn.Linear(width, h), nn.Sigmoid() if act == "sigmoid" else nn.ReLU()]
        if p > 0:
            layers.append(nn.Dropout(p))
        width = h
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------
# CNN and LSTM networks (networks.md), written here: torchvision is not installed, and writing
# them keeps every layer visible next to the spec. NCHW (PyTorch's default memory format).
# ---------------------------------------------------------------------------------------------
def build_alexnet(nn, classes: int = 1000, dropout: float = 0.5):
    """networks.md's AlexNet: single tower, no LRN, no grouping (the Torch/Caffe/CNTK form of
    DLBench); dropout 0.5 after fc6 and fc7 as in the Caffe form (networks.md: optional; it costs
    two [B, 4096] masks)."""
    return nn.Sequential(
        nn.Conv2d(3, 96, 11, stride=4, padding=2), nn.ReLU(inplace=True),    # 96x55x55
        nn.MaxPool2d(3, 2),                                                   # 96x27x27
        nn.Conv2d(96, 256, 5, padding=2), nn.ReLU(inplace=True),             # 256x27x27
        nn.MaxPool2d(3, 2),                                                   # 256x13x13
        nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 384, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),            # 256x13x13
        nn.MaxPool2d(3, 2),                                                   # 256x6x6
        nn.Flatten(),
        nn.Linear(9216, 4096), nn.ReLU(inplace=True), nn.Dropout(dropout),
        nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(dropout),
        nn.Linear(4096, classes))


VGG16_CFG = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]


def build_vgg16(nn, classes: int = 1000):
    """13 conv 3x3 pad 1 + ReLU, 2x2/2 max-pools, adaptive average pool to 7x7, classifier
    25088 -> 4096 -> 4096 -> classes with ReLU and dropout 0.5 (torchvision's vgg16 without BN).
    The same module serves 224x224 ImageNet-size and 32x32 CIFAR inputs (the adaptive pool
    turns the 1x1 map into 7x7)."""
    layers, c = [], 3
    for v in VGG16_CFG:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
            c = v
    layers += [nn.AdaptiveAvgPool2d((7, 7)), nn.Flatten(),
               nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
               nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
               nn.Linear(4096, classes)]
    return nn.Sequential(*layers)


def build_resnet50(torch, classes: int = 1000):
    """Bottleneck ResNet-50 in torchvision's form (v1.5: the stride sits on the 3x3 conv of a
    stage's first block), stages [3, 4, 6, 3], convs without bias, BN after every conv,
    projection shortcut (1x1 conv + BN) where the shape changes. BN runs in training mode in the
    training step (batch statistics), in eval mode in the inference step."""
    nn = torch.nn

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin: int, width: int, stride: int):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu(y + idt)

    layers = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
              nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(2048, classes)]
    return nn.Sequential(*layers)


def build_cnn_mnist(nn):
    """The Keras MNIST CNN (Al-Bdour): 1x28x28 -> conv 3x3 (32) -> conv 3x3 (64) -> pool 2 ->
    9216 -> 128 -> 10, 'valid' convolutions."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 3), nn.ReLU(inplace=True),
        nn.Conv2d(32, 64, 3), nn.ReLU(inplace=True),
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
        nn.Linear(9216, 128), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(128, 10))


def build_cnn_cifar(nn):
    """The Keras CIFAR-10 CNN (Al-Bdour): 'same' 3x3 then 'valid' 3x3, twice; 64x6x6 = 2304."""
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(32, 32, 3), nn.ReLU(inplace=True),                          # 32x30x30
        nn.MaxPool2d(2), nn.Dropout(0.25),                                    # 32x15x15
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(64, 64, 3), nn.ReLU(inplace=True),                          # 64x13x13
        nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),                      # 2304
        nn.Linear(2304, 512), nn.ReLU(inplace=True), nn.Dropout(0.5),
        nn.Linear(512, 10))


def build_word_lm(torch, vocab: int, hidden: int, layers: int, init_range: float | None = None):
    """Word-level LSTM language model: embedding V x H -> nn.LSTM(H, H, layers) -> Linear H -> V
    at every step. Takes batch-major ids [B, T] (networks.md) and runs the LSTM time-major
    ([T, B, H], nn.LSTM's native layout, as anvil's lstm_layer); returns logits [T, B, V] and the
    final (h, c), each [layers, B, H]. PyTorch's gates are (input, forget, cell, output) as in
    networks.md; nn.LSTM has the two bias vectors b_ih and b_hh."""
    nn = torch.nn

    class WordLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.lstm = nn.LSTM(hidden, hidden, layers)
            self.fc = nn.Linear(hidden, vocab)
            if init_range is not None:
                for p in self.parameters():
                    nn.init.uniform_(p, -init_range, init_range)

        def forward(self, ids_bt, state=None):
            y, state = self.lstm(self.embed(ids_bt.t()), state)   # [T, B, H]
            return self.fc(y), state                                # [T, B, V]

    return WordLM()


def build_net(torch, name: str, seed: int = 1):
    """One of NETS, with its parameter count asserted against networks.md."""
    nn = torch.nn
    spec = NETS[name]
    torch.manual_seed(seed)
    if name == "alexnet":
        net = build_alexnet(nn, spec["classes"])
    elif name == "vgg16":
        net = build_vgg16(nn, spec["classes"])
    elif name == "resnet50":
        net = build_resnet50(torch, spec["classes"])
    elif name == "cnn_mnist":
        net = build_cnn_mnist(nn)
    elif name == "cnn_cifar":
        net = build_cnn_cifar(nn)
    else:
        net = build_word_lm(torch, spec["vocab"], spec["hidden"], spec["layers"], spec.get("init_range"))
    params = sum(p.numel() for p in net.parameters())
    expected = spec["params"] + spec["extra_params"]
    assert params == expected, (f"{name}: {params:,} parameters, networks.md says {spec['params']:,}"
                                f" (+{spec['extra_params']:,} for PyTorch's layout)")
    return net


def count_macs(torch, net, run_forward) -> float:
    """Multiply-accumulates of one forward pass, counted with hooks on Conv2d, Linear and LSTM
    (the layers that hold all but a fraction of a percent of the work)."""
    nn = torch.nn
    total = [0.0]

    def conv_hook(m, inp, out):
        total[0] += out.numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]

    def linear_hook(m, inp, out):
        total[0] += out.numel() * m.in_features

    def lstm_hook(m, inp, out):
        x = inp[0]
        steps_batch = x.shape[0] * x.shape[1]
        for layer in range(m.num_layers):
            i = m.input_size if layer == 0 else m.hidden_size
            total[0] += steps_batch * 4 * m.hidden_size * (i + m.hidden_size)

    hooks = []
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            hooks.append(m.register_forward_hook(linear_hook))
        elif isinstance(m, nn.LSTM):
            hooks.append(m.register_forward_hook(lstm_hook))
    try:
        with torch.no_grad():
            run_forward()
    finally:
        for h in hooks:
            h.remove()
    return total[0]


class NetStep:
    """The training and inference steps of a NETS model on synthetic data (networks.md, "How a
    step is timed").

    CNN: x ~ N(0, 1) [B, C, H, W], uniform labels; zero_grad + forward + F.cross_entropy (mean
    over B) + backward + SGD. Inference: forward under torch.no_grad() in eval mode.
    LSTM: a synthetic stream of uniform random ids laid out as [B, K*T + 1] (the PtbBatcher
    layout: row b is one stream), cycled window by window; the hidden state is carried from one
    mini-batch to the next and detached (truncated BPTT); loss = CE summed over T, averaged over
    B; backward; clip_grad_norm_(5); SGD lr 1.0. Inference: forward with the state carried, under
    torch.no_grad()."""

    WINDOWS = 8  # distinct LSTM windows cycled through (ids differ between consecutive steps)

    def __init__(self, torch, F, name: str, batch: int, train: bool, sgd_impl: str, amp=None):
        import contextlib
        self.torch, self.F, self.name, self.batch, self.train = torch, F, name, batch, train
        self.amp = amp or contextlib.nullcontext  # autocast_of(): the forward's context
        self.spec = spec = NETS[name]
        self.net = build_net(torch, name)
        self.net.train(train)
        g = torch.Generator().manual_seed(1)
        if spec["kind"] == "cnn":
            self.x = torch.randn(batch, *spec["input"], generator=g)
            self.y = torch.randint(0, spec["classes"], (batch,), generator=g)
        else:
            t = spec["steps"]
            stream = torch.randint(0, spec["vocab"], (batch, self.WINDOWS * t + 1), generator=g)
            # inputs [B, T] batch-major; targets stored time-major [T, B] like the logits.
            self.windows = [(stream[:, k * t:(k + 1) * t].contiguous(),
                             stream[:, k * t + 1:(k + 1) * t + 1].t().contiguous())
                            for k in range(self.WINDOWS)]
            self.k, self.state = 0, None
        self.opt = None
        if train:
            self.opt = make_sgd(torch, self.net.parameters(), spec["lr"], sgd_impl, spec["momentum"])

    def step(self):
        torch, F, net = self.torch, self.F, self.net
        if self.spec["kind"] == "cnn":
            if self.train:
                self.opt.zero_grad(set_to_none=True)
                with self.amp():
                    loss = F.cross_entropy(net(self.x), self.y)
                loss.backward()
                self.opt.step()
            else:
                with torch.no_grad(), self.amp():
                    net(self.x)
            return
        x, y = self.windows[self.k]
        self.k = (self.k + 1) % self.WINDOWS
        if self.train:
            self.opt.zero_grad(set_to_none=True)
            state = None if self.state is None else tuple(s.detach() for s in self.state)
            with self.amp():
                logits, self.state = net(x, state)                     # [T, B, V]
                v = logits.shape[-1]
                loss = F.cross_entropy(logits.reshape(-1, v), y.reshape(-1), reduction="sum") / self.batch
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), self.spec["clip"])
            self.opt.step()
        else:
            with torch.no_grad(), self.amp():
                _, self.state = net(x, self.state)

    def macs_per_sample(self) -> float:
        if self.spec["kind"] == "cnn":
            was = self.net.training
            self.net.eval()  # no BN running-stat update from the count
            try:
                macs = count_macs(self.torch, self.net, lambda: self.net(self.x[:1]))
            finally:
                self.net.train(was)
            return macs
        x = self.windows[0][0][:1]
        return count_macs(self.torch, self.net, lambda: self.net(x))


def make_sgd(torch, params, lr: float, impl: str, momentum: float = 0.0):
    kw = {"lr": lr, "momentum": momentum, "weight_decay": 0.0}
    if impl == "foreach":
        kw["foreach"] = True
    elif impl == "fused":
        kw["fused"] = True
    else:
        kw["foreach"] = False
    return torch.optim.SGD(params, **kw)


def autocast_of(torch, precision: str):
    """A factory of the context the forward and loss run in: torch.autocast on the CPU for bf16
    (its CPU op lists: conv and linear in bf16, the losses and reductions in fp32), nothing for
    fp32. Returns (factory, description) -- the description goes into the row's config."""
    import contextlib
    if precision == "fp32":
        return contextlib.nullcontext, None
    if precision == "bf16":
        return (lambda: torch.autocast("cpu", dtype=torch.bfloat16),
                'torch.autocast("cpu", dtype=torch.bfloat16) around forward + loss')
    sys.exit(f"--precision {precision}: the CPU peer runs fp32 or bf16 (fp16 needs GradScaler, not wired)")


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
    flat = [t for r in per_rep for t in r]
    rep_means = [statistics.fmean(r) for r in per_rep]
    # Training counted as 3x the forward FLOPs (the nominal count anvil_bench uses).
    flops = 2.0 * macs * batch * (3.0 if train else 1.0)
    out = {
        "peer": "pytorch", "model": a.model, "phase": "train_step" if train else "inference_step",
        "threads": a.threads, "batch": batch, "params": sum(p.numel() for p in ns.net.parameters()),
        "params_networks_md": spec["params"], "macs_per_sample": macs,
        "optimizer": {"sgd_lr": spec["lr"], "momentum": spec["momentum"], "clip_grad_norm": spec.get("clip")}
        if train else None,
        "warmup_steps": a.warmup, "reps": a.reps, "steps": len(flat), "steps_per_rep": [len(r) for r in per_rep],
        "median_s": statistics.median(flat), "mean_s": statistics.fmean(flat), "min_s": min(flat),
        "rep_means_s": rep_means, "median_of_rep_means_s": statistics.median(rep_means),
        "pct_peak": pct_of_peak(flops, statistics.median(flat), a),
        "peak_gflops_per_core": a.peak or None, "peak_source": a.peak_source,
        "peak_rss_MB": peak_rss_mb(), "process": a.process, "rss_at_start_MB": rss_start, "rss_after_import_MB": rss_import,
        "precision": a.precision,
        "config": dict(torch_facts(torch, dict(cfg, inference="eager", inference_by_model=None)),
                       autocast=autocast),
    }
    if spec["kind"] == "lstm":
        out["seq_len"] = spec["steps"]
    if a.profile:
        out["profile_top_ops"] = profile_ops(torch, ns.step, a.profile)
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
    flat = [t for r in per_rep for t in r]
    rep_means = [statistics.fmean(r) for r in per_rep]
    flops = 3.0 * fwd_flops if train else fwd_flops
    out = {
        "peer": "pytorch", "model": a.model, "phase": "train_step" if train else "inference_step",
        "threads": a.threads, "batch": batch, "params": params,
        "warmup_steps": a.warmup, "reps": a.reps, "steps": len(flat), "steps_per_rep": [len(r) for r in per_rep],
        # median_s / mean_s over all timed steps; median_of_rep_means_s is the statistic anvil_bench
        # reports (Google Benchmark: mean time per iteration of each repetition, median over them).
        "median_s": statistics.median(flat), "mean_s": statistics.fmean(flat), "min_s": min(flat),
        "rep_means_s": rep_means, "median_of_rep_means_s": statistics.median(rep_means),
        "pct_peak": pct_of_peak(flops, statistics.median(flat), a),
        "peak_gflops_per_core": a.peak or None, "peak_source": a.peak_source,
        "peak_rss_MB": peak_rss_mb(), "process": a.process, "rss_at_start_MB": rss_start, "rss_after_import_MB": rss_import,
        "precision": a.precision,
        "config": dict(torch_facts(torch, cfg), autocast=autocast),
    }
    if train and a.breakdown:
        out["phases"] = breakdown(torch, F, net, opt, x, y, a)
    if a.profile:
        out["profile_top_ops"] = profile_ops(torch, step, a.profile)
    print(json.dumps(out), flush=True)


def model_params_and_flops(torch, net, batch: int) -> tuple[int, float]:
    """Parameter count and forward FLOPs of an FCN/MLP (a Sequential of nn.Linear and
    activations) at `batch`: 2 * MACs of the Linear layers. Training is counted as 3x forward by
    the caller, the nominal count anvil_bench uses, so that pct_peak is comparable (autograd
    actually skips the input gradient of the first layer, which x does not need). Call it on the
    dense model, before any to_mkldnn conversion."""
    params = sum(p.numel() for p in net.parameters())
    fwd_flops = 2.0 * batch * sum(m.in_features * m.out_features for m in net if isinstance(m, torch.nn.Linear))
    if params == 0 or fwd_flops == 0:
        raise RuntimeError(f"model_params_and_flops: {params} parameters, {fwd_flops} FLOPs: not a dense "
                           "nn.Linear model (count before the mkldnn conversion)")
    return params, fwd_flops


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
                      "median_s": {c: statistics.median(v) for c, v in times.items()}}), flush=True)


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
                      "sum_s": sum(r["median_s"] for r in rows)}), flush=True)


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


# ---------------------------------------------------------------------------------------------
# Launcher side
# ---------------------------------------------------------------------------------------------
def load_config(spec: str) -> dict:
    if spec == "preset":
        return dict(PRESET)
    with open(spec) as f:
        cfg = json.load(f)
    return cfg.get("chosen", cfg)


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

    out = {"chosen": chosen, "measurements": report}
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
