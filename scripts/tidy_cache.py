#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The clang-tidy cache of scripts/tidy.sh (Note [Tidy cache]).

    tidy_cache.py keys BUILD FILE...        print "<key> <file>" per translation unit

Note [Tidy cache]
clang-tidy over the whole tree is the longest stage of CI (about 20 minutes cold on 2 cores),
yet between two commits most translation units are unchanged. A unit's result depends only on
what clang-tidy reads: the unit, every header it includes, its compile command, the checks
(.clang-tidy) and clang-tidy itself. The key of a unit is the SHA-256 of all of them:
  - clang-tidy's version line and the .clang-tidy file;
  - the compile command with the absolute paths of the repository, the build folder and the
    folder above them replaced by placeholders (a clone elsewhere gets the same key)
    and the output file dropped;
  - the content of every file the build recorded as a dependency of the unit's object (ninja's
    deps log), inside the repository or the build folder, by relative path; system headers are
    not hashed (they come from the pinned Debian packages, scripts/install_deps.sh).
.ci/tidy_clean.txt lists the keys of units that clang-tidy found clean. `tidy.sh --cache FILE`
checks only the units whose key is not listed; `tidy.sh --record` writes the keys of a clean run
back. So a stale or empty list only costs time, and an edited unit, header, flag or check is
always checked again. A unit whose dependencies ninja did not record (not built yet) gets no key
and is always checked.
"""
import hashlib
import json
import os
import shlex
import subprocess
import sys


def compile_commands(build):
    """Map repo-relative .cpp path -> (directory, argv)."""
    root = os.getcwd()
    out = {}
    for e in json.load(open(os.path.join(build, "compile_commands.json"))):
        path = os.path.relpath(os.path.join(e["directory"], e["file"]), root)
        argv = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        out[path] = (e["directory"], argv)
    return out


def ninja_deps(build):
    """Map object path (as ninja names it, relative to the build folder) -> dependency paths."""
    text = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True,
                          check=True).stdout
    deps, current = {}, None
    for line in text.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" "):
            obj, _, rest = line.partition(": #deps")
            current = [] if "(VALID)" in rest else None  # a stale entry is no dependency list
            if current is not None:
                deps[obj] = current
        elif current is not None:
            current.append(line.strip())
    return deps


def normalised(argv, directory, root, build_abs):
    """The compile command without the output file and with absolute paths made relative."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        # The folder above the clone too: a dataset folder beside the clone is named by absolute path.
        out.append(a.replace(build_abs, "<build>").replace(root, "<repo>")
                   .replace(os.path.dirname(root) + os.sep, "<parent>/"))
    return out


def keys(build, files):
    root = os.getcwd()
    build_abs = os.path.realpath(build)
    commands = compile_commands(build)
    deps = ninja_deps(build)
    version = subprocess.run(["clang-tidy", "--version"], capture_output=True,
                             text=True).stdout.strip()
    config = open(".clang-tidy", "rb").read() if os.path.exists(".clang-tidy") else b""
    content = {}

    def file_hash(path):
        if path not in content:
            with open(path, "rb") as f:
                content[path] = hashlib.sha256(f.read()).hexdigest()
        return content[path]

    for f in files:
        if f not in commands:
            continue
        directory, argv = commands[f]
        obj = argv[argv.index("-o") + 1] if "-o" in argv else None
        listed = deps.get(obj)
        if not listed:
            continue  # no recorded dependencies: always checked
        h = hashlib.sha256()
        h.update(version.encode())
        h.update(config)
        h.update("\0".join(normalised(argv, directory, root, build_abs)).encode())
        for d in sorted(set(listed)):
            path = os.path.realpath(os.path.join(build_abs, d))  # ninja's paths: from the build
            if not (path.startswith(root + os.sep) or path.startswith(build_abs + os.sep)):
                continue  # a system header
            rel = os.path.relpath(path, root)
            rel = rel if not path.startswith(build_abs + os.sep) else \
                "<build>/" + os.path.relpath(path, build_abs)
            h.update(f"\0{rel}\0{file_hash(path)}".encode())
        print(h.hexdigest(), f)


def main():
    if len(sys.argv) < 3 or sys.argv[1] != "keys":
        sys.exit(__doc__.split("\n\n")[1])
    keys(sys.argv[2], sys.argv[3:])


if __name__ == "__main__":
    main()
