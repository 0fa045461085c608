#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes docs/status.md, "what runs where, last measured", from the files in docs/results/.

    status_table.py [REPO_ROOT]            write docs/status.md
    status_table.py [REPO_ROOT] --check    exit 1 if docs/status.md differs from what it would write
    status_table.py [REPO_ROOT] --stdout   print the page instead of writing it

See Note [Status is generated from the results folders].
"""
# Note [Status is generated from the results folders]
# The status of each component (which device it ran on, when, where the proof is) used to be
# restated in the README and half the docs, and those sentences went stale as soon as a newer
# machine ran the code. Now the only status page is docs/status.md, and it is written by this
# script from the machine-readable files a run leaves in a dated folder docs/results/<name>_<date>/:
#   - Google Benchmark JSON written by anvil_bench (benchmark names, `num_cpus`,
#     `anvil.cpu_model`, `anvil.cuda` for the GPU name);
#   - anvil_dist_bench JSON (`context.backend`, `context.ranks`, `context.cpu`);
#   - `anvil train --json-log` logs (`device`, `distributed`);
#   - GPU test case lists (`*.cases.txt`, `gpu_test_cases.txt`: one line per case with its exit
#     status), whose GPU is named by the run's `summary.txt` or the folder's README.
# The date is the folder name's date; a component's row per device is the newest folder with a
# file that shows it ran (a benchmark row, a passed test case, a log). The prose .md result
# files are not read: they state no device in a form a script can trust.
# docs_check (tests/docs/check_docs.py) runs `--check`, and its "notrun" rule fails on a doc
# sentence saying a component has not run on a GPU when a row here shows that it has
# (COMPONENTS' `claims` say which words name each component).
import argparse
import json
import pathlib
import re
import sys

RESULTS = pathlib.Path("docs/results")
STATUS = pathlib.Path("docs/status.md")
FOLDER_DATE = re.compile(r"_(\d{4}-\d{2}-\d{2})[a-z]?$")


class Record:
    """One piece of evidence: something named `name` of `kind` ran on `device` (ok or not)."""

    def __init__(self, kind, name, device, gpu, ok=True, detail=None):
        self.kind, self.name, self.device, self.gpu, self.ok = kind, name, device, gpu, ok
        self.detail = detail or {}
        self.folder = self.date = None


def clean_cpu(model):
    return re.sub(r"\((R|TM)\)", "", model or "unknown CPU").replace("  ", " ").strip()


def gpu_name(cuda_line):
    m = re.search(r"cuda:0 (.+?) \(sm_", cuda_line or "")
    return m[1] if m else "unknown GPU"


def benchmark_records(data):
    ctx = data.get("context", {})
    cpu = f"{ctx.get('num_cpus', '?')}-core {clean_cpu(ctx.get('anvil.cpu_model'))}"
    for b in data.get("benchmarks", []):
        name = b.get("name", "")
        if b.get("error_occurred"):
            continue
        on_gpu = "/device:cuda" in name
        yield Record("bench", name, gpu_name(ctx.get("anvil.cuda")) if on_gpu else cpu, on_gpu)


def find_up(path, results_root, patterns):
    """The first match of (file name, regex) in the folders from path's up to the results
    root, nearest first: the run's own notes over its folder's README."""
    for folder in [path.parent, *path.parent.parents]:
        for name, rx in patterns:
            f = folder / name
            m = re.search(rx, f.read_text(), re.M) if f.is_file() else None
            if m:
                return m[1].strip()
        if folder == results_root:
            break
    return None


def host_cpu(path, results_root, model=None):
    """'16-core Intel Xeon Processor' from the lscpu.txt a run saved beside its files (the
    model from the file itself where the file names none)."""
    cores = find_up(path, results_root, [("lscpu.txt", r"^CPU\(s\):\s+(\d+)")])
    model = model or find_up(path, results_root, [("lscpu.txt", r"^Model name:\s+(.+)$")])
    return f"{cores}-core {clean_cpu(model)}" if cores else clean_cpu(model)


def dist_records(data, path, results_root):
    ctx = data["context"]
    backend, ranks = ctx.get("backend"), int(ctx.get("ranks", 1))
    if backend == "nccl":
        device = "GPU"  # anvil_dist_bench names no GPU; the folder's other files do
        yield Record("dist", f"nccl {ctx.get('mode')}", device, True, detail={"ranks": ranks})
    else:
        yield Record("dist", f"{backend} {ctx.get('mode')}",
                     host_cpu(path, results_root, ctx.get("cpu")), False, detail={"ranks": ranks})


def train_records(data, path, results_root):
    device = data.get("device", "cpu")
    on_gpu = device.startswith("cuda")
    dist = data.get("distributed") or {}
    yield Record("train", data.get("model", "?"),
                 re.sub(r"^cuda:\d+ ", "", device) if on_gpu else
                 host_cpu(path, results_root), on_gpu,
                 ok=bool(data.get("finished")),
                 detail={"backend": dist.get("backend", "single"), "ranks": dist.get("ranks", 1)})


def case_gpu(path, results_root):
    """The GPU a test case list ran on: the run's summary.txt, else the folder's README."""
    return find_up(path, results_root, [("summary.txt", r"^GPU: ([^,\n]+)"),
                                        ("README.md", r"GPU: (NVIDIA [\w ]+?)\s*[(,\n]")]) \
        or "unknown GPU"


def case_records(path, results_root):
    device = case_gpu(path, results_root)
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(" | ")]
        if len(parts) >= 4 and parts[1].startswith("rc="):  # binary | rc=N | 0.9s | name | ...
            rc, name = parts[1][3:], parts[3]
        elif len(parts) >= 3 and parts[0].isdigit():  # rc | seconds | name
            rc, name = parts[0], parts[2]
        else:
            continue
        yield Record("gpu_test", name, device, True, ok=rc == "0",
                     detail={"run": str(path.parent.relative_to(results_root))})


def folder_records(folder, results_root):
    """Every record of one dated results folder (its files, recursively)."""
    for path in sorted(folder.rglob("*")):
        if path.name.endswith(".cases.txt") or path.name == "gpu_test_cases.txt":
            yield from case_records(path, results_root)
            continue
        if path.suffix != ".json":
            continue
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        if isinstance(data.get("benchmarks"), list):
            yield from benchmark_records(data)
        elif isinstance(data.get("context"), dict) and data["context"].get("tool") == \
                "anvil_dist_bench":
            yield from dist_records(data, path, results_root)
        elif data.get("tool") == "anvil train":
            yield from train_records(data, path, results_root)


def collect(root):
    results = root / RESULTS
    records = []
    for folder in sorted(p for p in results.iterdir() if p.is_dir()):
        m = FOLDER_DATE.search(folder.name)
        if not m:
            continue
        for r in folder_records(folder, results):
            r.folder, r.date = folder.name, m[1]
            records.append(r)
    return records


def bench(pattern, gpu):
    rx = re.compile(pattern)
    return lambda r: r.kind == "bench" and r.gpu == gpu and rx.match(r.name)


def passed_case(pattern):
    rx = re.compile(pattern, re.I)
    return lambda r: r.kind == "gpu_test" and r.ok and rx.search(r.name)


def either(*preds):
    return lambda r: any(p(r) for p in preds)


FC = r"model/(fcn5|fcn8|fcn_r|mlp_mnist)/"
CNN = r"model/(alexnet|vgg16|resnet50|cnn_mnist|cnn_cifar)/"
LSTM = r"model/(lstm32|lstm64|ptb_small|lstm_imdb)/"


class Component:
    """A row group of the table. `claims`: the words by which a doc sentence names it (for
    check_docs.py's "notrun" rule); None where no such sentence should be checked. `narrows`:
    the component this one is a special case of ("NCCL across 2+ GPUs" of "NCCL on one GPU"):
    a sentence that names this one is about it, not about the general one."""

    def __init__(self, name, match, claims=None, narrows=None):
        self.name, self.match, self.narrows = name, match, narrows
        self.claims = re.compile(claims, re.I) if claims else None


COMPONENTS = [
    Component("CPU GEMM variants", bench(r"gemm(_remedy)?/", False)),
    Component("CPU steps: fully connected models", bench(FC, False)),
    Component("CPU steps: CNNs (conv, pooling, batch norm)", bench(CNN, False)),
    Component("CPU steps: LSTMs", bench(LSTM, False)),
    Component("CPU data parallelism (Open MPI, 2+ ranks)",
              lambda r: r.kind == "dist" and not r.gpu and r.detail["ranks"] >= 2),
    Component("`anvil train` on 2+ CPU ranks",
              lambda r: r.kind == "train" and not r.gpu and r.ok and r.detail["ranks"] >= 2),
    Component("GPU test cases (`ctest -L gpu` binaries)", lambda r: r.kind == "gpu_test",
              claims=r"\bGPU tests?\b"),
    Component("GPU GEMM (cuBLAS, own tiled)", bench(r"gemm(_remedy)?/", True),
              claims=r"\b(GEMM|cuBLAS)"),
    Component("GPU steps: fully connected models", bench(FC, True),
              claims=r"\b(fully connected|FCN|MLP)"),
    Component("GPU conv, pooling, batch norm (cuDNN, own)",
              either(bench(CNN, True), passed_case(r"conv2d|pooling|batch.norm|CNN")),
              claims=r"\b(conv\w*|CNNs?|cuDNN|pooling|batch.norm)\b"),
    Component("GPU conv per-layer benchmarks (`kernel/conv2d/...`)",
              bench(r"kernel/conv2d/", True), claims=r"\bper-layer\b",
              narrows="GPU conv, pooling, batch norm (cuDNN, own)"),
    Component("GPU LSTM (cuDNN, own fused/unfused)",
              either(bench(LSTM, True), passed_case(r"LSTM")),
              claims=r"\bLSTMs?\b"),
    Component("`anvil train` on the GPU", lambda r: r.kind == "train" and r.gpu and r.ok,
              claims=r"\banvil train\b"),
    Component("NCCL on one GPU",
              lambda r: (r.kind == "dist" and r.gpu) or
              (r.kind == "train" and r.ok and r.detail["backend"] == "nccl"),
              claims=r"\bNCCL\b"),
    Component("NCCL across 2+ GPUs",
              lambda r: ((r.kind == "dist" and r.gpu) or
                         (r.kind == "train" and r.ok and r.detail["backend"] == "nccl"))
              and r.detail["ranks"] >= 2,
              claims=r"\bNCCL\b.*\b(2|two|several|multiple|more) (or more )?(ranks|GPUs)\b"
                     r"|multi-GPU|across (several |multiple |two )?GPUs",
              narrows="NCCL on one GPU"),
]


EVIDENCE = {"bench": "benchmark rows", "gpu_test": "test cases", "dist": "anvil_dist_bench files",
            "train": "training logs"}


def summarise(component, records):
    """{device: ((date, folder), [matching records there])}: the newest folder per device. A
    folder may hold several runs of the GPU tests (docs/results/h200_2026-11-26/ has three);
    only the newest run's cases count."""
    rows = {}
    for r in records:
        if not component.match(r):
            continue
        key = r.device
        if key == "GPU":  # a NCCL file: name the GPU from the folder's other records
            key = next((o.device for o in records if o.folder == r.folder and o.gpu
                        and o.device != "GPU"), "GPU")
        cur = rows.get(key)
        if cur is None or (r.date, r.folder) > cur[0]:
            rows[key] = cur = ((r.date, r.folder), [])
        if (r.date, r.folder) == cur[0]:
            cur[1].append(r)
    for _, matched in rows.values():
        runs = [r.detail["run"] for r in matched if r.kind == "gpu_test"]
        matched[:] = [r for r in matched if r.kind != "gpu_test" or r.detail["run"] == max(runs)]
    return rows


def describe(matched):
    """'16 benchmark rows, 5 test cases passed' for the records of one row."""
    parts = []
    for kind, what in EVIDENCE.items():
        of_kind = [r for r in matched if r.kind == kind]
        if not of_kind:
            continue
        if kind == "gpu_test":
            passed = sum(r.ok for r in of_kind)
            total = "" if passed == len(of_kind) else f" of {len(of_kind)}"
            run = of_kind[0].detail["run"].partition("/")[2]
            parts.append(f"{passed}{total} {what} passed" + (f" ({run}/)" if run else ""))
        else:
            ranks = max(r.detail.get("ranks", 1) for r in of_kind)
            what = what[:-1] if len(of_kind) == 1 else what
            parts.append(f"{len(of_kind)} {what}" + (f", up to {ranks} ranks" if ranks > 1 else ""))
    return ", ".join(parts)


def ran_on_gpu(root):
    """[(component, date, folder)] of the components that ran on a GPU, newest folder each."""
    records = collect(root)
    out = []
    for c in COMPONENTS:
        gpu_runs = [run for run, matched in summarise(c, records).values() if matched[0].gpu]
        if gpu_runs:
            date, folder = max(gpu_runs)
            out.append((c, date, folder))
    return out


def render(root):
    records = collect(root)
    lines = [
        "# Status: what runs where, last measured",
        "",
        "<!-- Generated by scripts/status_table.py from docs/results/; do not edit. -->",
        "",
        "Written by `python3 scripts/status_table.py` from the machine-readable files in the",
        "dated folders of `docs/results/` (benchmark JSON, distributed JSON, training logs, GPU",
        "test case lists); `docs_check` fails when this page is out of date. Per component and",
        "device: the newest folder whose files show that it ran; \"never\": no results folder",
        "shows it. Each folder's README says how it was run and what its numbers mean. Results",
        "kept only as prose (the `.md` files at the top of `docs/results/`) are not read.",
        "",
        "| component | device | last run | results folder | evidence there |",
        "|---|---|---|---|---|",
    ]
    for c in COMPONENTS:
        rows = summarise(c, records)
        if not rows:
            lines.append(f"| {c.name} | | never | | no results folder shows it |")
            continue
        for device, ((date, folder), matched) in sorted(rows.items(), key=lambda kv: kv[1][0],
                                                           reverse=True):
            lines.append(f"| {c.name} | {device} | {date} | "
                         f"[{folder}](results/{folder}/) | {describe(matched)} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=".")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if docs/status.md is not what this script writes")
    mode.add_argument("--stdout", action="store_true", help="print the page, write nothing")
    args = ap.parse_args()
    root = pathlib.Path(args.root).resolve()
    if not (root / RESULTS).is_dir():
        print(f"status_table: error: no {RESULTS}/ under {root}", file=sys.stderr)
        return 2
    page = render(root)
    target = root / STATUS
    if args.stdout:
        sys.stdout.write(page)
    elif args.check:
        current = target.read_text() if target.is_file() else ""
        if current != page:
            print(f"status_table: {STATUS} is out of date with {RESULTS}/ "
                  f"(run: python3 scripts/status_table.py)")
            return 1
    else:
        target.write_text(page)
        print(f"status_table: wrote {STATUS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
