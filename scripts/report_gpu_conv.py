#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The per-layer GPU conv table of issue 20 from anvil_bench JSON files (bench/kernel_bench.cpp:
# kernel/conv2d/<variant>/<pass>/<model>:<layer>/batch:<b>/device:cuda): for every layer and
# pass, the fastest IEEE-FP32 variant (cuDNN families and cuda.custom.im2col; TF32 apart), the
# default's choice (its label names the algorithm) and its distance from the fastest, and how
# often each family wins (DLBench's "FFT is fastest" finding, re-measured).
#   python3 scripts/report_gpu_conv.py anvil_bench.json [more.json ...] > gpu_conv_layers.md
import json
import re
import sys
from collections import Counter, defaultdict

NAME = re.compile(r"kernel/conv2d/([^/]+)/(forward|backward_data|backward_weights)/"
                  r"([^/:]+):([^/]+)/batch:(\d+)/device:cuda")
TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def load(paths):
    rows = {}
    for path in paths:
        with open(path) as f:
            for b in json.load(f).get("benchmarks", []):
                m = NAME.match(b.get("name", ""))
                if not m or b.get("run_type", "iteration") == "aggregate":
                    continue
                variant, pss, model, layer, batch = m.groups()
                key = (model, layer, int(batch), pss)
                entry = {"label": b.get("label", variant)}
                if b.get("error_occurred"):
                    entry["error"] = b.get("error_message", "error")
                else:
                    entry["ms"] = float(b["real_time"]) * TO_MS[b.get("time_unit", "ns")]
                rows.setdefault(key, {})[variant] = entry
    return rows


def table(rows):
    out = ["# conv2d on the GPU, per layer and pass", "",
           "Times are GPU time per call (CUDA events), FP32 with TF32 off unless marked. "
           "`fastest` is over the IEEE variants (cuDNN algorithm families, cuda.custom.im2col); "
           "`default` is what the op layer runs (cuda.cudnn: cudnnFind*AlgorithmEx's winner), "
           "with the algorithm it chose.", "",
           "| layer | batch | pass | fastest | ms | default (algorithm) | ms | default / fastest "
           "| tf32 ms | declined |",
           "|---|---:|---|---|---:|---|---:|---:|---:|---:|"]
    wins = Counter()
    ratios = []
    for (model, layer, batch, pss), variants in sorted(rows.items()):
        ieee = {v: e for v, e in variants.items()
                if "ms" in e and v not in ("default", "cuda.cudnn", "cuda.cudnn.tf32")}
        declined = sum(1 for e in variants.values() if "error" in e)
        best = min(ieee, key=lambda v: ieee[v]["ms"]) if ieee else None
        if best:
            wins[best] += 1
        d = variants.get("default", {})
        ratio = ""
        if best and "ms" in d:
            r = d["ms"] / ieee[best]["ms"]
            ratios.append(r)
            ratio = f"{r:.2f}"
        tf32 = variants.get("cuda.cudnn.tf32", {})
        out.append("| {}:{} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            model, layer, batch, pss, best or "-", f"{ieee[best]['ms']:.3f}" if best else "-",
            d.get("label", "-") if "ms" in d else d.get("error", "-")[:60],
            f"{d['ms']:.3f}" if "ms" in d else "-", ratio or "-",
            f"{tf32['ms']:.3f}" if "ms" in tf32 else "-", declined))
    out += ["", "## Fastest IEEE variant, counted over layers x passes", ""]
    out += ["| variant | wins |", "|---|---:|"]
    out += [f"| {v} | {n} |" for v, n in wins.most_common()]
    fft = sum(n for v, n in wins.items() if "fft" in v)
    total = sum(wins.values())
    out += ["", f"FFT families fastest on {fft} of {total} layer-passes."]
    if ratios:
        ratios.sort()
        out.append(f"default / fastest: median {ratios[len(ratios) // 2]:.2f}, "
                   f"worst {ratios[-1]:.2f} over {len(ratios)} layer-passes.")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) < 2:
        print(__doc__ or "usage: report_gpu_conv.py anvil_bench.json [...]", file=sys.stderr)
        return 2
    rows = load(argv[1:])
    if not rows:
        print("no kernel/conv2d/.../device:cuda benchmarks in " + " ".join(argv[1:]))
        return 0
    sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
