# SPDX-License-Identifier: Apache-2.0
"""The pass/fail bookkeeping the report tests share: check() records each failed condition,
finish() prints the failures or the passing line and gives the exit status."""

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)


def finish(passed, failures=None):
    """1 after printing every failure (FAILURES, or `failures`), else 0 after printing `passed`."""
    failures = FAILURES if failures is None else failures
    if failures:
        print(f"FAIL: {len(failures)} check(s)")
        for f in failures:
            print("  " + f)
        return 1
    print(passed)
    return 0
