#!/usr/bin/python3
"""Plots of ltp-eval (docs/cc/ltp.md).

Input: a JSON-lines file with the summary line of `sroce-sim run ltp-eval
--json --quiet` (what `make bench-ltp` writes). Output in OUTDIR:
  ltp-summary.png   utilisation, p99 queueing delay and Jain per controller
                    (mean over the environments), and the filter's error
                    with and without probing;
  ltp-envs.png      utilisation and p99 queueing delay per environment.

  /usr/bin/python3 tools/plots/ltp_plots.py docs/results/ltp-eval.jsonl docs/results
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ALGS = ["ltp", "ltp_noprobe", "ltp_nofilter", "hpcc", "dcqcn", "delay"]
COLORS = {"ltp": "#2ca02c", "ltp_noprobe": "#98df8a", "ltp_nofilter": "#bcbd22",
          "hpcc": "#1f77b4", "dcqcn": "#d62728", "delay": "#9467bd"}


def load(path):
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            j = json.loads(line)
            if j.get("event") == "summary" and j.get("scenario") == "ltp-eval":
                return j
    sys.exit(f"ltp_plots: no ltp-eval summary line in {path}")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: ltp_plots.py SUMMARY.jsonl OUTDIR")
    s = load(sys.argv[1])
    out = sys.argv[2]
    algs = [a for a in ALGS if f"util_{a}" in s]
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    for ax, key, title in [(axes[0], "util_", "bottleneck utilisation"),
                           (axes[1], "qdelay_p99_us_", "p99 queueing delay (us)"),
                           (axes[2], "jain_", "Jain (flow rates)")]:
        ax.bar(range(len(algs)), [s[key + a] for a in algs], color=[COLORS[a] for a in algs])
        ax.set_xticks(range(len(algs)))
        ax.set_xticklabels(algs, rotation=35, ha="right")
        ax.set_title(title)
    axes[0].axhline(0.9, color="k", ls="--", lw=0.8)
    axes[2].axhline(0.95, color="k", ls="--", lw=0.8)
    est = [(a, s[f"est_err_{a}"]) for a in ["ltp", "ltp_noprobe", "ltp_nofilter"] if f"est_err_{a}" in s]
    axes[3].bar(range(len(est)), [v for _, v in est], color=[COLORS[a] for a, _ in est])
    axes[3].set_xticks(range(len(est)))
    axes[3].set_xticklabels([a for a, _ in est], rotation=35, ha="right")
    axes[3].set_title("filter |log2(estimate / fair share)|")
    fig.suptitle(f"ltp-eval, {s['envs']} unseen incast environments (seed {s['seed']})")
    fig.tight_layout()
    fig.savefig(f"{out}/ltp-summary.png", dpi=110)

    envs = s["per_env"]
    fig, axes = plt.subplots(1, 2, figsize=(14, 3.8))
    width = 0.8 / len(algs)
    labels = [f"{e['gbps']}G {e['delay_ns'] * 8 / 1000:.0f}us x{e['fanin']}" for e in envs]
    for k, a in enumerate(algs):
        xs = [i + (k - len(algs) / 2) * width + width / 2 for i in range(len(envs))]
        axes[0].bar(xs, [e[a]["util"] for e in envs], width, color=COLORS[a], label=a)
        axes[1].bar(xs, [max(e[a]["qdelay_p99_us"], 1e-3) for e in envs], width, color=COLORS[a])
    for ax, t in [(axes[0], "bottleneck utilisation"), (axes[1], "p99 queueing delay (us, log)")]:
        ax.set_xticks(range(len(envs)))
        ax.set_xticklabels(labels, rotation=20, ha="right")
        ax.set_title(t)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(f"{out}/ltp-envs.png", dpi=110)


if __name__ == "__main__":
    main()
