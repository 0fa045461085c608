# SPDX-License-Identifier: Apache-2.0
"""Shared by the report tests: run under a python3 that has matplotlib.

report.py draws its plots with matplotlib (Debian's python3-matplotlib). As scripts/bench.sh
does, a test started by a python3 earlier on the PATH (pyenv, venv) that lacks it re-runs itself
with /usr/bin/python3, the interpreter the package installs into; without matplotlib anywhere
the test fails, since the plots are part of what it checks.
"""
import os
import sys


def require_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system):
            os.execv(system, [system] + sys.argv)
        sys.exit(f"FAIL: matplotlib is not importable by {sys.executable} (apt-get install python3-matplotlib)")
