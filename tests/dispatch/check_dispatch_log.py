#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The dispatch log (Note [Dispatch log], engine/dispatch/selection.h), end to end.

    check_dispatch_log.py PATH/TO/dispatch_log_demo        (CTest: dispatch_log)

Runs the demo program without ANVIL_VERBOSE (no line), with ANVIL_VERBOSE=dispatch (each distinct
decision once) and with ANVIL_VERBOSE=dispatch_all (every selection), and checks every line's
format: the op, the problem's one-line repro, the chosen variant, the rule that chose it, and
every other registered variant of the table as declined with a non-empty reason.
"""
import os
import re
import subprocess
import sys

LINE = re.compile(r"^anvil dispatch: op=(?P<op>\S+) problem=(?P<problem>.+?) chosen=(?P<chosen>\S+)"
                  r" by=(?P<by>forced|autotune|heuristic|order) declined: (?P<declined>.+?)"
                  r"(?: autotune: (?P<autotune>.+))?$")
ITEM = re.compile(r"^(?P<name>\S+) \((?P<reason>.+)\)$")


def run(demo, verbose, autotune=False):
    env = dict(os.environ)
    env.pop("ANVIL_VERBOSE", None)
    env.pop("ANVIL_AUTOTUNE", None)
    if autotune:
        env["ANVIL_AUTOTUNE"] = "1"
    if verbose:
        env["ANVIL_VERBOSE"] = verbose
    p = subprocess.run([demo], env=env, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"{demo} (ANVIL_VERBOSE={verbose}) exited {p.returncode}: {p.stderr}")
    tables = {}
    for line in p.stdout.splitlines():
        if line.startswith("table "):
            op, names = line[len("table "):].split(":", 1)
            tables[op] = names.split()
    logged = [l for l in p.stderr.splitlines() if l.startswith("anvil dispatch")]
    return tables, logged


def parse(line, tables, problems):
    m = LINE.match(line)
    if not m:
        problems.append(f"malformed line: {line}")
        return None
    declined = {}
    if m["declined"] != "none":
        for item in m["declined"].split("; "):
            i = ITEM.match(item)
            if not i or not i["reason"].strip():
                problems.append(f"declined entry without a reason '{item}' in: {line}")
                continue
            declined[i["name"]] = i["reason"]
    names = tables.get(m["op"])
    if names is None:
        problems.append(f"unknown op in: {line}")
    elif sorted([m["chosen"], *declined]) != sorted(names):
        problems.append(f"chosen + declined {[m['chosen'], *declined]} != the table's {names}: "
                        f"{line}")
    if not m["problem"].startswith(m["op"] + " "):
        problems.append(f"the problem is not the op's repro: {line}")
    return m, declined


def main():
    demo = sys.argv[1]
    problems = []
    _, quiet = run(demo, None)
    if quiet:
        problems.append(f"without ANVIL_VERBOSE the demo printed {quiet}")

    tables, lines = run(demo, "dispatch")
    parsed = [p for p in (parse(l, tables, problems) for l in lines) if p]
    gemm = [m for m, _ in parsed if m["op"] == "gemm"]
    if len(gemm) != 1:  # the same product three times: one decision, printed once
        problems.append(f"ANVIL_VERBOSE=dispatch: expected 1 gemm line, got {len(gemm)}: {lines}")
    elif "M=6 N=4 K=5" not in gemm[0]["problem"]:
        problems.append(f"gemm line without the problem's sizes: {gemm[0].string}")
    ew = [(m, d) for m, d in parsed if m["op"] == "elementwise"]
    by = sorted((m["chosen"], m["by"]) for m, _ in ew)
    if ("ref", "forced") not in by or not any(b == "order" for _, b in by):
        problems.append(f"elementwise: expected one decision by order and `ref` forced, got {by}")
    for m, d in ew:
        if m["by"] == "forced" and not all("forced" in r for r in d.values()):
            problems.append(f"a supported variant passed over by forcing must say so: {m.string}")

    _, every = run(demo, "dispatch_all")
    n = sum(1 for l in every if l.startswith("anvil dispatch: op=gemm "))
    if n < 3:
        problems.append(f"ANVIL_VERBOSE=dispatch_all: expected every gemm selection (>= 3), got {n}")

    # With autotune on: GEMM decides by autotune; elementwise cannot autotune (in-place forms)
    # and every one of its lines says why (Note [Ops that do not autotune]).
    _, tuned = run(demo, "dispatch", autotune=True)
    tuned_parsed = [p for p in (parse(l, tables, problems) for l in tuned) if p]
    if not any(m["op"] == "gemm" and m["by"] == "autotune" for m, _ in tuned_parsed):
        problems.append(f"ANVIL_AUTOTUNE=1: expected a gemm line decided by autotune: {tuned}")
    for m, _ in tuned_parsed:
        if m["op"] == "elementwise" and m["by"] != "forced" and not (
                m["autotune"] or "").startswith("off for this op: "):
            problems.append(f"ANVIL_AUTOTUNE=1: elementwise must say it does not autotune: "
                            f"{m.string}")
        # A tuned decision's note is what the trials timed (Note [Autotune trials]): the winner,
        # the trial seed and every timed variant's time.
        if m["op"] == "gemm" and m["by"] == "autotune" and not re.match(
                rf"winner {re.escape(m['chosen'])} \(seed \d+\): \S+ [0-9.e+-]+ us",
                m["autotune"] or ""):
            problems.append(f"ANVIL_AUTOTUNE=1: a gemm decided by autotune must list its trials: "
                            f"{m.string}")
    if not any(m["op"] == "elementwise" and m["autotune"] for m, _ in tuned_parsed):
        problems.append(f"ANVIL_AUTOTUNE=1: no elementwise line with its autotune note: {tuned}")

    print("\n".join(problems + [f"check_dispatch_log: {len(lines)} line(s) checked, "
                                f"{len(problems)} problem(s)"]))
    return int(bool(problems))


if __name__ == "__main__":
    sys.exit(main())
