#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Markdown tables of `anvil train --json-log` files (scripts/train_experiments.sh's output).

Usage: scripts/train_table.py results/train/DATE/*.json
One row per run: model, threads, epochs, training time, time to target, testing time, the test
metric, peak memory, CPU utilisation and loader wait; then each run's per-epoch memory, to show
whether it stays flat.
"""
import json
import sys


def main(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            log = json.load(f)
        if log.get("finished"):
            runs.append((p, log))
    print("| run | model | threads | epochs | training s | s/epoch (median) | time to target s | testing s "
          "| test metric | peak RSS MB | allocator peak MB | CPU util % | loader wait % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p, log in runs:
        r, c = log["result"], log["config"]
        metric = log["metric"]
        value = r["test_" + metric]
        shown = f"{value * 100:.2f} % acc" if metric == "accuracy" else f"{value:.1f} ppl"
        epoch_s = sorted(e["train_seconds"] for e in log["epochs"])
        median = epoch_s[len(epoch_s) // 2]
        ttt = r["time_to_target_seconds"]
        target = f"{ttt:.1f} (≥{c['target_accuracy']})" if ttt is not None else (
            f"not reached (≥{c['target_accuracy']})" if "target_accuracy" in c else "–")
        name = p.rsplit("/", 1)[-1].removesuffix(".json")
        print(f"| {name} | {log['model']} | {c['threads']} | {len(log['epochs'])} | {r['training_seconds']:.1f} "
              f"| {median:.1f} | {target} | {r['testing_seconds']:.2f} | {shown} | {r['peak_rss_MB']:.0f} "
              f"| {r['allocator_peak_MB']:.0f} | {r['cpu_utilisation_pct']:.0f} | {r['loader_wait_pct']:.2f} |")
    print()
    print("Per-epoch resident peak (MB), first / second / last epoch; allocator peak the same way:")
    print()
    for p, log in runs:
        e = log["epochs"]
        name = p.rsplit("/", 1)[-1].removesuffix(".json")
        print(f"- {name}: RSS {e[0]['rss_peak_MB']:.0f} / {e[1]['rss_peak_MB']:.0f} / {e[-1]['rss_peak_MB']:.0f}; "
              f"allocator {e[0]['allocator_peak_MB']:.1f} / {e[1]['allocator_peak_MB']:.1f} / "
              f"{e[-1]['allocator_peak_MB']:.1f}" if len(e) > 1 else f"- {name}: one epoch")


if __name__ == "__main__":
    main(sys.argv[1:])
