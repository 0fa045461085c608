#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The parts of the GPU study (issue 37), each sized for one call of at most 10 minutes on an
H100/H200: what each runs, its time estimate, and running it under a time budget.

    python3 scripts/gpu_study.py plan --part steps [--models ..] [--batches ..] [--reps 5] [--budget 540]
    python3 scripts/gpu_study.py run  --part steps --out DIR/steps --bench KIT/build/bench/anvil_bench ...

scripts/gpu_kit.sh is the entry point (`run --part X`, `run --dry-run --part X`); this script
needs no GPU, no kit and no torch to plan. Parts (the tests part is gpu_kit.sh's own test stage):
  steps   per model and GPU batch of networks.md's sweep: one anvil_bench process timing the
          training and inference step for the step definitions pinned, resident, pageable (FP32)
          and resident TF32 (the rows bench/model_bench.cpp registers), --benchmark_repetitions
          (5); then PyTorch's rows for the same model and batch (bench/peers/pytorch_gpu_models.py,
          configs defaults and best); last, one torch.compile job per model (--compile).
  layers  the per-layer conv table (bench/kernel_bench.cpp): every CUDA conv2d variant,
          cuda.cudnn.tf32 included, and the default, on every distinct conv layer of AlexNet and
          VGG16, then ResNet-50; one repetition (each row is GPU time over >= 50 ms).
  lstm    anvil's kernel/lstm/.../device:cuda rows (every CUDA lstm variant) of LSTM-32/64 at batches 128/256/512,
          5 repetitions, and PyTorch's cuDNN LSTM (bench/peers/pytorch_gpu_lstm.py: layers and
          whole steps, FP32 and TF32, training and inference).
  memory  per model: the largest training batch (resident, FP32) that runs without running out of
          memory, for anvil (one anvil_bench process per probe; an allocation failure is the
          benchmark's error row "out of memory on cuda:...") and PyTorch (--probe-max-batch):
          doubling from the sweep's largest batch up to a cap, then bisection to 1/16.
  peers   PyTorch alone: the steps part's PyTorch jobs, the LSTM peer and torch.compile.
  profile where a step's host time goes: each model's training and inference step (resident,
          FP32 and TF32, at its first --batches or the 2026-11-26 batch) with
          ANVIL_VERBOSE=host_profile; the per-variant tables land in host_profile_<model>.txt
          (Note [Host profile], engine/dispatch/host_profile.h).
Each job runs under `timeout` with what is left of --budget; a job whose estimate exceeds what is
left is not started. DIR/jobs.tsv has one line per job (status, seconds, estimate, name) and
DIR/missing.txt names every job that did not run or did not finish, so the report names them.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

import provenance as P  # scripts/provenance.py (Note [Provenance]); this script's folder is on the path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# networks.md's GPU mini-batch sweep (models/{fcn,cnn,lstm}.cpp ModelInfo::gpu_batches).
SWEEP = {"fcn5": [32, 64, 128, 256, 512, 1024], "fcn8": [32, 64, 128, 256, 512, 1024],
         "alexnet": [16, 32, 64, 128], "resnet50": [8, 16, 32, 64], "vgg16": [16, 32, 64],
         "lstm32": [128, 256, 512], "lstm64": [128, 256, 512]}
MODELS = list(SWEEP)
COMPILE_BATCH = {"fcn5": 64, "fcn8": 64, "alexnet": 64, "resnet50": 32, "vgg16": 32,
                 "lstm32": 128, "lstm64": 128}  # the batches of the 2026-11-26 H200 run
PROBE_CAP = {"fcn5": 65536, "fcn8": 65536, "alexnet": 8192, "resnet50": 4096, "vgg16": 4096,
             "lstm32": 16384, "lstm64": 16384}
PARTS = ("tests", "steps", "layers", "lstm", "memory", "peers", "profile")
DEFAULT_BUDGET = 540  # s: a 600 s call less the kit's unpacking and library checks
# Time model (seconds), from Google Benchmark's iteration probing: a benchmark with MinTime m
# runs ~2.3 m in its first repetition (1, 10, 100 ... iterations, then 1.4 m) and ~1.4 m in
# each further one. bench/model_bench.cpp: m = 1.0 for a GPU step row, 0.5 for its TF32 row.
FIRST_REP, NEXT_REP = 2.3, 1.4
BUILD_S = {"fcn5": 1.5, "fcn8": 1.7}  # host-side model construction (118-131 M parameters)


def rep_time(min_time, reps):
    return (FIRST_REP + NEXT_REP * (reps - 1)) * min_time


def est_anvil_steps(model, reps, min_time=1.0):
    # 2 phases x (pinned, resident, pageable at m + resident TF32 at m / 2); the step object
    # is rebuilt whenever the step definition changes: 4 builds per phase.
    return (4 + 2 * (3 * rep_time(min_time, reps) + rep_time(min_time / 2, reps))
            + 8 * BUILD_S.get(model, 0.5))


def est_torch_steps(model, reps):
    # 12 rows (defaults: copied, pinned, resident, resident TF32; best: resident FP32/TF32; per
    # phase): warm-up + reps x 0.2 s, a model build each; best adds cuDNN's exhaustive search.
    return 8 + 12 * (0.3 + reps * 0.22 + BUILD_S.get(model, 0.3)) + 4 * 1.5


def est_compile(model):
    return 150.0  # two compilations (training and inference step); ResNet-50's are the longest


def sub_budget(models, batches):
    return [(m, b) for m in models for b in (batches or SWEEP[m])]


class Job:
    def __init__(self, name, argv, estimate, cap=None, stdout=None, append=False, env=None,
                 on_fail=None, dynamic=None, stderr=None):
        self.name, self.argv, self.estimate, self.cap = name, argv, estimate, cap
        self.stderr = stderr     # a file of its own for the job's stderr (default: stderr.log)
        self.stdout, self.append, self.env = stdout, append, env or {}
        self.on_fail = on_fail   # argv whose output is appended to stdout when the job fails
        self.dynamic = dynamic   # a function(runner) instead of argv (the memory bisection)


def anvil_args(a, models, extra=()):
    args = [a.bench, "--anvil_gpu=on", f"--anvil_models={','.join(models)}", "--anvil_kernels=off",
            "--anvil_threads=1", "--anvil_peak=1", "--benchmark_counters_tabular=false",
            f"--anvil_gpu_min_time={a.min_time:g}", *extra]
    return args + shlex.split(os.environ.get("ANVIL_GPU_BENCH_EXTRA", ""))


def reps_args(reps):
    return [f"--benchmark_repetitions={reps}", "--benchmark_display_aggregates_only=true"] if reps > 1 else []


def torch_steps_job(a, m, b):
    peer = [sys.executable if not a.python else a.python, "bench/peers/pytorch_gpu_models.py",
            "--model", m, "--batch", str(b), "--configs", "defaults,best", "--reps", str(a.reps)]
    return Job(f"pytorch {m} b{b} defaults,best", peer, est_torch_steps(m, a.reps), cap=240,
               stdout="peer_steps.jsonl", append=True)


def compile_job(a, m):
    b = COMPILE_BATCH[m]
    argv = [a.python or sys.executable, "bench/peers/pytorch_gpu_models.py", "--model", m, "--batch", str(b),
            "--configs", "compile", "--math", "fp32", "--reps", str(a.reps)]
    return Job(f"pytorch {m} b{b} torch.compile", argv, est_compile(m), cap=300, stdout="peer_compile.jsonl",
               append=True, on_fail=argv + ["--explain", "torch.compile did not finish: {why}"])


def steps_jobs(a, with_anvil=True):
    jobs = []
    for m, b in sub_budget(a.models, a.batches):
        if with_anvil:
            flt = f"^model/{m}/(train_step|inference_step)/batch:{b}/device:cuda/"
            argv = anvil_args(a, [m], [f"--anvil_batches={b}", "--anvil_gpu_inputs=pinned,resident,pageable",
                                       f"--benchmark_filter={flt}", *reps_args(a.reps),
                                       f"--benchmark_out={{out}}/anvil_{m}_b{b}.json",
                                       "--benchmark_out_format=json"])
            jobs.append(Job(f"anvil {m} b{b} steps", argv, est_anvil_steps(m, a.reps, a.min_time), cap=300,
                            stdout=f"anvil_{m}_b{b}.txt"))
        jobs.append(torch_steps_job(a, m, b))
    if a.compile:
        jobs += [compile_job(a, m) for m in a.models]
    return jobs


def layers_jobs(a):
    groups = [("alexnet,vgg16", "(alexnet|vgg16)", 160), ("resnet50", "resnet50", 240)]
    jobs = []
    for name, rx, est in groups:
        if not any(m in a.models for m in name.split(",")):  # --models picks the groups
            continue
        argv = anvil_args(a, ["fcn5"], [f"--benchmark_filter=^kernel/conv2d/.*/{rx}:.*/device:cuda",
                                         f"--benchmark_out={{out}}/anvil_conv_{name.replace(',', '_')}.json",
                                         "--benchmark_out_format=json"])
        jobs.append(Job(f"anvil conv layers {name}", argv, est, cap=420,
                        stdout=f"anvil_conv_{name.replace(',', '_')}.txt", env={"ANVIL_CUDNN_LOG": "1"}))
    return jobs


def lstm_jobs(a):
    flt = "^kernel/lstm/[^/]+/(forward_training|backward)/(lstm32|lstm64):[^/]+/batch:(128|256|512)/device:cuda"
    argv = anvil_args(a, ["lstm32", "lstm64"], [f"--benchmark_filter={flt}", *reps_args(a.reps),
                                                "--benchmark_out={out}/anvil_gpu_lstm.json",
                                                "--benchmark_out_format=json"])
    # 3 CUDA lstm variants at most x 2 passes x 6 problems, MinTime 0.5 s.
    anvil = Job("anvil GPU lstm rows", argv, 4 + 36 * rep_time(0.5, a.reps), cap=360, stdout="anvil_gpu_lstm.txt")
    peer = Job("pytorch cuDNN LSTM (layers, steps; fp32, tf32)",
               [a.python or sys.executable, "bench/peers/pytorch_gpu_lstm.py", "--math", "fp32,tf32",
                "--reps", str(a.reps), "--min-time", "0.3"], 100, cap=240, stdout="peer_pytorch_cuda_lstm.jsonl")
    return [anvil, peer]


def memory_jobs(a):
    jobs = []
    for m in a.models:
        jobs.append(Job(f"anvil {m} largest training batch", None, 100, dynamic=lambda r, m=m: anvil_probe(r, m)))
        argv = [a.python or sys.executable, "bench/peers/pytorch_gpu_models.py", "--model", m, "--probe-max-batch",
                "--start", str(SWEEP[m][-1]), "--cap", str(PROBE_CAP[m])]
        jobs.append(Job(f"pytorch {m} largest training batch", argv, 40, cap=240, stdout="peer_memory.jsonl",
                        append=True))
    return jobs


def peers_jobs(a):
    jobs = steps_jobs(a, with_anvil=False)
    lstm = lstm_jobs(a)[1]
    return [lstm] + jobs


def profile_jobs(a):
    """Host time per dispatched variant (Note [Host profile]) of each model's training and
    inference step at its first batch of the 2026-11-26 run, batch resident, FP32 and TF32: the
    tables go to stderr (host_profile_<model>.txt), the rows' counters to the JSON."""
    jobs = []
    for m in a.models:
        b = a.batches[0] if a.batches else COMPILE_BATCH[m]
        flt = f"^model/{m}/(train_step|inference_step)/batch:{b}/device:cuda/input:resident/"
        argv = anvil_args(a, [m], [f"--anvil_batches={b}", "--anvil_gpu_inputs=resident",
                                   f"--benchmark_filter={flt}",
                                   f"--benchmark_out={{out}}/anvil_profile_{m}_b{b}.json",
                                   "--benchmark_out_format=json"])
        # 2 phases x (FP32 at m + TF32 at m / 2), one repetition; the model built once.
        est = 4 + 2 * (rep_time(a.min_time, 1) + rep_time(a.min_time / 2, 1)) + 2 * BUILD_S.get(m, 0.5)
        jobs.append(Job(f"anvil {m} b{b} host profile", argv, est, cap=240, stdout=f"anvil_profile_{m}.txt",
                        env={"ANVIL_VERBOSE": "host_profile"}, stderr=f"host_profile_{m}.txt"))
    return jobs


def jobs_for(a):
    jobs = {"steps": steps_jobs, "layers": layers_jobs, "lstm": lstm_jobs, "memory": memory_jobs,
            "peers": peers_jobs, "profile": profile_jobs}[a.part](a)
    if a.compile_only:
        jobs = [j for j in jobs if "torch.compile" in j.name]
    return jobs


# ------------------------------------------------------------------------------------------ run


class Runner:
    def __init__(self, a):
        self.a, self.out, self.t0 = a, a.out, time.monotonic()
        os.makedirs(self.out, exist_ok=True)
        self.jobs_tsv = open(os.path.join(self.out, "jobs.tsv"), "a")
        self.missing = open(os.path.join(self.out, "missing.txt"), "a")
        # The part's provenance (Note [Provenance]): provenance.json, and in each record this
        # runner writes; anvil_bench's JSON carries its own, the peers' rows theirs.
        self.provenance = P.provenance()
        with open(os.path.join(self.out, "provenance.json"), "w") as f:
            json.dump({"provenance": self.provenance}, f, indent=2)

    def left(self):
        return self.a.budget - (time.monotonic() - self.t0)

    def log(self, status, seconds, estimate, name):
        self.jobs_tsv.write(f"{status}\t{seconds:.0f}\t{estimate:.0f}\t{name}\n")
        self.jobs_tsv.flush()
        print(f"[{time.monotonic() - self.t0:5.0f} s] {status}: {name} ({seconds:.0f} s, estimate {estimate:.0f} s)",
              flush=True)

    def miss(self, name, why):
        self.missing.write(f"{name}: {why}\n")
        self.missing.flush()

    def call(self, argv, stdout_path, append, env, limit, stderr_name=None):
        """Runs argv under `timeout` (-k 10); returns (exit status, seconds); 124/137 = timed out."""
        argv = [s.replace("{out}", self.out) for s in argv]
        full = ["timeout", "-k", "10", str(max(1, int(limit))), *argv]
        t0 = time.monotonic()
        with open(stdout_path, "a" if append else "w") as f, \
                open(os.path.join(self.out, stderr_name or "stderr.log"), "a") as err:
            err.write(f"== {shlex.join(argv)}\n")
            err.flush()
            rc = subprocess.call(full, stdout=f, stderr=err, cwd=ROOT, env={**os.environ, **env})
        return rc, time.monotonic() - t0

    def run(self, job):
        left = self.left()
        if job.estimate > left:
            self.log("not run", 0, job.estimate, job.name)
            self.miss(job.name, f"not run: {left:.0f} s of the part's {self.a.budget:.0f} s budget were left, "
                                f"it needs about {job.estimate:.0f} s (run it in a call of its own)")
            return
        if job.dynamic:
            t0 = time.monotonic()
            status = job.dynamic(self)
            self.log(status, time.monotonic() - t0, job.estimate, job.name)
            return
        limit = min(left, job.cap or left)
        rc, secs = self.call(job.argv, os.path.join(self.out, job.stdout), job.append, job.env, limit,
                             job.stderr)
        status = "ok" if rc == 0 else ("timeout" if rc in (124, 137) else f"exit {rc}")
        self.log(status, secs, job.estimate, job.name)
        if rc != 0:
            why = f"timed out after {limit:.0f} s" if status == "timeout" else f"exited {rc} (stderr.log)"
            self.miss(job.name, why)
            if job.on_fail:
                self.call([s.replace("{why}", why) for s in job.on_fail], os.path.join(self.out, job.stdout),
                          True, job.env, 60)


def probe_row(path):
    """(fits, peak MB, message) of a single anvil_bench memory probe's JSON, or None."""
    try:
        with open(path) as f:
            rows = [b for b in json.load(f).get("benchmarks", []) if b.get("run_type", "iteration") != "aggregate"]
    except (OSError, ValueError):
        return None
    if not rows:
        return None
    b = rows[0]
    if b.get("error_occurred"):
        return False, None, b.get("error_message", "error")
    return True, b.get("gpu_alloc_peak_MB"), ""


def anvil_probe(r, m):
    """Doubling from the sweep's largest batch to PROBE_CAP, then bisection to 1/16: one
    anvil_bench process per probe (an out-of-memory error leaves no state behind)."""
    results = os.path.join(r.out, "anvil_memory.jsonl")

    def fits(b):
        flt = f"^model/{m}/train_step/batch:{b}/device:cuda/input:resident/min_time"
        path = os.path.join(r.out, f"anvil_probe_{m}_b{b}.json")
        argv = anvil_args(r.a, [m], [f"--anvil_batches={b}", "--anvil_gpu_inputs=resident",
                                     f"--benchmark_filter={flt}", f"--benchmark_out={path}",
                                     "--benchmark_out_format=json"])
        rc, secs = r.call(argv, os.path.join(r.out, "anvil_probe.txt"), True, {}, min(150, max(1, r.left())))
        res = probe_row(path)
        if res is None:
            rec = {"model": m, "batch": b, "fits": None, "why": f"no result (exit {rc} after {secs:.0f} s)"}
        else:
            ok, peak, msg = res
            oom = "out of memory" in msg
            rec = {"model": m, "batch": b, "fits": ok if ok or oom else None, "gpu_alloc_peak_MB": peak,
                   "why": msg if not ok else "", "seconds": round(secs, 1)}
        with open(results, "a") as f:
            f.write(json.dumps(dict(rec, kind="memory_probe", engine="anvil", provenance=r.provenance)) + "\n")
        return rec["fits"]

    lo, hi, b, status = 0, None, SWEEP[m][-1], "ok"
    while b <= PROBE_CAP[m]:
        if r.left() < 20:
            status = "budget"
            break
        ok = fits(b)
        if ok is None:
            status = "error"
            break
        if ok:
            lo, b = b, b * 2
        else:
            hi = b
            break
    while status == "ok" and hi is not None and hi - lo > max(1, lo // 16):
        if r.left() < 20:
            status = "budget"
            break
        mid = (lo + hi) // 2
        ok = fits(mid)
        if ok is None:
            status = "error"
            break
        lo, hi = (mid, hi) if ok else (lo, mid)
    note = {"ok": "" if hi is not None else "cap reached without running out of memory",
            "budget": "stopped: the part's budget ran out", "error": "stopped: a probe failed other than by "
            "running out of memory (anvil_memory.jsonl, stderr.log)"}[status]
    with open(results, "a") as f:
        f.write(json.dumps({"kind": "max_batch", "engine": "anvil", "model": m, "max_batch": lo,
                            "first_oom": hi, "cap": PROBE_CAP[m], "note": note,
                            "provenance": r.provenance}) + "\n")
    if status != "ok":
        r.miss(f"anvil {m} largest training batch", note)
    return status


# ----------------------------------------------------------------------------------------- plan


def plan(a):
    if a.part == "tests":
        print("part tests: the GPU test binaries of the kit (gpu_kit.sh's test stage), every Catch2 case")
        print("  on its own under `timeout` ANVIL_GPU_TEST_TIMEOUT (default 120 s; 60 s suggested):")
        for t in ("test_cuda_lazy_load", "test_cuda_gemm", "test_cuda_runtime", "test_cuda_pool_bn"):
            print(f"  KIT/build/tests/cuda/{t}  -> {a.out}/{t}.txt, {t}.cases.txt")
        print("estimate: about 150-300 s (84 cases took 150 s on the H200, 2026-11-26); budget 540 s")
        return 0
    jobs = jobs_for(a)
    total = 0.0
    print(f"part {a.part}: {len(jobs)} jobs into {a.out}/ (budget {a.budget:.0f} s; reps {a.reps})")
    for j in jobs:
        total += j.estimate
        cmd = "(bisection: one anvil_bench process per probe batch)" if j.dynamic else \
            shlex.join([s.replace("{out}", a.out) for s in j.argv])
        print(f"  ~{j.estimate:4.0f} s  {j.name}\n           {cmd}")
    print(f"estimate: {total:.0f} s in all ({total / 60:.1f} min); budget per call {a.budget:.0f} s")
    if total > a.budget:
        print("  more than one call: the jobs past the budget are not started and are named in missing.txt;")
        print("  calls that fit (each its own `gpu_kit.sh run --part ...`):")
        for line in split_calls(a, jobs):
            print(f"    {line}")
    return 0


def split_calls(a, jobs):
    """Greedy calls of consecutive models/batches whose estimates fit the budget."""
    if a.part not in ("steps", "peers", "memory"):
        return [f"--part {a.part} (the jobs in order; rerun the missing ones)"]
    per = {}
    for j in jobs:
        m = re.match(r"\S+ (\S+?)( b(\d+))? ", j.name + " ")
        if m and "compile" not in j.name:
            key = (m[1], int(m[3]) if m[3] else None)
            per[key] = per.get(key, 0) + j.estimate
    calls, cur, cur_t = [], [], 0.0
    for key, t in per.items():
        if cur and (cur_t + t > a.budget or key[0] != cur[0][0] and a.part != "memory"):
            calls.append(cur)
            cur, cur_t = [], 0.0
        cur.append(key)
        cur_t += t
    if cur:
        calls.append(cur)
    lines = []
    for c in calls:
        models = ",".join(dict.fromkeys(k[0] for k in c))
        batches = ",".join(str(k[1]) for k in c if k[1] is not None)
        est = sum(per[k] for k in c)
        extra = f" --batches {batches}" if batches and a.part != "memory" else ""
        nc = " --no-compile" if a.part != "memory" else ""
        lines.append(f"--part {a.part} --models {models}{extra}{nc}   (~{est:.0f} s)")
    if a.compile and a.part in ("steps", "peers"):
        lines.append(f"--part peers --compile-only --models {','.join(a.models)}   "
                     f"(~{sum(est_compile(m) for m in a.models):.0f} s: split in two calls if over budget)")
    return lines


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("plan", "run"))
    p.add_argument("--part", required=True, choices=PARTS)
    p.add_argument("--out", default="results/gpu-study/PART")
    p.add_argument("--bench", default="KIT/build/bench/anvil_bench")
    p.add_argument("--python", default="", help="the Python that has torch (default: this one)")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--batches", default="", help="batches of the sweep to run (default: each model's sweep)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET)
    p.add_argument("--min-time", type=float, default=1.0,
                   help="seconds per anvil GPU step row (--anvil_gpu_min_time; TF32 rows half)")
    p.add_argument("--no-compile", dest="compile", action="store_false")
    p.add_argument("--compile-only", action="store_true", help="steps/peers: only the torch.compile jobs")
    a = p.parse_args(argv)
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in SWEEP:
            p.error(f"--models: unknown model {m} ({', '.join(MODELS)})")
    a.batches = [int(b) for b in a.batches.split(",") if b]
    if a.reps < 1:
        p.error("--reps: at least 1")
    if not 0.05 <= a.min_time <= 10:
        p.error(f"--min-time: 0.05 to 10 seconds, not {a.min_time:g}")
    a.out = a.out.replace("PART", a.part)
    return a


def main(argv):
    a = parse(argv)
    if a.action == "plan":
        return plan(a)
    if a.part == "tests":
        print("gpu_study.py: the tests part is run by scripts/gpu_kit.sh", file=sys.stderr)
        return 2
    jobs = jobs_for(a)
    r = Runner(a)
    for j in jobs:
        r.run(j)
    bad = sum(1 for line in open(os.path.join(a.out, "missing.txt")) if line.strip())
    print(f"gpu_study.py: part {a.part} done in {time.monotonic() - r.t0:.0f} s; {bad} job(s) in missing.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
