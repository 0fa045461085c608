#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The README's quick start runs as written (issue 38: "a test extracts and executes it").

    test_readme_quick_start.py REPO_ROOT BUILD_DIR      (CTest: readme_quick_start)

Takes the indented command block under "## Quick start" in README.md and runs its commands in
order, from REPO_ROOT, with two substitutions that keep CI within its time and rights:
  - `sudo bash scripts/install_deps.sh` runs as `bash scripts/install_deps.sh --dry-run` (CI
    installs the packages itself; the dry run still fails when the script or a package list is
    broken);
  - the configure command is not rerun, and every `build/` is BUILD_DIR (the tree CTest runs in:
    configured the same way), so `cmake --build` checks that the named targets exist.
The training and benchmark commands run exactly as written. Each must exit 0; the epoch must
print a test accuracy and the benchmark a train_step row. A command the block gains that this
test does not know fails it, so the README cannot drift past it.
"""
import pathlib
import re
import shlex
import subprocess
import sys


def quick_start_commands(readme: str) -> list[str]:
    section = re.search(r"^## Quick start.*?\n(.*?)^## ", readme, re.S | re.M)
    if not section:
        raise SystemExit("FAIL: README.md has no '## Quick start' section")
    block, lines = [], section[1].splitlines()
    for line in lines:
        if line.startswith("    "):
            block.append(line[4:])
        elif block:
            break
    commands, current = [], ""
    for line in block:  # a line ending in a backslash goes on on the next one
        if line.endswith("\\"):
            current += line[:-1]
            continue
        commands.append(current + line)
        current = ""
    return [shlex.split(c, comments=True) for c in commands if c.strip()]


def main() -> int:
    root, build = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]).resolve()
    commands = quick_start_commands((root / "README.md").read_text(encoding="utf-8"))
    failures, ran = [], []
    for words in commands:
        cmd = shlex.join(words)
        if words[:3] == ["sudo", "bash", "scripts/install_deps.sh"]:
            argv = ["bash", "scripts/install_deps.sh", "--dry-run"]
        elif words[:2] == ["cmake", "-S"]:
            continue  # BUILD_DIR is configured already (by CTest's own configure)
        elif words[:2] == ["cmake", "--build"] or words[0].startswith("build/"):
            argv = [str(build) + w[len("build"):] if w == "build" or w.startswith("build/") else w for w in words]
        else:
            failures.append(f"unknown quick-start command `{cmd}`: teach tests/docs/test_readme_quick_start.py")
            continue
        try:
            r = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=1200)
        except FileNotFoundError as e:
            failures.append(f"`{cmd}`: {e}")
            continue
        ran.append(words[0] if not words[0].startswith("build/") else words[0].split("/")[-1])
        out = r.stdout + r.stderr
        if r.returncode != 0:
            failures.append(f"`{cmd}` exited {r.returncode}:\n{out[-1500:]}")
        elif words[0].endswith("/anvil") and "test accuracy" not in out:
            failures.append(f"`{cmd}` printed no test accuracy:\n{out[-800:]}")
        elif words[0].endswith("/anvil_bench") and "train_step" not in out:
            failures.append(f"`{cmd}` printed no train_step row:\n{out[-800:]}")
    for needed in ("anvil", "anvil_bench"):
        if needed not in ran:
            failures.append(f"the quick start runs no build/.../{needed} command")
    if failures:
        print(f"FAIL: {len(failures)} problem(s)")
        for f in failures:
            print("  " + f)
        return 1
    print(f"PASS: the README quick start's {len(commands)} commands ({', '.join(ran)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
