#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The benchmark suites cover what is registered, and each family's smoke run gives valid JSON.

Usage: test_bench_suite.py path/to/anvil_bench path/to/anvil   (a CTest entry, bench/CMakeLists.txt)

1. Coverage: `anvil_bench --benchmark_list_tests` with every registered model (`anvil models`),
   phases, kernels and threads 1,2 lists, for every model, the training and inference step and the
   three phases at the paper's batch and each thread count; for every GEMM variant (the `gemm`
   variant table printed by `anvil info`) and `default`, all four transpose modes; for every op of
   the kernel family that the models generate, rows of their layers; the peak benchmarks.
   Every table but gemm, every variant: the kernel family over the op drivers' groups
   (--anvil_kernel_groups=on, --anvil_mode=check) validates each variant on at least its driver's
   stated number of problems per group (a decline because of this machine or of the dtype exempt). Registering a model or a variant is enough to be covered: nothing here is a
   hand-kept list of names.
   The GEMM shape groups: `--anvil_gemm_shapes=all` lists every FCN/LSTM model's layer GEMMs and the
   DeepBench-style set, and an unknown group fails with a message naming the choices.
2. Smoke: one short benchmark of each family (peak, gemm, model, kernel) runs and writes JSON
   with its counters, without an error.
3. A variant that disagrees with `ref` is skipped with an error, never timed: the test-only GEMM
   variant `test.broken` (bench/broken_gemm_variant.cpp, --anvil_test_broken_variant=on) must come out
   with error_occurred and a validation message, in every transpose mode and every GEMM remedy.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from provenance_check import provenance_problems  # noqa: E402

bench, anvil = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


# The registry and the variant tables, as the library reports them.
models = {}  # name -> paper CPU batch
for line in run([anvil, "models"]).splitlines()[1:]:
    fields = line.split()
    models[fields[0]] = int(fields[3])
tables = {}
in_tables = False
for line in run([anvil, "info", "--no-peak"]).splitlines():
    if line.startswith("variant tables"):
        in_tables = True
    elif in_tables and line.startswith("  "):
        op, variants = line.split(None, 1)
        tables[op] = [v.strip() for v in variants.split(",")]
    elif in_tables:
        in_tables = False
check(len(models) >= 13, f"anvil models lists {len(models)} models")
check("gemm" in tables and "conv2d" in tables and "lstm" in tables, f"variant tables: {sorted(tables)}")

listed = run([bench, "--benchmark_list_tests", "--anvil_models=" + ",".join(models), "--anvil_kernels=on",
              "--anvil_phases=on", "--anvil_threads=1,2"]).splitlines()
names = set(listed)


def has(prefix):
    return any(n.startswith(prefix) for n in names)


for model, batch in models.items():
    for phase in ["train_step", "inference_step", "forward", "backward", "update"]:
        for t in (1, 2):
            check(has(f"model/{model}/{phase}/batch:{batch}/threads:{t}/"),
                  f"no model/{model}/{phase}/batch:{batch}/threads:{t}")
# CUDA variants are listed by `anvil info` whenever the backend library loads (also without a
# GPU); their benchmarks end in device:cuda instead of threads:T and exist only with a GPU.
gpu_listed = any("/device:cuda" in n for n in names)
for variant in [v for v in tables["gemm"] if v != "ref"] + ["default"]:
    gpu = variant.startswith("cuda.")
    if gpu and not gpu_listed:
        continue
    tail = "device:cuda" if gpu else "threads:1"
    for mode in ["NN", "NT", "TN", "TT"]:
        check(has(f"gemm/{variant}/{mode}/dlbench_1024x2048x26752/{tail}/"),
              f"no gemm/{variant}/{mode} on the DLBench shape")
    for remedy in ["transpose_then_NN/NT", "transpose_then_NN/TN", "transpose_then_NN/TT", "fold_sgd",
                   "grad_then_update"]:
        check(has(f"gemm_remedy/{variant}/{remedy}/dlbench_1024x2048x26752/{tail}/"),
              f"no gemm_remedy/{variant}/{remedy} on the DLBench shape")
kernel_ops = {n.split("/")[1] for n in names if n.startswith("kernel/")}
for op in ["conv2d", "max_pool2d", "adaptive_avg_pool2d", "batch_norm2d", "lstm"]:
    check(op in kernel_ops, f"the kernel family has no {op} benchmarks of the models' layers")
check(has("kernel/conv2d/cpu.onednn/backward_data/resnet50:layer1.0.conv1/batch:16/device:cpu/threads:2/"),
      "the kernel rows name <model>:<layer>/batch:<b>/device:cpu/threads:<t>")

# Every table, every variant: with --anvil_kernel_groups=on the kernel family runs the op drivers'
# problem groups (harness/drivers/) on every table but gemm (the gemm/ family above), and each
# registered variant of a device must validate on at least its driver's stated number of
# (problem, pass) pairs per group, as the driver loop tests require (tests/helpers/variant_tally.h,
# with its one exemption: a variant that declined every problem of the group because of this
# machine or because it handles other dtypes). Run in --anvil_mode=check: validated, timed once.
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "groups.json")
    run([bench, "--anvil_kernels=on", "--anvil_kernel_groups=on", "--anvil_models=", "--anvil_threads=1",
         "--anvil_mode=check", "--benchmark_filter=^kernel/", "--benchmark_out=" + out,
         "--benchmark_out_format=json"])
    with open(out) as f:
        grouped = json.load(f)
minimum = {}  # (op, group, device) -> pairs
for key, value in grouped["context"].items():
    m = re.fullmatch(r"anvil\.kernel_minimum\.([^.]+)\.([^.]+)\.(cpu|cuda)", key)
    if m:
        minimum[m.groups()] = int(value)
gpu_ran = any("/device:cuda" in b["name"] for b in grouped["benchmarks"])
ran, declined = {}, {}  # (op, variant, group, device) -> count / [reasons]
row_name = re.compile(r"^kernel/([^/]+)/([^/]+)/[^/]+/([^/:]+):[^/]+/device:(cpu|cuda)")
for b in grouped["benchmarks"]:
    m = row_name.match(b["name"])
    check(m is not None, f"a kernel row outside the naming scheme: {b['name']}")
    if not m:
        continue
    key = m.groups()
    if b.get("error_occurred"):
        message = b.get("error_message", "")
        check("does not support" in message, f"{b['name']}: {message}")  # a decline, not a failure
        declined.setdefault(key, []).append(message)
    else:
        ran[key] = ran.get(key, 0) + 1
exempt = re.compile(r"this CPU|handles \w+ only, not|needs f32 or f64, got")
for op, variants in tables.items():
    if op == "gemm":
        continue
    groups = sorted({g for (o, g, d) in minimum if o == op and d == "cpu"})
    check(groups, f"no driver groups listed for {op} (anvil.kernel_minimum.{op}.*)")
    for variant in variants:
        if variant == "ref" or (variant.startswith("cuda.") and not gpu_ran):
            continue
        device = "cuda" if variant.startswith("cuda.") else "cpu"
        for group in groups:
            key = (op, variant, group, device)
            n, reasons = ran.get(key, 0), declined.get(key, [])
            if device == "cuda":
                # cuDNN declines by shape and dtype in ways the CPU counts do not predict: the GPU
                # driver loop (tests/cuda/) holds the CUDA variants to their minimum; here every
                # one must have its rows.
                check(n + len(reasons) > 0, f"kernel/{op}/{variant} has no row of group {group} on cuda")
                continue
            if n == 0 and reasons and all(exempt.search(r) for r in reasons):
                continue
            check(n >= minimum.get((op, group, device), 1),
                  f"kernel/{op}/{variant} validated {n} rows of group {group} on {device}, fewer than the "
                  f"driver's {minimum.get((op, group, device))} ({len(reasons)} declined)")
for t in (1, 2):
    check(any(re.match(rf"peak/fma_\w+/threads:{t}/", n) for n in names), f"no peak/fma at {t} threads")
    check(has(f"peak/stream_triad/threads:{t}/"), f"no peak/stream_triad at {t} threads")
print(f"coverage: {len(names)} benchmarks listed for {len(models)} models and {len(tables)} variant tables")

# GEMM shape groups (--anvil_gemm_shapes): `all` adds every FCN/LSTM model's layer GEMMs (the LSTM
# cell's among them) and the DeepBench-style set; an unknown group is an error naming the choices.
all_shapes = {n.split("/")[3] for n in run([bench, "--benchmark_list_tests", "--anvil_gemm_shapes=all", "--anvil_gpu=off",
                                           "--anvil_threads=1", "--benchmark_filter=^gemm/default/NN/"]).splitlines()}
for group in ["dlbench_", "fcn5_b64_", "fcn_r_b64_", "mlp_mnist_b80_", "lstm32_b128_", "lstm64_b128_", "deepbench_"]:
    check(any(s.startswith(group) for s in all_shapes), f"--anvil_gemm_shapes=all has no {group}* shape")
check("lstm32_b128_128x1024x256" in all_shapes, "the LSTM cell's per-step recurrent GEMM [B,H]x[H,4H] is listed")
bad = subprocess.run([bench, "--benchmark_list_tests", "--anvil_gemm_shapes=dlbench,nonsense"], capture_output=True, text=True)
check(bad.returncode != 0 and "nonsense" in bad.stderr and "deepbench" in bad.stderr,
      f"an unknown GEMM shape group fails clearly (exit {bad.returncode}: {bad.stderr.strip()[-200:]})")

# The model-step filters the scripts build select one benchmark, the default selection's step (not
# the .../lstm:<variant> rows): compare_pytorch.sh's and bench.sh's default per-process filter. Both
# broke once when the names' suffix changed. Each filter is taken from its script's own source line
# (the template and, for bench.sh, its default variant_rows) and expanded by bash itself with the
# loop variables set, so the test checks what the scripts would pass, not a copy of it.
repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def bash_expand(template, **env):
    out = subprocess.run(["bash", "-c", 'printf %s "' + template + '"'], env={**os.environ, **env},
                         capture_output=True, text=True)
    check(out.returncode == 0, f"bash expands {template}: {out.stderr.strip()}")
    return out.stdout


compare_src = open(os.path.join(repo, "scripts", "compare_pytorch.sh")).read()
found = re.search(r'^\s*filter="(\^model/[^"]+)"\s*$', compare_src, re.M)
check(found is not None, "compare_pytorch.sh has one filter=\"^model/...\" line")
bench_src = open(os.path.join(repo, "scripts", "bench.sh")).read()
bench_line = re.search(r'^\s*bench "(\^model/[^"]+)" ', bench_src, re.M)
rows = re.search(r"^\s*variant_rows='([^']*)'\s*$", bench_src, re.M)
check(bench_line is not None and rows is not None,
      "bench.sh has its per-process bench \"^model/...\" line and a default variant_rows")
filters = {}
if bench_line and rows:
    filters["bench.sh"] = bash_expand(bench_line.group(1), m="lstm32", ph="train_step", t="1",
                                      variant_rows=rows.group(1))
if found:
    filters["compare_pytorch.sh"] = bash_expand(found.group(1), m="lstm32", ph="train", t="1")
check(len(filters) == 2, f"both scripts' filters were found: {sorted(filters)}")
for script, pattern in filters.items():
    hits = subprocess.run([bench, "--benchmark_list_tests", "--anvil_models=lstm32", "--anvil_threads=1",
                           "--benchmark_filter=" + pattern], capture_output=True, text=True).stdout.splitlines()
    check(len(hits) == 1 and "/lstm:" not in hits[0],
          f"{script}'s filter {pattern} selects {hits}, not the one default-selection step")

# Smoke: one of each family, short.
smoke_filter = ("^(peak/fma_[a-z0-9]+/threads:1/|gemm/default/NN/fcn5_b64_64x2048x2048/threads:1/"
                "|model/mlp_mnist/train_step/batch:80/threads:1/|kernel/conv2d/cpu.onednn/forward/cnn_mnist:conv1/batch:128/device:cpu/threads:1/)")
expected = {"peak": ["FLOP/s"], "gemm": ["FLOP/s", "pct_peak"],
            "model": ["samples/s", "FLOP/s", "pct_peak", "peak_rss_MB", "alloc_peak_MB"],
            "kernel": ["FLOP/s", "pct_peak"]}
with tempfile.NamedTemporaryFile(suffix=".json") as out:
    run([bench, "--benchmark_filter=" + smoke_filter, "--anvil_models=mlp_mnist,cnn_mnist", "--anvil_kernels=on",
         "--anvil_threads=1", "--benchmark_min_time=0.01", "--benchmark_out=" + out.name,
         "--benchmark_out_format=json"])
    results = json.load(open(out.name))
# See Note [Provenance]: the context carries every field, prefixed "anvil.".
prov = {k[len("anvil."):]: v for k, v in results["context"].items() if k.startswith("anvil.")}
for problem in provenance_problems(prov):
    check(False, f"benchmark context: {problem}")
seen = set()
for b in results["benchmarks"]:
    family = b["name"].split("/")[0]
    seen.add(family)
    check(not b.get("error_occurred"), f"{b['name']}: {b.get('error_message')}")
    for counter in expected[family]:
        check(isinstance(b.get(counter), (int, float)) and b[counter] > 0, f"{b['name']}: counter {counter} missing")
check(seen == set(expected), f"smoke run covered {sorted(seen)}, expected {sorted(expected)}")
print(f"smoke: {len(results['benchmarks'])} benchmarks of families {sorted(seen)} ran")

# A wrong variant is skipped with an error, never timed.
with tempfile.NamedTemporaryFile(suffix=".json") as out:
    run([bench, "--anvil_test_broken_variant=on", "--anvil_threads=1", "--anvil_kernels=off",
         "--benchmark_filter=^gemm(_remedy)?/test.broken/.*/fcn5_b64_64x2048x2048/threads:1/",
         "--benchmark_out=" + out.name, "--benchmark_out_format=json"])
    broken = json.load(open(out.name))["benchmarks"]
# 4 transpose modes of gemm/, and the 5 remedies of gemm_remedy/.
check(len(broken) == 9, f"{len(broken)} test.broken benchmarks ran, expected 9")
for b in broken:
    check(b.get("error_occurred") and "validation" in b.get("error_message", ""),
          f"{b['name']}: a wrong variant was not skipped with a validation error ({b.get('error_message')})")
    check(b.get("iterations", 0) == 0, f"{b['name']}: a wrong variant was timed ({b.get('iterations')} iterations)")
print(f"validation: the wrong variant's {len(broken)} benchmarks were skipped with an error")

if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print("benchmark suite checks passed")
