#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The layering lint: every #include in the git-tracked C++/CUDA sources obeys the layering table
of docs/architecture.md and DESIGN.md (CTest: layering_check, tests/CMakeLists.txt).

    check_layering.py REPO_ROOT [FILE ...]     (files default to `git ls-files`; exit 1 on a finding)

Project includes ("engine/core/tensor.h", or a name beside the including file) must point into a
layer the including file's layer may see (LAYER_RULES); third-party headers (<cudnn.h>, <dnnl.hpp>,
<Eigen/...>, MPI, NCCL, ...) may appear only in the folders THIRD_PARTY allows; public headers
(installed: engine/**.h, data/*.h, models/*.h, include/**) expose no third-party header at all.
Known exceptions are listed in ALLOWED, each with its reason.
"""
import os
import pathlib
import re
import subprocess
import sys

SOURCE_EXT = (".cpp", ".h", ".cu", ".cuh", ".hpp", ".cc")

# Layer of a repository path: the first matching prefix wins.
LAYERS = [
    ("engine/core/", "core"),
    ("engine/dispatch/", "dispatch"),
    ("engine/ops/", "ops"),
    ("engine/autograd/", "autograd"),
    ("engine/nn/", "nn"),
    ("engine/optim/", "optim"),
    ("engine/distributed/", "distributed"),
    ("kernels/", "kernels"),
    ("data/", "data"),
    ("models/", "models"),
    ("harness/", "harness"),
    ("include/anvil/", "umbrella"),
    ("tools/", "tools"),
    ("bench/", "bench"),
    ("tests/", "tests"),
    ("examples/", "examples"),
]
ENGINE = {"core", "dispatch", "ops", "autograd", "nn", "optim", "distributed"}
# Which layers each layer may include (docs/architecture.md, "Layering"):
#   core <- dispatch <- ops <- autograd <- nn/optim <- distributed; kernels see core and dispatch;
#   data sees core.
LAYER_RULES = {
    "core": {"core"},
    "dispatch": {"core", "dispatch"},
    "ops": {"core", "dispatch", "ops"},
    "autograd": {"core", "dispatch", "ops", "autograd"},
    "nn": {"core", "dispatch", "ops", "autograd", "nn"},
    # Checkpoints (engine/optim/checkpoint.h) save a Module with its optimizer; nn never sees optim.
    "optim": {"core", "dispatch", "ops", "autograd", "nn", "optim"},
    # Data parallelism (Note [Communicator layering]): the communicators need core only; the
    # data-parallel wrapper sees the module, its gradients' hooks and the optimizer it steps.
    "distributed": {"core", "dispatch", "ops", "autograd", "nn", "optim", "distributed"},
    "kernels": {"core", "dispatch", "kernels"},
    "data": {"core", "data"},
    "models": ENGINE | {"models", "data"},
    "umbrella": ENGINE | {"models", "data"},
    "tools": ENGINE | {"models", "data", "umbrella", "tools"},
    # What tests and benchmarks share about op problems (descriptors); not installed, and seen
    # by bench and tests only.
    "harness": ENGINE | {"models", "harness"},
    "bench": ENGINE | {"kernels", "models", "data", "umbrella", "harness", "bench"},
    "tests": None,  # tests may include anything
    "examples": {"umbrella"},  # an installed consumer: <anvil/...> only
}

# Third-party headers: (pattern on the included name, folders/files allowed to include it).
# Patterns are regular expressions on the <...> name; allowed entries are regular expressions on
# the repository path of the including file.
THIRD_PARTY = [
    (r"(cuda|cuda_runtime|cuda_runtime_api|cuda_fp16|cuda_bf16|cublas.*|cublasLt|cudnn.*|curand.*|"
     r"cufft.*|cusparse.*|cooperative_groups|thrust/.*|cub/.*)(\.h|\.hpp|\.cuh)?",
     [r"kernels/cuda/", r"tests/cuda/"]),
    (r"nccl(_net)?\.h", [r"kernels/cuda/", r"tests/cuda/"]),
    (r"mpi\.h|mpi\.hpp|mpi_.*\.h", [r".*/[^/]*mpi[^/]*\.(cpp|cc)$", r"tests/.*mpi.*"]),
    (r"(oneapi/dnnl/.*|dnnl.*\.h(pp)?)", [r"kernels/cpu/onednn/"]),
    (r"(Eigen|unsupported/Eigen)/.*", [r"kernels/cpu/eigen/"]),
    (r"benchmark/.*", [r"bench/"]),
    (r"catch2/.*", [r"tests/"]),
    # CLI11: the CLI's options, and anvil_bench's --anvil_* flags (one parser, issue 38).
    (r"CLI/.*", [r"tools/", r"bench/bench_flags\.cpp$"]),
    (r"fmt/.*", [r"tools/"]),
    # The JSON reader of input files (engine/core/json_reader.cpp) and the safetensors writer.
    (r"nlohmann/.*", [r"engine/core/(safetensors|json_reader)\.cpp$", r"data/.*\.cpp$", r"tools/",
                      r"tests/", r"bench/.*\.cpp$"]),
    (r"zlib\.h", [r"data/.*\.cpp$", r"tests/"]),
    # OpenMP: the thread knob (engine/core/config.cpp) and the CPU kernels.
    (r"omp\.h", [r"engine/core/config\.cpp$", r"kernels/cpu/", r"tests/", r"bench/"]),
]

# Known exceptions: (including file, included path) -> reason. Keep this list short.
ALLOWED = {
    ("tools/anvil/main.cpp", "kernels/cpu/peak/machine_peak.h"):
        "`anvil info` prints the machine's measured peak, which lives beside the kernels it "
        "measures (kernels/cpu/peak/) and has no public header",
}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def layer_of(path):
    for prefix, layer in LAYERS:
        if path.startswith(prefix):
            return layer
    return None


def is_public_header(path):
    if not path.endswith((".h", ".hpp")):
        return False
    return (path.startswith("engine/") or path.startswith("include/") or
            re.match(r"(data|models)/[^/]+\.h$", path) is not None)


def resolve_quoted(root, path, name):
    """The repository path a quoted include names, or None (system/generated header)."""
    here = (root / path).parent / name
    if here.exists():
        return os.path.relpath(here.resolve(), root.resolve())
    for base in ("", "include/"):
        if (root / base / name).exists():
            return base + name
    return None


def check_file(root, path, text):
    problems = []
    layer = layer_of(path)
    for lineno, line in enumerate(text.splitlines(), 1):
        m = INCLUDE_RE.match(line)
        if not m:
            continue
        kind, name = m.groups()
        where = f"{path}:{lineno}: #include {kind}{name}{'>' if kind == '<' else chr(34)}"
        # Third-party headers: only where THIRD_PARTY allows, never in a public header.
        for pattern, allowed in THIRD_PARTY:
            if re.fullmatch(pattern, name):
                if is_public_header(path):
                    problems.append(f"{where}: a public header exposes a third-party header")
                elif not any(re.match(a, path) for a in allowed):
                    problems.append(f"{where}: this third-party header is allowed only in "
                                    + ", ".join(a.rstrip("$") for a in allowed))
                break
        # Project headers: the target's layer must be visible from the including layer.
        target = resolve_quoted(root, path, name) if kind == '"' else None
        if kind == "<" and (root / "include" / name).exists():
            target = "include/" + name
        if kind == "<" and layer == "examples":
            continue  # an installed consumer includes <anvil/...> from the prefix
        if target is None or layer is None:
            continue
        target_layer = layer_of(target)
        allowed_layers = LAYER_RULES.get(layer)
        if allowed_layers is None or target_layer is None or target_layer in allowed_layers:
            continue
        if (path, target) in ALLOWED:
            continue
        problems.append(f"{where}: layer '{layer}' may not include layer '{target_layer}' "
                        f"(allowed: {', '.join(sorted(allowed_layers))}; docs/architecture.md)")
    return problems


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(sys.argv[1])
    files = sys.argv[2:]
    if not files:
        out = subprocess.run(["git", "-C", str(root), "ls-files"], check=True,
                             capture_output=True, text=True).stdout
        files = [f for f in out.splitlines() if f.endswith(SOURCE_EXT)]
    problems = []
    used_exceptions = set()
    for path in files:
        full = root / path
        if not full.is_file():
            continue
        text = full.read_text(encoding="utf-8", errors="replace")
        problems += check_file(root, path, text)
        for (src, inc) in ALLOWED:
            if src == path and re.search(r'#\s*include\s*"' + re.escape(inc) + '"', text):
                used_exceptions.add((src, inc))
    if len(sys.argv) == 2:  # a full run: an exception nobody needs any more must go
        for key in sorted(set(ALLOWED) - used_exceptions):
            problems.append(f"check_layering.py: ALLOWED entry {key} is no longer needed: remove it")
    for p in problems:
        print(p)
    print(f"check_layering: {len(files)} files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
