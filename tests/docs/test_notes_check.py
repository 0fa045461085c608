#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The docs check's "notes" rule on a throw-away repository (Note [Note definitions and
citations] in tests/docs/check_docs.py).

    test_notes_check.py REPO_ROOT

A Note defined once and cited in running text, after `See` or in a line that goes on after the
title passes. A second bare title line (a test opening its comment with the title, as tests did)
is reported with both places, and a title with text after it on its line does not define the
Note, so a Note defined only that way is reported as undefined.
"""
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from check_harness import Harness  # noqa: E402

h = Harness(sys.argv[1])
expect = h.expect



def note(title):
    """The citation of `title`, spelt so that the docs check does not read the fixtures as such."""
    return "Note " + chr(91) + title + chr(93)


ALPHA, GAMMA = note("Alpha rule"), note("Gamma rule")
DEFINED = f"// {ALPHA}\n// Why alpha is the way it is.\nint alpha();\n"
CITED = (f"// Uses alpha ({ALPHA}).\n"
         f"// See {ALPHA}\n"
         f"// {ALPHA}: what it means here.\n"
         "int beta();\n")

with tempfile.TemporaryDirectory() as tmp:
    repo = pathlib.Path(tmp)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "alpha.h").write_text(DEFINED)
    (repo / "beta.cpp").write_text(CITED)
    (repo / "notes.md").write_text(f"Alpha follows {ALPHA}.\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    status, out = h.run_check(repo, "notes")
    expect(status == 0, f"one definition and three citation forms were refused:\n{out}")

    # A test that opens its comment with the bare title defines the Note a second time.
    (repo / "test_alpha.cpp").write_text(f"  // {ALPHA}\n  int x = alpha();\n")
    # A title with text after it on its line cites; nothing defines Gamma.
    (repo / "gamma.cpp").write_text(f"// {GAMMA}: gamma is gamma.\nint gamma();\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    status, out = h.run_check(repo, "notes")
    expect(status == 1, f"the check passed with a second definition and an undefined Note:\n{out}")
    expect(f"test_alpha.cpp:1: {ALPHA} is defined a second time (first at alpha.h:1)" in out,
           f"the second definition was not reported with both places:\n{out}")
    expect(f"See {ALPHA}" in out, f"the fix was not named:\n{out}")
    expect(f"gamma.cpp: cites {GAMMA}, which no file defines" in out,
           f"a title with text after it counted as a definition:\n{out}")

    # The fixes the messages name: the test cites with See, Gamma gets its definition line.
    (repo / "test_alpha.cpp").write_text(f"  // See {ALPHA}\n  int x = alpha();\n")
    (repo / "gamma.cpp").write_text(f"// {GAMMA}\n// Gamma is gamma.\nint gamma();\n")
    status, out = h.run_check(repo, "notes")
    expect(status == 0, f"the check still fails after the fixes:\n{out}")

sys.exit(h.finish("test_notes_check"))
