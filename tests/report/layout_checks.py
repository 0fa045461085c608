# SPDX-License-Identifier: Apache-2.0
"""Shared by the report tests: the layout every report keeps (Note [Report layout] in
scripts/report_layout.py). Each function returns a list of failures (empty when the layout holds)."""
import os
import re

SEPARATOR = re.compile(r"^\|[-:| ]+\|$")
IMAGE = re.compile(r"^!\[([^]]+)\]\(([^)]+\.png)\)$")
CAPTION = re.compile(r"^\*Figure (\d+): (.+); redraw: `(python3 scripts/\S+ .+)`\.\*$")


def summary_first(md):
    """The first '## ' heading is the summary, with at least one '- ' line, before any table."""
    lines = md.splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("## ")]
    if not heads or lines[heads[0]] != "## Summary":
        return ["the first section is not '## Summary'"]
    end = heads[1] if len(heads) > 1 else len(lines)
    body = [line for line in lines[heads[0] + 1:end] if line.startswith("- ")]
    fails = [] if body else ["the summary block has no lines"]
    if any(line.startswith("|") for line in lines[:end]):
        fails.append("a table comes before the end of the summary block")
    return fails


def regenerate_above_tables(md):
    """Every table has a 'Regenerate: `...`' line between its section heading ('#'/'##') and it."""
    lines, fails, seen = md.splitlines(), [], False
    for i, line in enumerate(lines):
        if line.startswith(("# ", "## ")):
            seen = False
        elif line.startswith("Regenerate: `") and line.endswith("`"):
            seen = True
        starts = (line.startswith("|") and i + 1 < len(lines) and SEPARATOR.match(lines[i + 1])
                  and not (i > 0 and lines[i - 1].startswith("|")))
        if starts and not seen:
            fails.append(f"table at line {i + 1} ({line[:50]}) has no Regenerate line above it")
    return fails


def figures_beside_tables(md, folder, command):
    """Each image: a PNG that exists in `folder`, the caption line right below it naming `command`,
    and a table between the section heading above it and the image (the plot sits with its table)."""
    lines, fails, images, table_in_section = md.splitlines(), [], [], False
    for i, line in enumerate(lines):
        if line.startswith(("# ", "## ")):
            table_in_section = False
        elif line.startswith("|"):
            table_in_section = True
        m = IMAGE.match(line)
        if not m:
            continue
        name = m.group(2)
        images.append(name)
        path = os.path.join(folder, name)
        if not (os.path.isfile(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"):
            fails.append(f"plot {name} is not a PNG file in {folder}")
        nxt = next((x for x in lines[i + 1:] if x.strip()), "")
        c = CAPTION.match(nxt)
        if not c:
            fails.append(f"plot {name} has no caption line below it (got {nxt[:60]!r})")
        elif c.group(3) != command or int(c.group(1)) != len(images):
            fails.append(f"plot {name}: caption numbers/command {c.group(1)}, {c.group(3)!r}; want "
                         f"{len(images)}, {command!r}")
        if not table_in_section:
            fails.append(f"plot {name} is not in the section of a table")
    if any(line.startswith("## Plots") for line in lines):
        fails.append("the plots are still gathered in a '## Plots' section at the end")
    return fails, images
