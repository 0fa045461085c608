#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""anvil_bench's command line: --help, Google Benchmark passthrough, and one-line flag errors.

Usage: test_bench_flags.py path/to/anvil_bench path/to/bench/bench_support.h   (a CTest entry)

1. `--help` lists every --anvil_* flag that bench/bench_support.h documents (the Options struct
   names each one), each with a description on its line, then Google Benchmark's own flags and
   the --benchmark_min_time override (Note [Benchmark min_time] in bench/bench_flags.cpp).
2. Google Benchmark's flags pass through (--benchmark_list_tests, --benchmark_filter), and the
   --anvil_* flags still act: a later flag replaces an earlier one, as on every command line.
3. A bad value, or an unknown --anvil_* flag, fails with one stderr line naming the flag and
   the value.
4. --benchmark_min_time, given, prints a note saying which rows it does not change.
"""
import re
import subprocess
import sys

bench, header = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(*args):
    return subprocess.run([bench, *args], capture_output=True, text=True, timeout=120)


# 1. --help
documented = sorted(set(re.findall(r"--anvil_[a-z_]+", open(header).read())))
check(len(documented) >= 20, f"bench_support.h names only {len(documented)} flags")
out = run("--help")
check(out.returncode == 0, f"--help exits {out.returncode}: {out.stderr.strip()[-300:]}")
help_lines = out.stdout.splitlines()
for flag in documented:
    lines = [l for l in help_lines if re.match(r"\s*" + re.escape(flag) + r"\b", l)]
    check(len(lines) == 1, f"--help lists {flag} {len(lines)} times")
    if lines:
        text = lines[0].split(flag, 1)[1].replace("VALUE", "").strip()
        check(len(text) > 10, f"--help has no description for {flag}: {lines[0]!r}")
check("--benchmark_filter" in out.stdout, "--help does not go on to Google Benchmark's flags")
check("--benchmark_min_time does not change" in out.stdout,
      "--help does not say that anvil's rows set their own time")

# 2. Passthrough, and the anvil flags still act (the last of two wins).
base = ["--anvil_models=", "--anvil_kernels=off", "--anvil_gpu=off", "--anvil_peak=10"]
out = run("--benchmark_list_tests", "--benchmark_filter=^peak/", "--anvil_threads=1",
          "--anvil_threads=2", *base)
check(out.returncode == 0, f"listing fails: {out.stderr.strip()[-300:]}")
rows = out.stdout.split()
check(rows and all(r.startswith("peak/") for r in rows), f"the filter is not honoured: {rows}")
check(rows and all("/threads:2/" in r for r in rows), f"--anvil_threads=2 not applied: {rows}")
out = run("--benchmark_list_tests", "--benchmark_filter=^gemm/default/NN/",
          "--anvil_threads", "1", *base)
check(out.returncode == 0 and out.stdout.split() and
      all("/threads:1/" in r for r in out.stdout.split()),
      f"--anvil_threads 1 (space-separated) not applied: {out.stdout} {out.stderr[-300:]}")

# 3. One clear line per bad value.
bad = {
    "--anvil_threads=two": ["--anvil_threads", "two"],
    "--anvil_batches=0": ["--anvil_batches", "'0'"],
    "--anvil_fold_sgd=maybe": ["--anvil_fold_sgd", "maybe", "on or off"],
    "--anvil_gpu=sometimes": ["--anvil_gpu", "sometimes", "auto, on or off"],
    "--anvil_gpu_inputs=pinned,mapped": ["--anvil_gpu_inputs", "mapped"],
    "--anvil_kernel_min_time=0": ["--anvil_kernel_min_time", "'0'"],
    "--anvil_gpu_min_time=nan": ["--anvil_gpu_min_time", "nan"],
    "--anvil_mode=fast": ["--anvil_mode", "fast", "check or perf"],
    "--anvil_peak=fast": ["--anvil_peak", "fast"],
    "--anvil_peak=-1": ["--anvil_peak", "'-1'", ">= 0"],
    "--anvil_precision=tf32": ["--anvil_precision", "tf32"],
    "--anvil_skip_variant=gemm=nosuch": ["--anvil_skip_variant", "nosuch"],
    "--anvil_skip_tag=fast": ["--anvil_skip_tag", "fast", "opt_in"],
    "--anvil_nosuch=1": ["--anvil_nosuch=1", "--help"],
}
for arg, words in bad.items():
    out = run("--benchmark_list_tests", arg, *base)
    lines = out.stderr.strip().splitlines()
    check(out.returncode != 0, f"{arg} is accepted")
    check(len(lines) == 1 and all(w in lines[0] for w in words),
          f"{arg}: expected one line naming {words}, got {out.stderr.strip()!r}")

# --anvil_peak=0 still means "measure it" (tests/bench/test_host_profile.py passes it).
out = run("--benchmark_list_tests", "--benchmark_filter=^peak/", "--anvil_peak=0", *base[:3])
check(out.returncode == 0, f"--anvil_peak=0 is refused: {out.stderr.strip()[-300:]}")

# --anvil_skip_tag (Note [Variant tags]): cpu.im2col needs a workspace, so skipping that tag
# drops its rows and keeps the others.
listing = ["--benchmark_list_tests", "--anvil_kernels=on", "--anvil_models=cnn_mnist", "--anvil_threads=1",
           "--anvil_gpu=off", "--benchmark_filter=^kernel/conv2d/"]
kept = run(*listing).stdout.split()
skipped = run(*listing, "--anvil_skip_tag=workspace").stdout.split()
check(any("/cpu.im2col/" in r for r in kept), "no cpu.im2col rows to skip")
check(skipped and not any("/cpu.im2col/" in r for r in skipped) and any("/cpu.onednn/" in r for r in skipped),
      f"--anvil_skip_tag=workspace: {len(kept)} rows before, {len(skipped)} after")

# 4. The min_time note (nothing matches the filter: no row runs).
out = run("--benchmark_min_time=0.01", "--benchmark_filter=^no_such_row$", *base)
check(out.returncode == 0, f"--benchmark_min_time run fails: {out.stderr.strip()[-300:]}")
check("--benchmark_min_time does not change" in out.stderr,
      f"no note for --benchmark_min_time: {out.stderr.strip()[-300:]}")

for f in failures:
    print("FAIL:", f)
print(f"test_bench_flags: {len(documented)} flags, {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
