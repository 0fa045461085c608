# SPDX-License-Identifier: Apache-2.0
"""How the PyTorch peer (pytorch_models.py) configures its processes: the configuration
candidates and PRESET, the MKL shim, the allocators and their fallbacks (Note [Peer fallbacks]),
the FMA peak, a child's environment and its launch (run_child), the per-phase fork of a child,
and, inside a child, what PyTorch runs with (threads, MKL code path, allocator, resident memory).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import provenance as P  # noqa: E402  (scripts/provenance.py: Note [Provenance])


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


# The command line that starts each child (the peer's one entry point).
PEER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch_models.py")


def run_child(cfg: dict, threads: int, args: list[str], timeout: float = 1800) -> list[dict]:
    """Runs pytorch_models.py's `child`/`probe-gemm` subcommand in a fresh process under `cfg`
    and returns the JSON objects it printed."""
    cmd = [sys.executable, PEER_SCRIPT, *args, "--cfg-json", json.dumps(cfg)]
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


def peer_provenance(torch, on_gpu: bool = False) -> dict:
    """The provenance block of a PyTorch peer row (Note [Provenance]). Take it after the row's
    memory fields: on the GPU it asks torch for the device; on the CPU nvidia-smi, so that a CPU
    peer never initialises CUDA."""
    return P.provenance(P.torch_libraries(torch), torch=torch if on_gpu else None)


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


# ---------------------------------------------------------------------------------------------
# Launcher side
# ---------------------------------------------------------------------------------------------
def load_config(spec: str) -> dict:
    if spec == "preset":
        return dict(PRESET)
    with open(spec) as f:
        cfg = json.load(f)
    return cfg.get("chosen", cfg)
