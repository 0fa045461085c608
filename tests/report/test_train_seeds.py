#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/train_experiments.sh --seeds N and scripts/train_seeds.py, without a training run:
  1. the median over seeds, unreached seeds counting as infinitely slow (Note [Median time to
     target]), on hand-picked cases;
  2. the argument handling: a bad --seeds (0, -1, abc, 1.5, 1000, none), an unknown option and a
     bad --only each exit 2 with one line; --help exits 0; --dry-run lists one command per seed
     and the summary, and creates nothing;
  3. --seeds 3 with a stand-in `anvil` (this file's --fake-anvil mode) whose seeds reach the
     target in 30 s, never, and 10 s: seeds.md says 2/3 reached, median 30.0, spread 10.0-30.0,
     and seeds.json carries the provenance fields.

    test_train_seeds.py REPO_ROOT     (CTest: train_seeds)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from provenance_check import provenance_problems  # noqa: E402  (tests/)
from checks import check, finish  # noqa: E402  (beside this file)

# The stand-in's time to target per seed (None: not reached).
FAKE_TIMES = {1: 30.0, 2: None, 3: 10.0}


def fake_anvil(argv):
    """`anvil train` stand-in: writes the --json-log fields train_seeds.py reads."""
    opt = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    seed = int(opt["--seed"])
    log = {"finished": True, "model": opt["--model"],
           "config": {"threads": int(opt["--threads"]), "seed": seed,
                      "target_accuracy": float(opt["--target-accuracy"])},
           "result": {"time_to_target_seconds": FAKE_TIMES[seed], "training_seconds": 40.0 + seed}}
    with open(opt["--json-log"], "w") as f:
        json.dump(log, f)
    return 0


def main():
    if sys.argv[1] == "--fake-anvil":
        return fake_anvil(sys.argv[3:])  # argv[2] is "train"
    root = sys.argv[1]
    sys.path.insert(0, os.path.join(root, "scripts"))
    import train_seeds  # noqa: E402

    # 1. The median.
    med = train_seeds.median_time_to_target
    for times, want in (([5.0], 5.0), ([4.0, 1.0, 3.0, 2.0], 2.5), ([1.0, 2.0, None], 2.0),
                        ([1.0, None], None), ([None, None, 1.0], None), ([None], None)):
        check(med(times) == want, f"median_time_to_target({times}) = {med(times)}, want {want}")
    try:
        med([])
        check(False, "median_time_to_target([]) did not raise")
    except ValueError:
        pass

    script = os.path.join(root, "scripts", "train_experiments.sh")
    with tempfile.TemporaryDirectory() as tmp:
        def run(*args):
            return subprocess.run(["bash", script, *args], capture_output=True, text=True, timeout=60)

        # 2. Arguments.
        for bad in (["--seeds", "0"], ["--seeds", "-1"], ["--seeds", "abc"], ["--seeds", "1.5"],
                    ["--seeds", "1000"], ["--seeds"], ["--nosuch"], ["--only", "gan"], ["--threads", "x"]):
            r = run(*bad, "--dry-run", "--out", os.path.join(tmp, "bad"))
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("train_experiments.sh: "),
                  f"{bad}: exit {r.returncode}, stderr {r.stderr!r} (want exit 2 and one line)")
        r = run("--help")
        check(r.returncode == 0 and "--seeds N" in r.stdout and "--dry-run" in r.stdout,
              f"--help: exit {r.returncode}, {r.stdout[:200]!r}")
        dry = os.path.join(tmp, "dry")
        r = run("--seeds", "3", "--only", "cnn", "--threads", "2", "--dry-run", "--out", dry)
        lines = r.stdout.strip().splitlines()
        check(r.returncode == 0 and len(lines) == 4, f"--dry-run: exit {r.returncode}, lines {lines}")
        for s in (1, 2, 3):
            check(any(f"--seed {s} " in l and f"cnn_mnist_t2_s{s}.json" in l for l in lines),
                  f"--dry-run lists no seed {s} run: {lines}")
        check(lines and "train_seeds.py" in lines[-1], f"--dry-run lists no summary: {lines}")
        check(not os.path.exists(dry), "--dry-run created the output folder")

        # 3. Three seeds with the stand-in.
        fake = os.path.join(tmp, "anvil")
        with open(fake, "w") as f:
            f.write(f"#!/bin/sh\nexec {sys.executable} {os.path.abspath(__file__)} --fake-anvil \"$@\"\n")
        os.chmod(fake, 0o755)
        out = os.path.join(tmp, "out")
        r = run("--anvil", fake, "--seeds", "3", "--only", "mlp", "--threads", "1", "--out", out)
        check(r.returncode == 0, f"--seeds 3 with the stand-in exited {r.returncode}: {r.stderr[-400:]}")
        if r.returncode == 0:
            md = open(os.path.join(out, "seeds.md")).read()
            row = [l for l in md.splitlines() if l.startswith("| mlp_mnist_t1 ")]
            check(len(row) == 1, f"seeds.md has no mlp_mnist_t1 row:\n{md}")
            cells = [c.strip() for c in row[0].strip("|").split("|")] if row else []
            check(cells[3:8] == ["3", "≥0.88", "2/3", "30.0", "10.0-30.0"] if cells else False,
                  f"seeds.md row {cells}: want 3 seeds, 2/3 reached, median 30.0, spread 10.0-30.0")
            doc = json.load(open(os.path.join(out, "seeds.json")))
            check(not provenance_problems(doc.get("provenance", {})),
                  f"seeds.json provenance: {provenance_problems(doc.get('provenance', {}))}")
            check(doc["experiments"][0]["seeds"] == [1, 2, 3], f"seeds.json seeds {doc['experiments'][0]['seeds']}")
    return finish("PASS: train_experiments.sh --seeds: arguments, dry run, median over seeds")


if __name__ == "__main__":
    sys.exit(main())
