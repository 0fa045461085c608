#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Rewrites the absolute paths of a development machine in result files, in place.

    scrub_paths.py FILE...

Note [No machine paths in the repository]
A clone must stand alone and say nothing about the machine it was measured on beyond what the
results record on purpose (CPU, GPU, library versions). Google Benchmark stores argv[0] as
"executable", and the comparison scripts record the commands they ran, both with absolute
paths: /work/<checkout>/build/..., /tmp/<scratch>/..., /root/... on a lent GPU machine. This
script rewrites them before results are committed; the docs check (tests/docs/check_docs.py,
check "standalone") fails on any that is left. Only the path prefix changes, never a number:
  <checkout>/x                      -> x                  (a path inside the repository)
  /tmp/<name>/x, /var/tmp/<name>/x  -> $TMPDIR/<name>/x   (scratch folders)
  /root/x, /home/<user>/x           -> $HOME/x
A checkout is /work/<name>/ (the main clone and its worktrees). mktemp templates
(/tmp/name.XXXXXX) are left alone: they name no machine.
"""
import re
import sys

# The same patterns as tests/docs/check_docs.py's MACHINE_PATH.
RULES = [
    (re.compile(r"(?<![\w.~$-])/work/[\w.+-]+/"), ""),
    (re.compile(r"(?<![\w.~$-])/(?:var/)?tmp/(?![\w.+-]*XXXXXX)"), "$TMPDIR/"),
    (re.compile(r"(?<![\w.~$-])/root/"), "$HOME/"),
    (re.compile(r"(?<![\w.~$-])/home/[\w.+-]+/"), "$HOME/"),
]


def scrub(text):
    for pattern, replacement in RULES:
        text = pattern.sub(replacement, text)
    return text


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.split("\n\n")[1])
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = scrub(text)
        if new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"scrub_paths: rewrote {path}")


if __name__ == "__main__":
    main()
