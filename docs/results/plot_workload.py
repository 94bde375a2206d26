#!/usr/bin/python3
"""Plots FCT slowdown by flow size from `sroce-sim run workload --json` summary
lines (one per load), e.g. workload-websearch-nocc.jsonl -> .png.

usage: /usr/bin/python3 plot_workload.py IN.jsonl OUT.png [TITLE]
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, out = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else src
    runs = [json.loads(line) for line in open(src) if line.strip()]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, key in zip(axes, ["p50", "p99"]):
        for r in runs:
            buckets = [b for b in r["by_size"] if b["slowdown"]["count"] > 0]
            xs = [b["size"] for b in buckets]
            ys = [b["slowdown"][key] for b in buckets]
            ax.plot(xs, ys, marker="o", label=f"load {r['load']:.1f} (offered {r['offered_load']:.2f})")
        ax.set_yscale("log")
        ax.set_title(f"{key} FCT slowdown by flow size")
        ax.set_xlabel("flow size")
        ax.grid(True, which="both", alpha=0.3)
        ax.tick_params(axis="x", rotation=20)
    axes[0].set_ylabel("slowdown (FCT / ideal FCT)")
    axes[1].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
