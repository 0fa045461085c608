#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Python JSON writers carry the provenance fields (Note [Provenance]; the schema test of
issue 38). Each writer that can run here cheaply runs, and its JSON goes through
tests/provenance_check.py, which keeps its own list of the fields (so a field dropped from
scripts/provenance.py fails here):
  1. scripts/provenance.py --out (what gpu_kit.sh and gpu_kit_mpi.sh write), and its
     ANVIL_GIT_REVISION override (the kit's revision on a machine without .git);
  2. the PyTorch peer (bench/peers/pytorch_models.py run: one mlp_mnist training step), with
     library.torch; the TensorFlow peer likewise when TensorFlow is importable;
  3. compare_report.py summarize on a raw folder of one anvil_bench fixture and the peer's row;
  4. gemm_default_check.py --json with a stand-in anvil_bench: the bench's own revision wins.
The C++ writers have their own tests (anvil_cli, bench_suite, dist_bench_provenance); the GPU
study's runner is checked in gpu_kit_parts. A writer that cannot run here is named (SKIP line).

    test_provenance_writers.py REPO_ROOT      (CTest: provenance_writers)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from provenance_check import provenance_problems  # noqa: E402  (tests/)
from checks import check, finish  # noqa: E402  (beside this file)


def check_prov(prov, writer, libraries=()):
    for p in provenance_problems(prov or {}):
        check(False, f"{writer}: {p}")
    for lib in libraries:
        check(f"library.{lib}" in (prov or {}), f"{writer}: no library.{lib}")


def importable(module):
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def fake_bench(argv):
    """anvil_bench stand-in for gemm_default_check.py: two variants of one GEMM cell, and the
    context anvil_bench writes (its provenance under anvil.<field>)."""
    names = ["gemm/default/NN/fcn5_b64_x/threads:1", "gemm/cpu.eigen/NN/fcn5_b64_x/threads:1"]
    ctx = {"anvil.schema": "anvil-provenance/1", "anvil.git_revision": "abcdef1",
           "anvil.library.oneDNN": "2.6.0"}
    rows = [{"name": n, "run_name": n, "run_type": "aggregate", "aggregate_name": "median",
             "real_time": 1.0 + i, "time_unit": "ms", "label": "cpu.eigen"} for i, n in enumerate(names)]
    print(json.dumps({"context": ctx, "benchmarks": rows}))
    return 0


def main():
    if sys.argv[1] == "--fake-bench":
        return fake_bench(sys.argv[2:])
    root = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        # 1. The helper's command line, as the kit's shell scripts call it.
        out = os.path.join(tmp, "provenance.json")
        r = subprocess.run([sys.executable, os.path.join(root, "scripts", "provenance.py"), "--out", out],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"provenance.py exited {r.returncode}: {r.stderr[-400:]}")
        check_prov(json.load(open(out))["provenance"], "provenance.py", ["python"])
        r = subprocess.run([sys.executable, os.path.join(root, "scripts", "provenance.py")], capture_output=True,
                           text=True, env=dict(os.environ, ANVIL_GIT_REVISION="1234abc+dirty"))
        check(json.loads(r.stdout)["provenance"]["git_revision"] == "1234abc+dirty",
              "ANVIL_GIT_REVISION is not the revision written")

        # 2. The peers: one short training step each.
        raw = os.path.join(tmp, "raw")
        os.makedirs(raw)
        peer_row = None
        if importable("torch"):
            r = subprocess.run([sys.executable, os.path.join(root, "bench", "peers", "pytorch_models.py"), "run",
                                "--models", "mlp_mnist", "--threads", "1", "--phases", "train", "--reps", "1",
                                "--warmup", "1", "--min-time", "0", "--min-steps", "1", "--peak", "50"],
                               capture_output=True, text=True, timeout=300)
            check(r.returncode == 0, f"pytorch_models.py run exited {r.returncode}: {r.stderr[-400:]}")
            rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
            check(rows, "the PyTorch peer printed no row")
            for row in rows:
                check_prov(row.get("provenance"), "PyTorch peer row", ["torch", "torch.blas", "torch.onednn"])
            peer_row = rows[0] if rows else None
        else:
            print("SKIP PyTorch peer: torch is not importable by this python (scripts/install_peers.sh)")
        if importable("tensorflow"):
            r = subprocess.run([sys.executable, os.path.join(root, "bench", "peers", "tensorflow_models.py"), "run",
                                "--models", "mlp_mnist", "--threads", "1", "--phases", "train", "--reps", "1",
                                "--warmup", "1", "--min-time", "0", "--min-steps", "1"],
                               capture_output=True, text=True, timeout=300)
            check(r.returncode == 0, f"tensorflow_models.py run exited {r.returncode}: {r.stderr[-400:]}")
            rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
            check(rows, "the TensorFlow peer printed no row")
            for row in rows:
                check_prov(row.get("provenance"), "TensorFlow peer row", ["tensorflow", "keras"])
        else:
            print("SKIP TensorFlow peer: tensorflow is not importable by this python (scripts/install_peers.sh)")

        # 3. compare_report.py summarize: one anvil round (the report fixture) and the peer's row.
        if peer_row is not None:
            doc = json.load(open(os.path.join(root, "tests", "fixtures", "report", "anvil_bench.json")))
            doc["benchmarks"] = [b for b in doc["benchmarks"]
                                 if b["name"].startswith("model/fcn5/train_step/batch:16/threads:1/")][:1]
            json.dump(doc, open(os.path.join(raw, "anvil_fcn5_train_t1_r1.json"), "w"))
            with open(os.path.join(raw, "torch_fcn5_train_t1_r1.jsonl"), "w") as f:
                f.write(json.dumps(peer_row) + "\n")
            report_json = os.path.join(tmp, "compare.json")
            r = subprocess.run([sys.executable, os.path.join(root, "bench", "peers", "compare_report.py"), "summarize",
                                "--raw", raw, "--config", "preset", "--json", report_json,
                                "--md", os.path.join(tmp, "compare.md")], capture_output=True, text=True, timeout=120)
            check(r.returncode == 0, f"compare_report.py summarize exited {r.returncode}: {r.stderr[-400:]}")
            if r.returncode == 0:
                check_prov(json.load(open(report_json)).get("provenance"), "compare_report.py", ["torch"])
        else:
            print("SKIP compare_report.py summarize: it needs the PyTorch peer's row")

        # 4. gemm_default_check.py with the stand-in: the bench's revision over the script's.
        bench = os.path.join(tmp, "anvil_bench")
        with open(bench, "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} --fake-bench \"$@\"\n")
        os.chmod(bench, 0o755)
        out = os.path.join(tmp, "gemm.json")
        r = subprocess.run([sys.executable, os.path.join(root, "scripts", "gemm_default_check.py"), "--bench", bench,
                            "--rounds", "1", "--json", out], capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"gemm_default_check.py exited {r.returncode}: {r.stderr[-400:]}")
        if r.returncode == 0:
            prov = json.load(open(out)).get("provenance")
            check_prov(prov, "gemm_default_check.py", ["oneDNN"])
            check((prov or {}).get("git_revision") == "abcdef1",
                  f"gemm_default_check.py: git_revision {(prov or {}).get('git_revision')!r}, not anvil_bench's")
    return finish("PASS: provenance in every Python JSON writer that runs here")


if __name__ == "__main__":
    sys.exit(main())
