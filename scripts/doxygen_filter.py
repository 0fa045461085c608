#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Doxygen's INPUT_FILTER for anvil's public headers (docs/Doxyfile.in): reads one header,
writes it to stdout with its API comments turned into Doxygen comments, line for line.

    doxygen_filter.py HEADER

Note [API comments for Doxygen]
anvil's headers document their API in plain `//` comments (docs/style.md), which Doxygen
ignores. Rather than rewrite every comment as `///`, this filter does it on the way in, so that
the reference carries the comments the code already has and Doxygen's warnings point at them:
  - a run of `//` lines directly above a declaration becomes that declaration's `///` block;
  - the file's first comment run (after the SPDX line, before any code) becomes the file's
    description (`@file` at its end, where it takes no argument);
  - a trailing `// comment` after a member or enumerator (`int x = 0;  // what x is`) becomes
    `///< comment`;
  - a section divider (`// ---- state ----`) stays plain, and so do the lines above it;
  - Note blocks (design rationale, cited by title), comments above a blank line, a
    preprocessor line or a closing brace, and comments inside function bodies stay plain.
The line count never changes, so Doxygen's warnings name the header's own line numbers.
"""
import re
import sys

COMMENT = re.compile(r"^(\s*)//(?!/)(.*)$")
# Code, then a trailing comment: the code must end a member (`;`), an enumerator (`,`) or be
# a lone enumerator; no `//` or quote in the code part.
TRAILING = re.compile(r"^(\s*[^/\"'\s][^/\"']*?[;,]|\s*[a-z_0-9]+)(\s+)//(?!/)\s?(.*)$")


def is_note(text):
    return text.strip().startswith("Note [")


def filter_lines(lines):
    out = list(lines)
    seen_code = False  # anything but the SPDX line, #pragma and comments
    depth_body = 0  # brace depth inside function bodies (comments there stay plain)
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        m = COMMENT.match(line)
        if m and "SPDX-License-Identifier" not in line:
            j = i
            while j < n and COMMENT.match(lines[j]):
                j += 1
            run = lines[i:j]
            following = lines[j].strip() if j < n else ""
            note = any(is_note(COMMENT.match(r).group(2)) for r in run)
            # A section divider (`// ---- state ----`) heads a group of members; only the
            # lines after the last one describe the declaration below.
            start = i
            for k in range(i, j):
                if COMMENT.match(lines[k]).group(2).strip().startswith(("---", "===")):
                    start = k + 1
            if depth_body == 0 and not note and start < j:
                if not seen_code and (following == "" or following.startswith("#")):
                    for k in range(start, j):
                        out[k] = re.sub(r"//", "///", lines[k], count=1)
                    out[j - 1] += " @file"
                elif following and not following.startswith(("#", "}", "namespace")):
                    for k in range(start, j):
                        out[k] = re.sub(r"//", "///", lines[k], count=1)
            i = j
            continue
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "//")):
            seen_code = True
        if depth_body == 0:
            t = TRAILING.match(line)
            if t and not stripped.startswith(("return", "if ", "for ", "while ", "}", "case ")):
                out[i] = f"{t.group(1)}{t.group(2)}///< {t.group(3)}"
        depth_body = track_bodies(line, depth_body)
        i += 1
    return out


def track_bodies(line, depth):
    """Brace depth of function bodies: a line ending in `) {`, `) const {`, `) override {`, ...
    opens one; classes, structs, enums and namespaces do not count."""
    code = line.split("//", 1)[0]
    opens = code.count("{")
    closes = code.count("}")
    if depth > 0:
        return max(0, depth + opens - closes)
    if opens > closes and re.search(r"\)\s*(const|override|final|noexcept|\s)*\{\s*$", code):
        return opens - closes
    if opens > closes and re.search(r"^\s*(\[.*\]\s*)?\(.*\)\s*\{", code):  # a lambda
        return opens - closes
    return 0


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: doxygen_filter.py HEADER")
    with open(sys.argv[1], encoding="utf-8") as f:
        lines = f.read().split("\n")
    sys.stdout.write("\n".join(filter_lines(lines)))


if __name__ == "__main__":
    main()
