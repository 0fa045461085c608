# SPDX-License-Identifier: Apache-2.0
"""Layout shared by the report scripts (report.py, gpu_study_report.py, dist_report.py): a
summary block first, each plot right below the table it draws with a one-sentence caption, and a
regenerate command above every table. See Note [Report layout].
"""
import os
import re
import shlex

# Note [Report layout]
# A reader scans a report top-down: the few headline ratios come first (the summary block), then
# each table with its plot directly below it, so that the figure and the numbers it draws are
# read together. Plot functions only name their PNG (`plots.append(name)`, the interface they
# had when all plots went to the end); Figures turns that append into the markdown image and its
# caption at the current end of the report, which is right after the table the section just
# wrote. The caption says what is plotted (looked up by file name in the caller's table), on
# which machine, and the command that redraws it. Every table must be reproducible, so
# add_regenerate_lines gives each table that has no "Regenerate:" line of its own (sections that
# know the bench.sh command write theirs) the command that re-renders it from its folder.

TABLE_SEPARATOR = re.compile(r"^\|[-:| ]+\|$")


class Figures(list):
    """The list of plot names the sections append to; each append also writes the figure and its
    caption into `out` at that point (see Note [Report layout])."""

    def __init__(self, out, captions, machine, command):
        super().__init__()
        self.out, self.captions, self.machine, self.command = out, captions, machine, command

    def append(self, name):
        super().append(name)
        what = next((text for pattern, text in self.captions if re.fullmatch(pattern, name)), None)
        if what is None:
            raise ValueError(f"report_layout: no caption for plot {name!r}; add one to the caption table")
        self.out.append(f"\n![{what}]({name})\n")
        self.out.append(f"*Figure {len(self)}: {what}; {self.machine}; redraw: `{self.command}`.*\n")


def regenerate_command(script, folder, writes_report_md=False):
    """The one-line command that re-renders a report: the folder relative to the repository when
    it is inside it, as given otherwise; `> <folder>/report.md` for scripts that print it."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.abspath(folder)
    shown = os.path.relpath(path, repo) if path.startswith(repo + os.sep) else folder
    command = f"python3 scripts/{script} {shlex.quote(shown)}"
    if writes_report_md:
        command += f" > {shlex.quote(os.path.join(shown, 'report.md'))}"
    return command


def add_regenerate_lines(out, command):
    """Returns `out` with 'Regenerate: `command`' before every table that has no Regenerate line
    between the section ('#' or '##') heading above it and its header row."""
    lines = "\n".join(out).split("\n")
    result, has_own, in_table = [], False, False
    for i, line in enumerate(lines):
        if line.startswith(("# ", "## ")):  # a section's own line covers its ### subsections
            has_own = False
        elif line.startswith("Regenerate: "):
            has_own = True
        starts = (line.startswith("|") and not in_table and i + 1 < len(lines)
                  and TABLE_SEPARATOR.match(lines[i + 1]))
        if starts and not has_own:
            if result and result[-1].strip():
                result.append("")
            result += [f"Regenerate: `{command}`", ""]
        in_table = line.startswith("|")
        result.append(line)
    return result


def summary_block(lines):
    """The '## Summary' block: the headline lines, or one line saying there are none."""
    body = [f"- {line}" for line in lines] or ["- no headline figures in this folder"]
    return ["## Summary", ""] + body + [""]


def legend_outside(ax, fontsize=8):
    """A legend right of the axes, where it can cover no data."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def legend_below(fig, ax, fontsize=8):
    """One legend for a figure of several panels, below them all (saved with bbox_inches="tight",
    which grows the image to hold it)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(labels)),
               fontsize=fontsize)


def plain_log_ticks(axis):
    """Labels on the minor ticks of a log axis too, in plain numbers (0.2, 0.5, 2), so that an axis
    spanning less than a decade is not left with one '10^0' tick."""
    from matplotlib.ticker import FuncFormatter, LogLocator
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    axis.set_minor_locator(LogLocator(base=10, subs=(2, 5)))
    axis.set_major_formatter(plain)
    axis.set_minor_formatter(plain)


def panel_grid(plt, count, panel_height=3.3, max_columns=4):
    """A figure of `count` panels, at most `max_columns` a row; returns (fig, panels) with the
    grid's unused panels hidden."""
    ncols = min(max_columns, count)
    nrows = (count + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, panel_height * nrows), squeeze=False)
    panels = [ax for row in axes for ax in row]
    for ax in panels[count:]:
        ax.set_visible(False)
    return fig, panels[:count]
