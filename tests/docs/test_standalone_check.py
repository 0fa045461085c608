#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The docs check's "standalone" rule and scripts/scrub_paths.py on a throw-away repository.

    test_standalone_check.py REPO_ROOT

A folder beside the clone and each kind of machine path must be reported with its file and
line; scrub_paths.py must rewrite the machine paths (and nothing else), after which the check
passes. Note [No machine paths in the repository].
"""
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_harness import Harness  # noqa: E402

h = Harness(sys.argv[1])
root, expect = h.root, h.expect
scrub = root / "scripts" / "scrub_paths.py"


def run_check(repo):
    return h.run_check(repo, "standalone")


with tempfile.TemporaryDirectory() as tmp:
    repo = pathlib.Path(tmp)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("The networks are in `../shared/spec/networks.md`.\n")
    result = {
        "executable": "/work/main/build/bench/anvil_bench",
        "command": "python3 /tmp/peer_runs/cmp3/run.py --out /root/out/x.json",
        "home": "/home/someone/anvil/build",
        "real_time": 12.5,
    }
    text = "{\n" + ",\n".join(f'  "{k}": {v!r}'.replace("'", '"') for k, v in result.items()) + "\n}\n"
    (repo / "result.json").write_text(text)
    (repo / "install.sh").write_text("prefix=$(mktemp -d /tmp/anvil-prefix.XXXXXX)\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)

    status, out = run_check(repo)
    expect(status == 1, f"the check passed on a repository with outside paths:\n{out}")
    expect("README.md:1: names '../shared'" in out, f"../shared not reported:\n{out}")
    for path in ("/work/main/", "/tmp/peer_runs", "/home/someone/"):
        expect(f"holds '{path}" in out, f"{path} not reported:\n{out}")
    expect("install.sh" not in out, f"a mktemp template was reported:\n{out}")

    subprocess.run([sys.executable, str(scrub), str(repo / "result.json")], check=True,
                   capture_output=True)
    scrubbed = (repo / "result.json").read_text()
    expect('"executable": "build/bench/anvil_bench"' in scrubbed, scrubbed)
    expect("$TMPDIR/peer_runs/cmp3/run.py --out $HOME/out/x.json" in scrubbed, scrubbed)
    expect('"home": "$HOME/anvil/build"' in scrubbed, scrubbed)
    expect('"real_time": 12.5' in scrubbed, scrubbed)
    (repo / "README.md").write_text("The networks are in `docs/spec/networks.md`.\n")
    status, out = run_check(repo)
    expect(status == 0, f"the check still fails after scrub_paths.py:\n{out}")

sys.exit(h.finish("test_standalone_check"))
