# SPDX-License-Identifier: Apache-2.0
"""The provenance fields every JSON anvil writes must carry (Note [Provenance]).

    from provenance_check import provenance_problems
    provenance_problems({"schema": ..., ...})  ->  [] or the problems found

Imported by the tests of each writer: the training log (tests/cli/test_anvil_cli.sh), the
benchmarks' context (tests/bench/test_bench_suite.py), the distributed benchmark
(tests/distributed/test_dist_bench_provenance.py), the Python writers (peers, compare_report.py,
gemm_default_check.py, scripts/provenance.py: tests/report/test_provenance_writers.py) and the GPU
study's runner (tests/report/test_gpu_kit_parts.py). The field list is written out here, not
imported from scripts/provenance.py, so that a field dropped there fails these tests.
"""
import re

FIELDS = ["schema", "anvil_version", "git_revision", "host", "cpu", "gpu", "timestamp_utc"]


def provenance_problems(prov):
    problems = [f"no '{f}'" for f in FIELDS if not str(prov.get(f, "")).strip()]
    if prov.get("schema") not in (None, "anvil-provenance/1"):
        problems.append(f"unknown schema {prov.get('schema')!r}")
    rev = str(prov.get("git_revision", ""))
    if rev and not re.fullmatch(r"[0-9a-f]{7,40}(\+dirty)?|unknown", rev):
        problems.append(f"git_revision {rev!r} is not a revision")
    stamp = str(prov.get("timestamp_utc", ""))
    if stamp and not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp):
        problems.append(f"timestamp_utc {stamp!r} is not ISO 8601 UTC")
    if not any(k.startswith("library.") for k in prov):
        problems.append("no library.<name> version")
    return problems
