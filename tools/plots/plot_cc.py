#!/usr/bin/python3
"""Plots of the congestion-control scenarios (docs/results/cc.md).

Input: a JSON-lines file holding the summary lines of `sroce-sim run cc-*
--json --quiet` (what `make bench-cc` prints). Output: two PNGs,
  <out>-summary.png   p99 slowdown, queue p99 and PFC pauses per scenario and
                      algorithm (lossless), and p99 slowdown lossy;
  <out>-ablation.png  the Odin ablation of cc-alltoall (if present).

  /usr/bin/python3 tools/plots/plot_cc.py docs/results/cc-bench.jsonl docs/results/cc
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ALGS = ["dcqcn", "hpcc", "odin", "delay", "none"]
COLORS = {"dcqcn": "#d62728", "hpcc": "#1f77b4", "odin": "#2ca02c", "delay": "#9467bd",
          "none": "#7f7f7f"}


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            j = json.loads(line)
            if j.get("event") == "summary" and str(j.get("scenario", "")).startswith("cc-"):
                rows.append(j)
    return rows


def bars(ax, rows, key, mode, title, log=False):
    width = 0.8 / len(ALGS)
    for k, alg in enumerate(ALGS):
        xs, ys = [], []
        for i, r in enumerate(rows):
            src = r if mode == "lossless" else r.get("lossy", {})
            if alg in src:
                xs.append(i + (k - len(ALGS) / 2 + 0.5) * width)
                ys.append(max(src[alg][key], 1e-9 if log else 0))
        ax.bar(xs, ys, width, label=alg, color=COLORS[alg])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["scenario"] for r in rows], fontsize=8)
    ax.set_title(title, fontsize=9)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    if not rows:
        sys.exit("no cc-* summary lines in " + sys.argv[1])
    out = sys.argv[2]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    bars(axes[0][0], rows, "p99_slowdown", "lossless", "p99 FCT slowdown, lossless (PFC)")
    bars(axes[0][1], rows, "queue_p99_bytes", "lossless", "switch queue p99 (bytes), lossless",
         log=True)
    bars(axes[1][0], rows, "pfc_pauses", "lossless", "PFC pauses, lossless")
    bars(axes[1][1], rows, "p99_slowdown", "lossy", "p99 FCT slowdown, lossy (lanes + SR)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out + "-summary.png", dpi=110)

    a2a = [r for r in rows if r["scenario"] == "cc-alltoall" and "odin_no_flag" in r]
    if a2a:
        r = a2a[0]
        names = ["hpcc", "odin", "odin_no_flag", "odin_no_ratio", "odin_no_compensation"]
        names = [n for n in names if n in r]
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
        for ax, key, title in zip(axes, ["p99_slowdown", "pfc_pauses", "queue_p99_bytes"],
                                  ["p99 slowdown", "PFC pauses", "queue p99 (bytes)"]):
            ax.bar(range(len(names)), [r[n][key] for n in names],
                   color=["#1f77b4", "#2ca02c", "#98df8a", "#98df8a", "#98df8a"][:len(names)])
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels([n.replace("odin_", "-") for n in names], fontsize=8, rotation=20)
            ax.set_title("cc-alltoall: " + title, fontsize=9)
            ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out + "-ablation.png", dpi=110)


if __name__ == "__main__":
    main()
