#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/bench.sh's option checks, its --dry-run plan and its `--` passthrough.

    test_bench_sh.py REPO ANVIL_CLI BUILD_DIR      (CTest: bench_sh_options, tests/CMakeLists.txt)

1. --dry-run with good options exits 0 and prints the models as checked against `anvil models`
   (ANVIL_CLI, the built CLI), the benchmark count anvil_bench lists (BUILD_DIR/bench/anvil_bench),
   a time estimate and the set-up actions.
2. Bad --models / --threads / --peers / --reps, and a passthrough flag bench.sh sets itself, each
   exit 2 with one line on stderr naming the bad value.
3. A real run (--no-build --no-install --peers none) against a stand-in anvil_bench that logs its
   arguments: the flags after `--` reach every anvil_bench call.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from checks import FAILURES, check, finish  # noqa: E402  (beside this file)


def bench(repo, args, env):
    return subprocess.run(["bash", "scripts/bench.sh"] + args, cwd=repo, env=env, capture_output=True,
                          text=True, timeout=120)


STAND_IN = r"""#!/usr/bin/env bash
# A stand-in anvil_bench: logs its arguments; lists one benchmark; writes a one-benchmark JSON.
echo "$*" >> "$(dirname "$0")/calls.log"
out=""
for a in "$@"; do
  case "$a" in
    --benchmark_list_tests*) echo "model/fcn5/train_step/batch:64/threads:1"; exit 0 ;;
    --benchmark_out=*) out="${a#--benchmark_out=}" ;;
  esac
done
[ -n "$out" ] && cat > "$out" <<'JSON'
{"context": {"host_name": "stand-in"}, "benchmarks": [{"name": "model/fcn5/train_step/batch:64/threads:1",
 "run_type": "iteration", "real_time": 0.5, "time_unit": "s", "iterations": 1}]}
JSON
exit 0
"""


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: test_bench_sh.py REPO ANVIL_CLI BUILD_DIR")
    repo, anvil, build = sys.argv[1:]
    env = dict(os.environ, ANVIL_CLI=anvil, ANVIL_BUILD_DIR=build)
    has_bench = os.access(os.path.join(build, "bench", "anvil_bench"), os.X_OK)

    r = bench(repo, ["--dry-run", "--models", "fcn5,lstm32", "--threads", "1,2", "--peers", "pytorch"], env)
    check(r.returncode == 0, f"good options: exit {r.returncode}: {r.stderr}")
    check("models: checked against `anvil models`" in r.stdout, f"models not checked:\n{r.stdout}")
    m = re.search(r"benchmarks: (\d+)", r.stdout)
    if has_bench:
        check(m is not None and int(m.group(1)) > 0, f"no benchmark count:\n{r.stdout}")
    else:
        check("benchmarks: unknown until" in r.stdout, f"no count, and not said so:\n{r.stdout}")
    check(re.search(r"time estimate: ~\d+ min", r.stdout), f"no time estimate:\n{r.stdout}")
    check(re.search(r"install_deps: (all \d+ packages already installed|would run as root: apt-get)", r.stdout),
          f"no apt action line:\n{r.stdout}")
    check(re.search(r"install_peers: (pytorch present|would run: \S+ -m pip install torch)", r.stdout),
          f"no pip action line for the pytorch peer:\n{r.stdout}")
    check("tensorflow" not in r.stdout.split("set-up actions:")[-1],
          "the set-up actions name a peer that was not asked for")

    for bad, value in ((["--models", "fcn5,nosuch"], "nosuch"), (["--threads", "abc"], "abc"),
                       (["--threads", "0,2"], "0,2"), (["--threads", "1,,2"], "1,,2"),
                       (["--peers", "caffe"], "caffe"), (["--reps", "x"], "x"),
                       (["--", "--benchmark_filter=gemm"], "--benchmark_filter=gemm")):
        r = bench(repo, ["--dry-run"] + bad, env)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2, f"{bad}: exit {r.returncode}, want 2")
        check(len(lines) == 1 and value in lines[0] and lines[0].startswith("bench.sh: "),
              f"{bad}: stderr should be one 'bench.sh: ...' line naming {value!r}, got {r.stderr!r}")

    # Passthrough into a real run, with a stand-in anvil_bench.
    tmp = tempfile.mkdtemp(prefix="anvil_bench_sh_")
    try:
        os.makedirs(os.path.join(tmp, "bench"))
        stand_in = os.path.join(tmp, "bench", "anvil_bench")
        with open(stand_in, "w") as f:
            f.write(STAND_IN)
        os.chmod(stand_in, 0o755)
        run_env = dict(env, ANVIL_BUILD_DIR=tmp)
        r = bench(repo, ["--no-build", "--no-install", "--peers", "none", "--models", "fcn5", "--threads", "1",
                         "--filter", "^model/", "--out", os.path.join(tmp, "out"), "--",
                         "--benchmark_min_time=0.25s", "--benchmark_enable_random_interleaving=true"], run_env)
        check(r.returncode == 0, f"stand-in run: exit {r.returncode}: {r.stderr[-600:]}")
        with open(os.path.join(tmp, "bench", "calls.log")) as f:
            calls = f.read().splitlines()
        check(len(calls) >= 2, f"anvil_bench called {len(calls)} time(s)")
        for c in calls:
            check("--benchmark_min_time=0.25s --benchmark_enable_random_interleaving=true" in c,
                  f"passthrough flags missing from an anvil_bench call: {c}")
    finally:
        shutil.rmtree(tmp)

    sys.exit(finish("PASS: bench.sh --dry-run checks models/threads/peers/reps and prints count, "
                    "estimate and set-up actions; flags after -- reach anvil_bench"))


if __name__ == "__main__":
    main()
