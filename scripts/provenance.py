#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The provenance block of every JSON file a Python writer of anvil makes (Note [Provenance] in
engine/core/provenance.h: the same fields, under the same names, as the C++ writers).

    import provenance as P                      # scripts/ on sys.path
    doc["provenance"] = P.provenance()          # anvil's version, revision, host, CPU, GPU, ...
    P.provenance(P.torch_libraries(torch))      # a peer adds its framework's versions
    P.from_bench_context(ctx)                   # what anvil_bench itself recorded in its context

    python3 scripts/provenance.py [--out FILE]  # {"provenance": {...}} for a shell writer

The revision is ANVIL_GIT_REVISION when set (the GPU kit sets it from KIT.txt: its machine has a
copy of the tree without .git), else `git rev-parse --short HEAD` with "+dirty" when tracked files
differ from HEAD (as cmake/WriteGitRevision.cmake), else "unknown". The GPU is torch's view when a
peer passes torch, else nvidia-smi's, else "none (...)" saying why.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import socket
import subprocess
import sys

SCHEMA = "anvil-provenance/1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def anvil_version() -> str:
    """The release in the top-level CMakeLists.txt's project() (CMake's PROJECT_VERSION)."""
    try:
        with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
            m = re.search(r"project\(anvil\s+VERSION\s+([0-9.]+)", f.read())
    except OSError:
        return "unknown"
    return m.group(1) if m else "unknown"


def git_revision() -> str:
    given = os.environ.get("ANVIL_GIT_REVISION", "").strip()
    if given:
        return given
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=False)
        if head.returncode != 0 or not head.stdout.strip():
            return "unknown"
        dirty = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD"], capture_output=True, check=False)
    except OSError:  # no git
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.returncode != 0 else "")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def gpu_text(torch=None) -> str:
    """"<name> x<count>" of the visible CUDA devices, as the C++ side writes it, or why none."""
    if torch is not None:
        if not torch.cuda.is_available():
            return "none (torch sees no CUDA device)"
        return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "none (no nvidia-smi)"
    names = [n.strip() for n in smi.stdout.splitlines() if n.strip()]
    if smi.returncode != 0 or not names:
        return "none (nvidia-smi lists no GPU)"
    return f"{names[0]} x{len(names)}"


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance(libraries: dict | None = None, torch=None) -> dict:
    """The fields in Note [Provenance]'s order; library.python always, then `libraries` by name."""
    libs = {"python": platform.python_version(), **(libraries or {})}
    out = {
        "schema": SCHEMA,
        "anvil_version": anvil_version(),
        "git_revision": git_revision(),
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "gpu": gpu_text(torch),
        "timestamp_utc": utc_now(),
    }
    out.update({f"library.{name}": str(libs[name]) for name in sorted(libs)})
    return out


def torch_libraries(torch) -> dict:
    """PyTorch's version and what it was built with (its BLAS, oneDNN, CUDA and cuDNN); the
    run's configuration (threads, allocator, ...) is in each peer row's "config"."""
    show = torch.__config__.show().splitlines()
    libs = {"torch": torch.__version__,
            "torch.cuda": torch.version.cuda or "none",
            "torch.blas": next((l.strip(" -") for l in show if "Math Kernel Library" in l or "OpenBLAS" in l),
                               "unknown"),
            "torch.onednn": next((l.strip(" -") for l in show if "MKL-DNN" in l or "oneDNN" in l), "unknown")}
    # cudnn.version() loads libcudnn (hundreds of MB of resident memory in a CPU peer whose rows
    # report their RSS), so it is asked only where CUDA already runs.
    if not torch.backends.cudnn.is_available():
        libs["torch.cudnn"] = "none"
    elif torch.cuda.is_initialized():
        libs["torch.cudnn"] = str(torch.backends.cudnn.version())
    else:
        libs["torch.cudnn"] = "built in, not loaded"
    return libs


def tensorflow_libraries(tf, keras=None) -> dict:
    """TensorFlow's (and Keras') version, its CUDA/cuDNN build and whether oneDNN is on."""
    build = tf.sysconfig.get_build_info() if hasattr(tf.sysconfig, "get_build_info") else {}
    libs = {"tensorflow": tf.__version__,
            "tensorflow.cuda": build.get("cuda_version", "none") if build.get("is_cuda_build") else "none",
            "tensorflow.cudnn": build.get("cudnn_version", "none") if build.get("is_cuda_build") else "none",
            "tensorflow.onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default")}
    if keras is not None:
        libs["keras"] = keras.__version__
    return libs


def from_bench_context(context: dict) -> dict:
    """The provenance anvil_bench recorded in its JSON context ("anvil.<field>"): the binary's own
    revision and kernel libraries, not this script's checkout; {} when the context has none."""
    return {k[len("anvil."):]: v for k, v in context.items() if k.startswith("anvil.")}


def main() -> None:
    p = argparse.ArgumentParser(description="Prints the provenance block (Note [Provenance]) as JSON.")
    p.add_argument("--out", help="write to this file instead of standard output")
    a = p.parse_args()
    text = json.dumps({"provenance": provenance()}, indent=2) + "\n"
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
