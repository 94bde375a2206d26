#!/usr/bin/python3
"""Plots of issue 4's lossy-mode experiments (docs/results/lossy.md).

Reads the JSON lines the sroce-sim scenarios wrote (the last line of each
file is the summary) and writes one PNG per experiment beside them:

    /usr/bin/python3 tools/plots/plot_lossy.py [docs/results]

Uses Debian's matplotlib (/usr/bin/python3; the python3 first on PATH lacks it).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def summary(path):
    last = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                d = json.loads(line)
                if d.get("event") == "summary":
                    last = d
    if last is None:
        raise SystemExit(f"{path}: no summary line")
    return last


MODES = [("gbn", "go-back-N (compatible)", "tab:red"),
         ("sr", "selective repeat, 1 lane", "tab:blue"),
         ("lanes", "selective repeat, 16 lanes", "tab:green")]


def plot_loss_sweep(d, out):
    s = summary(os.path.join(d, "lossy-loss-sweep.jsonl"))
    alt = os.path.join(d, "lossy-loss-sweep-rt20.jsonl")
    s20 = summary(alt) if os.path.exists(alt) else None
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    losses = sorted({r["loss_pct"] for r in s["table"]})
    xs = list(range(len(losses)))
    for mode, label, color in MODES:
        g = [next(r["goodput_gbps"] for r in s["table"] if r["mode"] == mode and r["loss_pct"] == L)
             for L in losses]
        ax[0].plot(xs, g, "o-", color=color, label=label)
        if s20 is not None and mode != "gbn":
            g20 = [next(r["goodput_gbps"] for r in s20["table"]
                        if r["mode"] == mode and r["loss_pct"] == L) for L in losses]
            ax[0].plot(xs, g20, "s--", color=color, alpha=0.6, label=label + ", reorder timer 20 us")
        ratios = [r[mode] for r in s["ratios"]]
        ax[1].plot(xs, ratios, "o-", color=color, label=label)
    for a in ax:
        a.set_xticks(xs)
        a.set_xticklabels([f"{L:g}" for L in losses])
        a.set_xlabel("random loss per path (%)")
        a.grid(alpha=0.3)
    ax[0].set_ylabel("goodput (Gbit/s), 100 Gbit/s links")
    ax[0].set_title(f"loss-sweep: one QP, {s['bytes'] >> 20} MiB of WRITEs")
    ax[0].legend(fontsize=7)
    ax[1].axhline(0.9, color="gray", ls=":", label="aim 0.9 at 1 %")
    ax[1].set_ylabel("goodput / goodput at 0 % loss")
    ax[1].set_ylim(0, 1.05)
    ax[1].set_title("goodput ratio (default 50 us reorder timer)")
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lossy-loss-sweep.png"), dpi=110)


def plot_reorder(d, out):
    s = summary(os.path.join(d, "lossy-reorder-only.jsonl"))
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    names = ["lanes (per-lane gaps)", "gap is loss (IRN-style)"]
    spur = [s["spurious_retx_lanes"], s["spurious_retx_naive"]]
    gp = [s["goodput_gbps_lanes"], s["goodput_gbps_naive"]]
    ax[0].bar(names, spur, color=["tab:green", "tab:orange"])
    for i, v in enumerate(spur):
        ax[0].text(i, v, str(v), ha="center", va="bottom")
    ax[0].set_ylabel("spurious retransmissions")
    ax[0].set_title("reorder-only: 4 paths, 1/2/4/8 us per link, no loss")
    ax[1].bar(names, gp, color=["tab:green", "tab:orange"])
    ax[1].set_ylabel("goodput (Gbit/s)")
    ax[1].set_title("goodput")
    for a in ax:
        a.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lossy-reorder-only.png"), dpi=110)


def plot_path_failure(d, out):
    s = summary(os.path.join(d, "lossy-path-failure.jsonl"))
    t = s["rx_gbps_timeline"]
    b = s["bin_us"]
    xs = [(i + 1) * b for i in range(len(t))]
    fig, ax = plt.subplots(figsize=(11, 3.8))
    ax.plot(xs, t, lw=0.8, color="tab:green", label=f"receiver goodput per {b:g} us bin")
    ax.axvline(s["blackhole_us"], color="black", ls="--", label=f"spine {s['blackhole_spine']} blackholes")
    if s["detect_us"] >= 0:
        ax.axvline(s["blackhole_us"] + s["detect_us"], color="tab:red", ls=":",
                   label=f"its {s['lanes_dead_path']} lanes retired (+{s['detect_us']:.0f} us)")
    ax.axhline(s["goodput_gbps_nofailure"], color="gray", ls=":", lw=0.8,
               label=f"no failure: {s['goodput_gbps_nofailure']:.1f} Gbit/s")
    act = s.get("dead_lanes_active_timeline")
    if act:
        ax2 = ax.twinx()
        ax2.step(xs[:len(act)], act, where="post", color="tab:red", lw=0.8, alpha=0.7)
        ax2.set_ylabel("dead-spine lanes in service (probes)", color="tab:red")
        ax2.set_ylim(0, max(act) * 4 + 1)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("Gbit/s")
    ax.set_title(f"path-failure: 16 lanes over 4 spines; lost WRs {s['lost_wrs']}, "
                 f"goodput {s['goodput_gbps']:.1f} Gbit/s")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lossy-path-failure.png"), dpi=110)


def plot_trim(d, out):
    s = summary(os.path.join(d, "lossy-trim.jsonl"))
    names = ["trim", "no trim (drop)", "PFC (lossless)"]
    keys = ["trim", "notrim", "pfc"]
    colors = ["tab:purple", "tab:red", "tab:gray"]
    fig, ax = plt.subplots(1, 3, figsize=(14, 3.8))
    ax[0].bar(names, [s[k]["p99_fct_us"] for k in keys], color=colors)
    ax[0].set_ylabel("p99 FCT (us)")
    ax[0].set_title("trim: 31-to-1 incast of 1 MB, 4 MB buffer")
    ax[1].bar(names, [s[k]["timeouts"] for k in keys], color=colors)
    ax[1].set_ylabel("retransmission timeouts")
    ax[1].set_title("RTOs (all senders)")
    for a in ax[:2]:
        a.tick_params(axis="x", labelsize=8)
    fan = os.path.join(d, "lossy-trim-fanin.jsonl")
    if os.path.exists(fan):
        rows = [json.loads(x) for x in open(fan) if x.strip()]
        n = [r["trim"]["flows"] for r in rows]
        for k, label, color in zip(keys, names, colors):
            ax[2].plot(n, [r[k]["p99_fct_us"] for r in rows], "o-", color=color, label=label)
        ax[2].set_xlabel("incast fan-in (1 MB each)")
        ax[2].set_ylabel("p99 FCT (us)")
        ax[2].set_title("by fan-in")
        ax[2].legend(fontsize=7)
        ax[2].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lossy-trim.png"), dpi=110)


def plot_spray(d, out):
    s = summary(os.path.join(d, "lossy-spray-vs-ecmp.jsonl"))
    names = ["1 lane (ECMP)", "16 lanes (spray)"]
    keys = ["ecmp", "lanes"]
    colors = ["tab:red", "tab:green"]
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.8))
    ax[0].bar(names, [s[k]["p99_fct_us"] for k in keys], color=colors)
    ax[0].set_ylabel("p99 FCT (us)")
    ax[0].set_title(f"permutation, {s['hosts']} hosts, 4 MB flows")
    ax[1].bar(names, [s[k]["util_fabric_max"] for k in keys], color=colors, label="max")
    ax[1].bar(names, [s[k]["util_fabric_mean"] for k in keys], color="white", alpha=0.6,
              hatch="//", label="mean")
    ax[1].set_ylabel("leaf-spine link utilisation")
    ax[1].set_ylim(0, 1)
    ax[1].legend(fontsize=7)
    ax[1].set_title("fabric links (max, mean)")
    ax[2].bar(names, [s[k]["pfc_pauses"] for k in keys], color=colors)
    ax[2].set_ylabel("PFC pauses")
    ax[2].set_title("PFC XOFF")
    for a in ax:
        a.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lossy-spray-vs-ecmp.png"), dpi=110)


def plot_lane_weights(d, out):
    s = summary(os.path.join(d, "lossy-lane-weights.jsonl"))
    runs = s["runs"]
    names = ["equal spraying", "lane weights"]
    keys = ["equal", "weighted"]
    colors = ["tab:orange", "tab:green"]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].bar(names, [runs[k]["goodput_gbps"] for k in keys], color=colors)
    ax[0].set_ylabel("goodput (Gbit/s)")
    ax[0].set_title(f"4 spines, spine {s['slow_spine']} at {s['slow_gbps']} Gbit/s")
    x = range(2)
    ax[1].bar([i - 0.2 for i in x], [runs[k]["p50_fct_us"] for k in keys], 0.4, color=colors,
              label="p50")
    ax[1].bar([i + 0.2 for i in x], [runs[k]["p99_fct_us"] for k in keys], 0.4, color=colors,
              hatch="//", alpha=0.6, label="p99")
    ax[1].set_xticks(list(x))
    ax[1].set_xticklabels(names)
    ax[1].set_ylabel("64 KiB WRITE completion time (us)")
    ax[1].legend(fontsize=7)
    ax[1].set_title("per-WR completion time")
    for i, k in enumerate(keys):
        lanes = runs[k]["per_lane"]
        xs = [l["lane"] + (0.4 * i) for l in lanes]
        cols = ["tab:red" if l["spine"] == s["slow_spine"] else colors[i] for l in lanes]
        ax[2].bar(xs, [l["tx_packets"] for l in lanes], 0.4, color=cols,
                  hatch="" if i == 0 else "..", label=names[i])
    ax[2].set_xlabel("lane (red: through the slow spine)")
    ax[2].set_ylabel("packets sent")
    ax[2].legend(fontsize=7)
    ax[2].set_title("packets per lane")
    for a in ax[:2]:
        a.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "lossy-lane-weights.png"), dpi=110)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "docs/results"
    for fn in (plot_loss_sweep, plot_reorder, plot_path_failure, plot_trim, plot_spray,
               plot_lane_weights):
        fn(d, d)
    print("wrote lossy-*.png in", d)


if __name__ == "__main__":
    main()
