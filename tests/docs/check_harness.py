# SPDX-License-Identifier: Apache-2.0
"""What the docs check's rule tests share: run check_docs.py on a throw-away repository and
collect failed expectations (tests/docs/test_standalone_check.py, test_status_check.py)."""
import pathlib
import subprocess
import sys


class Harness:
    def __init__(self, root):
        self.root = pathlib.Path(root).resolve()
        self.check = self.root / "tests" / "docs" / "check_docs.py"
        self.failures = []

    def expect(self, cond, what):
        if not cond:
            self.failures.append(what)

    def run_check(self, repo, only):
        """check_docs.py on `repo` with the rules in `only`: (exit status, stdout)."""
        r = subprocess.run([sys.executable, str(self.check), str(repo), "--only", only],
                           capture_output=True, text=True)
        return r.returncode, r.stdout

    def finish(self, name):
        for f in self.failures:
            print("FAIL:", f)
        print(f"{name}: {len(self.failures)} failure(s)")
        return 1 if self.failures else 0
