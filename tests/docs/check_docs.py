#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The docs check: README.md and docs/**/*.md agree with the repository.

    check_docs.py REPO_ROOT [--anvil PATH/TO/anvil] [--only CHECK,...]
                                                (CTest: docs_check, tests/CMakeLists.txt)

Checks, each reporting every problem it finds (exit 1 if any):
  paths    every repository path a doc names (inline, in code spans or as a Markdown link)
           exists, relative to the repository root or to the doc's folder; globs and <placeholder>
           names must match something; links must resolve. Build outputs and the other things
           legitimately absent from a clone are in ALLOWED_ABSENT below, each with its reason.
  notes    every `Note [Title]` cited in the code or the docs has exactly one definition block: a
           comment line holding only `// Note [Title]` (or `# Note [Title]`), the text below it.
           A line that goes on after the title (`// Note [Title]: ...`) cites it; a citation that
           starts a comment writes `// See Note [Title]` (Note [Note definitions and citations]).
  options  every command in the README's "Useful options" paragraph parses: it is run with
           --dry-run appended (it must exit 0) and once more with an unknown option added (it
           must fail), so a script that ignored its options would not pass.
  tables   docs/architecture.md's table of variant tables equals `anvil info`: the same ops, and
           per op the same CPU variants in the same order; the CUDA variants are compared too
           when the binary lists them (a CUDA build), and otherwise must at least be named in
           kernels/ source.
  standalone
           no git-tracked text file names a folder beside the clone (../shared: the
           specification is in docs/spec/) or an absolute path of a development machine
           (/work/<checkout>/, /tmp/<scratch>, /root/, /home/<user>/: Note [No machine paths in
           the repository]; scripts/scrub_paths.py rewrites them in results).
  status   docs/status.md is what scripts/status_table.py writes from docs/results/ (Note [Status
           is generated from the results folders]).
  notrun   no sentence of README.md or docs/ (outside docs/results/, which records history)
           says that a component has not run on a GPU ("not yet run", "never run", "untested
           on", ...) when docs/status.md's source shows that it did: the sentence names a
           component by its `claims` words (scripts/status_table.py) that has a GPU row (the
           sentence, or else its paragraph, names it), unless it names the special case that
           never ran (`narrows`). NOT_RUN_EXCEPTIONS lists the sentences that may stay.
  spdx     every git-tracked .cpp/.h/.cu/.cuh/.py/.sh/.cmake(.in)/CMakeLists.txt file carries
           `SPDX-License-Identifier: Apache-2.0` on its first line (the second after a shebang).
"""
import argparse
import importlib.util
import os
import pathlib
import re
import shlex
import subprocess
import sys

# Paths that docs name but a clean clone does not hold, with the reason. Each entry is a regular
# expression matched against the whole path as written in the doc (after `./` is dropped).
ALLOWED_ABSENT = [
    # CMake build trees (build/, build-asan/, ...) and what they contain: build/bin/anvil,
    # build/bench/anvil_bench, ... (.gitignore: /build*/).
    (r"build[\w.-]*(/.*)?", "a build directory (gitignored)"),
    # scripts/bench.sh and the other scripts write their results under results/<run>/
    # (.gitignore: /results*/); the committed copies live in docs/results/ and are checked.
    # Their folder names are lower case with hyphens (results/20261125-201000/,
    # results/default-run-2026-11-21/, results/gpu-tests/), while the folders and files
    # committed under docs/results/ use underscores (docs/results/default_run_2026-11-21/), so
    # a stale name of a committed result is still caught.
    (r"results(/(<[^>]+>|[a-z0-9-]+)(/.*)?)?",
     "a benchmark/training output folder written by the scripts (gitignored)"),
    (r"\.gpukit(/.*)?", "scripts/gpu_kit.sh's pack folder (gitignored)"),
    (r"\.deps(/.*)?|\.whl(/.*)?", "scripts/install_peers.sh's download folders (gitignored)"),
    # Dataset folders that `anvil train` and the tests read when the user provides the data.
    # docs/data.md says that nothing is committed there (malformed files are generated).
    (r"tests/fixtures/malformed", "named as absent on purpose (docs/data.md)"),
    (r"data/datasets/(fashion-mnist|mnist|cifar-10[\w.-]*|imdb|cifar10)(/.*)?",
     "a dataset folder the user downloads (docs/data.md)"),
]
# Paths that must never be cited: a folder beside the clone, which a clone from a forge does not
# have (the specification is copied into docs/spec/; the standalone check covers every file).
FORBIDDEN = [(r"(\.\./)+shared(/.*)?", "a folder outside the repository: cite docs/spec/")]

# See Note [No machine paths in the repository]: the absolute paths a development or GPU machine
# writes into results (the same patterns as scripts/scrub_paths.py, which rewrites them).
MACHINE_PATH = re.compile(r"(?<![\w.~$-])(/work/[\w.+-]+/|/(?:var/)?tmp/(?![\w.+-]*XXXXXX)[\w.+-]+"
                          r"|/root/|/home/[\w.+-]+/)")
OUTSIDE_REPO = re.compile(r"(?<![\w.-])(\.\./)+shared\b")

# The "notrun" rule (Note [Status is generated from the results folders]): a sentence that says
# something has not run, and mentions a GPU.
NOT_RUN = re.compile(r"\b(?:not|never)\s+(?:yet\s+)?(?:been\s+)?(?:run|ran)\b"
                     r"|\buntested\s+on\b|\b(?:none|neither)\s+of\s+(?:it|them)\s+(?:has|have)\s+"
                     r"(?:yet\s+)?run\b|\b(?:has|have)\s+yet\s+to\s+run\b|\buntested\b"
                     r"|\bno\s+GPU\s+[\w ,]*?\bkernels\b[^.;]*\byet\b"
                     r"|\bnot\s+on\s+(?:the|a)\s+GPU\s+yet\b", re.I)
ON_GPU = re.compile(r"\b(?:GPUs?|CUDA|H100|H200)\b")
# Sentences that say "not run on a GPU" truly although the component they name has a GPU row:
# (doc, a part of the sentence, why it is still true). An entry that matches no sentence of its
# doc any more is reported, so the list cannot outlive the sentences it excuses.
NOT_RUN_EXCEPTIONS = [
    ("docs/cuda.md", "they are listed, never run there",
     "a machine without a GPU lists the CUDA variants and runs none: true on every date"),
    ("docs/cuda.md", "That version has not run on a GPU",
     "the LM perplexity test rewritten after the 2026-11-26 H200 run has not run on a GPU yet"),
    ("docs/cuda.md", "The new version has not run on a",
     "the same rewritten LM perplexity test"),
    ("docs/cuda.md", "the GPU test cases have not run yet",
     "issue 31's cuDNN math-type code was written on 2026-11-27, after the H200 run"),
    ("docs/cuda.md", "test_cuda_conv.cpp` (GPU, not run",
     "the same issue 31 test cases, written after the H200 run"),
    ("docs/distributed.md", "CTest `dist_host_staged_gpu` (2 ranks on one GPU",
     "host-staged device collectives were written on 2026-11-28, after the last GPU run"),
    ("docs/distributed.md", "the same model on both ranks. Not yet run on a GPU",
     "the same host-staged test, in the tests table"),
]

CODE_EXT = (".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake", ".in", ".txt")
SPDX = "SPDX-License-Identifier: Apache-2.0"


class Checker:
    def __init__(self, root):
        self.root = pathlib.Path(root).resolve()
        self.problems = []

    def fail(self, check, msg):
        self.problems.append(f"[{check}] {msg}")

    def tracked_files(self):
        try:
            out = subprocess.run(["git", "-C", str(self.root), "ls-files", "-z"], check=True,
                                 capture_output=True).stdout.decode()
            return [self.root / p for p in out.split("\0") if p]
        except (OSError, subprocess.CalledProcessError):
            # Not a git checkout (an unpacked archive): every file outside build trees and .git.
            files = []
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = [d for d in dirnames if d != ".git" and not d.startswith("build")
                               and d not in ("results", "__pycache__", ".gpukit")]
                files += [pathlib.Path(dirpath) / f for f in filenames]
            return files

    def docs(self):
        docs = [self.root / "README.md"] + sorted((self.root / "docs").rglob("*.md"))
        return [d for d in docs if d.is_file()]

    # ---------------------------------------------------------------- paths
    def top_level_names(self):
        return {p.name for p in self.root.iterdir() if not p.name.startswith(".git")} | {
            "results", "build", ".ci", ".gpukit", "..", "."}

    def exists(self, doc, path):
        """True if path (possibly a glob or with <placeholders>) exists from root or doc dir."""
        p = path.rstrip("/")
        if "<" in p or "*" in p or "?" in p:
            pattern = re.sub(r"<[^>]*>", "*", p)
            for base in (self.root, doc.parent):
                try:
                    if any(True for _ in base.glob(pattern)):
                        return True
                except (ValueError, NotImplementedError):
                    pass
            return False
        return (self.root / p).exists() or (doc.parent / p).exists()

    @staticmethod
    def expand_braces(path):
        m = re.search(r"\{([^{}]*,[^{}]*)\}", path)
        if not m:
            return [path]
        out = []
        for alt in m[1].split(","):
            out += Checker.expand_braces(path[:m.start()] + alt + path[m.end():])
        return out

    def check_path(self, doc, raw, where):
        path = raw
        path = re.sub(r":\d+(-\d+)?$", "", path)  # file.cpp:347
        path = path.rstrip(".,;:)'\"")
        if path.startswith("./"):
            path = path[2:]
        if not path or "..." in path or path in ("../", "./"):
            return
        for rx, why in FORBIDDEN:
            if re.fullmatch(rx, path.rstrip("/")):
                self.fail("paths", f"{where}: '{raw}' must not be cited: {why}")
                return
        for p in self.expand_braces(path):
            if self.exists(doc, p):
                continue
            if any(re.fullmatch(rx, p.rstrip("/")) for rx, _ in ALLOWED_ABSENT):
                continue
            self.fail("paths", f"{where}: names '{raw}', which does not exist (from the "
                               f"repository root or {doc.parent.relative_to(self.root)}/)")

    def check_paths(self):
        tops = self.top_level_names()
        token = re.compile(r"(?<![\w/.$~@%=+-])((?:\.\.?/)*[\w.-]+(?:/[\w.*?{},<>+-]*)+)")
        link = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
        for doc in self.docs():
            rel = doc.relative_to(self.root)
            text = doc.read_text(encoding="utf-8")
            for n, line in enumerate(text.splitlines(), 1):
                where = f"{rel}:{n}"
                for m in link.finditer(line):
                    target = m[1].split("#")[0]
                    if not target or re.match(r"^[a-z]+:", target):
                        continue  # an anchor or a URL
                    self.check_path(doc, target, where)
                # Inline paths (prose and code spans alike); a Markdown link's target was
                # checked above, a URL's path is not a repository path.
                scrubbed = link.sub("]", line)
                scrubbed = re.sub(r"[a-z]+://\S+", " ", scrubbed)
                for m in token.finditer(scrubbed):
                    first = m[1].split("/")[0]
                    if first not in tops:
                        continue  # prose like "CPU/GPU" or "ref/fused", not a path
                    if first in (".", "..") and not re.match(r"(\.\./)+shared/|\.\./", m[1]):
                        continue
                    self.check_path(doc, m[1], where)

    # ---------------------------------------------------------------- notes
    # Note [Note definitions and citations]
    # A Note is defined once, by a comment line holding only its title (docs/style.md), and cited
    # anywhere else by its title in running text. The line form is the whole difference, so a
    # citation must not take it: a test or a .cpp that opens a comment with the bare title would
    # count as a second definition, and `// Note [X]: text` as a definition of a Note that may
    # have none. Such lines are citations here, a bare title line outside the defining place is
    # reported with both places, and a citation that opens a comment writes `See Note [X]`.
    def check_notes(self):
        defined, cited = {}, []
        files = [f for f in self.tracked_files()
                 if f.suffix in CODE_EXT + (".md",) or f.name == "CMakeLists.txt"]
        definition = re.compile(r"^\s*(?://+|#+|\*)?\s*Note \[([^\]]+)\]\s*$")
        for f in files:
            try:
                text = f.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for lineno, line in enumerate(text.splitlines(), 1):
                m = definition.match(line)
                if m:
                    title = " ".join(m[1].split())
                    where = f"{f.relative_to(self.root)}:{lineno}"
                    if title in defined:
                        self.fail("notes", f"{where}: Note [{title}] is defined a second time "
                                           f"(first at {defined[title]}); a citation that opens "
                                           f"a comment writes `See Note [{title}]`")
                    else:
                        defined[title] = where
            # This file's citations are left out: its messages hold Note [..] templates.
            if f.resolve() == pathlib.Path(__file__).resolve():
                continue
            # Citations may wrap: join C++ string literals split over lines ("...passes "
            # "over memory]"), then each line break and the comment marker that follows.
            text = re.sub(r'"[ \t]*\n[ \t]*"', "", text)
            joined = re.sub(r"[ \t]*\n[ \t]*(?://+|#+|\*+|>)?[ \t]*", " ", text)
            for m in re.finditer(r"Note \[([^\]\[]+)\]", joined):
                cited.append((" ".join(m[1].split()), f.relative_to(self.root)))
        for title, f in cited:
            if title not in defined:
                self.fail("notes", f"{f}: cites Note [{title}], which no file defines "
                                   "(a comment line holding only `// Note [" + title + "]`, "
                                   "the text on the lines below it)")

    # ---------------------------------------------------------------- options
    def useful_option_commands(self):
        text = (self.root / "README.md").read_text(encoding="utf-8")
        m = re.search(r"Useful options:(.*?)(?:\n\s*\n)", text, re.S)
        if not m:
            self.fail("options", "README.md has no 'Useful options:' paragraph")
            return []
        spans = re.findall(r"`([^`]+)`", m[1])
        return [s for s in spans if re.search(r"(^|\s)(bash\s+)?scripts/[\w.-]+", s)]

    def run_command(self, words, extra, first=()):
        """Runs `[VAR=v ...] [bash] script args` as bash script [first] args [extra]."""
        env = dict(os.environ)
        while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
            k, v = words[0].split("=", 1)
            env[k] = v
            words = words[1:]
        if words and words[0] == "bash":
            words = words[1:]
        cmd = ["bash", words[0]] + list(first) + words[1:] + extra
        return subprocess.run(cmd, cwd=self.root, env=env, capture_output=True, text=True,
                              timeout=60)

    def check_options(self):
        commands = self.useful_option_commands()
        if not commands:
            self.fail("options", "no command found in README.md's 'Useful options' paragraph")
        for c in commands:
            words = shlex.split(c)
            if "--help" in words or "-h" in words:  # a help command runs as written
                r = self.run_command(words, [])
                if r.returncode != 0 or not r.stdout.strip():
                    self.fail("options", f"`{c}` exited {r.returncode} or printed nothing")
                continue
            r = self.run_command(words, ["--dry-run"])
            if r.returncode != 0:
                self.fail("options", f"`{c} --dry-run` exited {r.returncode}: "
                                     f"{(r.stderr or r.stdout).strip()[-400:]}")
            elif not r.stdout.strip():
                self.fail("options", f"`{c} --dry-run` printed no plan")
            bad = self.run_command(words, ["--dry-run"], first=["--no-such-option-xyz"])
            if bad.returncode == 0:
                self.fail("options", f"`{c}` accepted --no-such-option-xyz: its options are "
                                     "not parsed")

    # ---------------------------------------------------------------- tables
    @staticmethod
    def split_variants(cell):
        cell = re.sub(r"\([^)]*\)", "", cell)  # "(not the last)"
        names = [v.strip().strip("`") for v in re.split(r"[,;]", cell)]
        return [n for n in names if n]

    def doc_tables(self):
        text = (self.root / "docs" / "architecture.md").read_text(encoding="utf-8")
        lines = text.splitlines()
        start = next((i for i, l in enumerate(lines) if re.match(r"\|\s*table\s*\|\s*variants", l)),
                     None)
        if start is None:
            self.fail("tables", "docs/architecture.md has no '| table | variants ...' table")
            return {}
        rows = {}
        for line in lines[start + 2:]:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            ops = re.findall(r"`([\w.]+)`", re.sub(r"\(.*?\)", "", cells[0]))
            for op in ops:
                rows[op] = self.split_variants(cells[1])
        return rows

    def info_tables(self, anvil):
        r = subprocess.run([anvil, "info", "--no-peak"], capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            self.fail("tables", f"`{anvil} info --no-peak` exited {r.returncode}: {r.stderr}")
            return {}
        tables, inside = {}, False
        for line in r.stdout.splitlines():
            if line.startswith("variant tables"):
                inside = True
                continue
            if inside:
                if not line.strip():
                    break
                op, names = line.split(None, 1)
                tables[op] = [n.strip() for n in names.split(",")]
        if not tables:
            self.fail("tables", f"`{anvil} info` printed no variant tables")
        return tables

    def check_tables(self, anvil):
        doc, info = self.doc_tables(), self.info_tables(anvil)
        if not doc or not info:
            return
        cuda_listed = any(n.startswith("cuda.") for names in info.values() for n in names)
        source = "\n".join(p.read_text(errors="replace") for p in (self.root / "kernels").rglob("*")
                           if p.is_file() and p.suffix in (".cpp", ".h", ".cu", ".cuh"))
        for op in info:
            if op not in doc:
                self.fail("tables", f"`anvil info` lists table '{op}' ({', '.join(info[op])}); "
                                    "docs/architecture.md's table of tables does not")
        for op, names in doc.items():
            if op not in info:
                self.fail("tables", f"docs/architecture.md lists table '{op}', which `anvil info` "
                                    "does not have")
                continue
            for device, pick in (("CPU", lambda n: not n.startswith("cuda.")),
                                 ("CUDA", lambda n: n.startswith("cuda."))):
                d = [n for n in names if pick(n)]
                i = [n for n in info[op] if pick(n)]
                if device == "CUDA" and not cuda_listed:
                    for n in d:  # a CPU-only build: the name must at least exist in kernels/,
                        # whole (in code or in the comment that lists names built at
                        # registration, such as "cuda.cudnn." + algorithm) or as such a prefix
                        prefix = n.rsplit(".", 1)[0] + "."
                        if n not in source and f'"{prefix}"' not in source:
                            self.fail("tables", f"docs/architecture.md: {op} variant '{n}' is "
                                                "named nowhere in kernels/")
                    continue
                if d != i:
                    self.fail("tables", f"{op}: docs/architecture.md lists {device} variants "
                                        f"{d}, `anvil info` {i}")

    # ---------------------------------------------------------------- standalone
    def check_standalone(self):
        me = pathlib.Path(__file__).resolve()
        for f in self.tracked_files():
            if f.resolve() in (me, self.root / "scripts" / "scrub_paths.py",
                               self.root / "tests" / "docs" / "test_standalone_check.py"):
                continue  # the files that hold the patterns and the test's examples
            try:
                text = f.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue  # binary: images, checkpoints, gz fixtures
            rel = f.relative_to(self.root)
            for n, line in enumerate(text.splitlines(), 1):
                m = OUTSIDE_REPO.search(line)
                if m:
                    self.fail("standalone", f"{rel}:{n}: names '{m[0]}', a folder outside the "
                                            "repository (cite docs/spec/ or a file of the clone)")
                m = MACHINE_PATH.search(line)
                if m:
                    self.fail("standalone", f"{rel}:{n}: holds '{m[0]}', an absolute path of a "
                                            "machine (run scripts/scrub_paths.py on it: Note [No "
                                            "machine paths in the repository])")

    # ---------------------------------------------------------------- status
    def load_status_table(self):
        path = self.root / "scripts" / "status_table.py"
        spec = importlib.util.spec_from_file_location("status_table", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def check_status(self):
        table = self.load_status_table()
        current = (self.root / table.STATUS).read_text() if (self.root / table.STATUS).is_file() \
            else ""
        if current != table.render(self.root):
            self.fail("status", f"{table.STATUS} is out of date with docs/results/: run "
                                "`python3 scripts/status_table.py` and commit the page")

    @staticmethod
    def sentences(text):
        """(line number, sentence, its paragraph) of a Markdown text's prose: fenced code blocks
        are skipped, paragraphs (and list items) joined, then split after '.', '!' or '?' before
        a capital or a mark. A table row is one sentence and its own paragraph."""
        para, start, in_code = [], 0, False
        for n, line in enumerate(text.splitlines() + [""], 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                line = ""
            if in_code or not line.strip() or line.lstrip().startswith(("#", "|", "- ", "* ")):
                joined = " ".join(para)
                for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*(`\[])", joined):
                    if s:
                        yield start, s, joined
                para = []
                if in_code or not line.strip() or line.lstrip().startswith(("#", "|")):
                    if line.lstrip().startswith("|"):
                        yield n, line, line
                    continue
            if not para:
                start = n
            para.append(line.strip())

    def check_notrun(self):
        table = self.load_status_table()
        ran = table.ran_on_gpu(self.root)
        never = [c for c in table.COMPONENTS if c.claims and not any(c is r[0] for r in ran)]
        results = self.root / "docs" / "results"
        used = set()

        def mentions(component, text):
            return component.claims and component.claims.search(text)

        for doc in self.docs():
            if results in doc.parents:
                continue  # dated results folders are history
            rel = doc.relative_to(self.root)
            for n, sentence, paragraph in self.sentences(doc.read_text()):
                said = NOT_RUN.search(sentence)
                if not (said and ON_GPU.search(sentence)):
                    continue
                # The sentence names the component, or else ("**Not run on a GPU yet**: it
                # compiles") the paragraph around it does.
                subject = sentence if any(mentions(c, sentence) for c in table.COMPONENTS) \
                    else paragraph
                # A sentence about a special case that never ran ("NCCL across several GPUs has
                # not run") is not about the general case that did (NCCL on one GPU).
                narrowed = {c.narrows for c in never if c.narrows and mentions(c, sentence)}
                shown = [(c, date, folder) for c, date, folder in ran
                         if mentions(c, subject) and c.name not in narrowed]
                excused = [e for e in NOT_RUN_EXCEPTIONS if str(rel) == e[0] and e[1] in sentence]
                used.update(e[1] for e in excused)
                if not shown or excused:
                    continue
                listed = "', '".join(c.name for c, _, _ in shown)
                date, folder = max((d, f) for _, d, f in shown)
                quote = sentence[max(0, said.start() - 100):said.end() + 40]
                self.fail("notrun", f"{rel}:{n}: says '{said[0]}' of a GPU, but docs/status.md "
                                    f"shows '{listed}' ran there (newest: docs/results/{folder}/, "
                                    f"{date}): \"...{quote}...\"")
        for doc, part, _ in NOT_RUN_EXCEPTIONS:
            if part not in used and (self.root / doc).is_file():
                self.fail("notrun", f"NOT_RUN_EXCEPTIONS: '{part}' excuses no sentence of {doc} "
                                    "any more: remove the entry")

    # ---------------------------------------------------------------- spdx
    def check_spdx(self):
        for f in self.tracked_files():
            name = f.name
            if not (f.suffix in (".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake")
                    or name == "CMakeLists.txt" or name.endswith(".cmake.in")):
                continue
            try:
                head = f.read_text(encoding="utf-8", errors="replace").splitlines()[:2]
            except OSError as e:
                self.fail("spdx", f"{f.relative_to(self.root)}: unreadable: {e}")
                continue
            lines = head[1:2] if head and head[0].startswith("#!") else head[:1]
            if not any(SPDX in l for l in lines):
                self.fail("spdx", f"{f.relative_to(self.root)}: no '{SPDX}' on its first line "
                                  "(second after a shebang)")


CHECKS = ("paths", "notes", "options", "tables", "standalone", "status", "notrun", "spdx")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--anvil", help="the anvil binary (for the tables check)")
    ap.add_argument("--only", default=",".join(CHECKS))
    args = ap.parse_args()
    c = Checker(args.root)
    checks = args.only.split(",")
    for name in checks:
        if name not in CHECKS:
            c.fail("usage", f"--only: no check '{name}' (expected {', '.join(CHECKS)})")
    for name in (n for n in CHECKS if n in checks):
        if name != "tables":
            getattr(c, "check_" + name)()
        elif args.anvil:
            c.check_tables(args.anvil)
        else:
            c.fail("tables", "no --anvil binary given")
    for p in c.problems:
        print(p)
    print(f"check_docs: {len(c.problems)} problem(s) in {', '.join(checks)}")
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main())
