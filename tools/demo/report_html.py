"""The demo's HTML report (report.py calls write()): three PNG charts made with matplotlib
(/usr/bin/python3's) and one self-contained HTML page that embeds them, beside the text of
the report and the full tables.

  throughput_per_qp.png   send rate of each of h1's ib_write_bw QPs over time, from the
                          daemon's per-QP tx bytes between consecutive samples
  packets_per_spine.png   RoCE packets that entered each spine, per direction, during
                          ib_write_bw and ibv_rc_pingpong (the fabric's counters)
  latency_histogram.png   ib_write_lat's samples (perftest -H), log-scaled counts
"""

from __future__ import annotations

import base64
import html
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _throughput(path: str, qps: list[dict]) -> bool:
    fig, ax = plt.subplots(figsize=(7, 3.2))
    drawn = False
    for e in qps:
        s = e["series"]
        if len(s) < 2:
            continue
        t0 = s[0][0]
        xs, ys = [], []
        for (ta, ba), (tb, bb) in zip(s, s[1:]):
            if tb > ta:
                xs.append((tb - t0))
                ys.append((bb - ba) * 8 / (tb - ta) / 1e9)
        ax.plot(xs, ys, marker=".", label=f"QP {e['qpn']} ({e['gbps']:.2f} Gbit/s mean)")
        drawn = True
    ax.set_xlabel("seconds since the QP's first sample")
    ax.set_ylabel("Gbit/s sent")
    ax.set_title("ib_write_bw: throughput per QP (h1's sroced counters)")
    if drawn:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn


def _spines(path: str, spines: dict) -> bool:
    runs = [(tag, c) for tag, c in spines.items() if c.get("h1>h2")]
    if not runs:
        return False
    fig, axes = plt.subplots(1, len(runs), figsize=(3.6 * len(runs), 3.2), squeeze=False)
    for ax, (tag, counts) in zip(axes[0], runs):
        names = sorted(counts["h1>h2"], key=lambda s: int(s[1:]))
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], [counts["h1>h2"].get(s, 0) for s in names], 0.4, label="h1 -> h2")
        ax.bar([i + 0.2 for i in x], [counts["h2>h1"].get(s, 0) for s in names], 0.4, label="h2 -> h1")
        ax.set_xticks(list(x), names)
        ax.set_title(tag)
        ax.set_ylabel("RoCE packets")
        ax.legend(fontsize=7)
    fig.suptitle("packets per spine")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _latency(path: str, samples: list[float], lat: dict | None) -> bool:
    if not samples:
        return False
    fig, ax = plt.subplots(figsize=(7, 3.2))
    hi = sorted(samples)[int(len(samples) * 0.999) - 1] if len(samples) > 10 else max(samples)
    ax.hist([min(s, hi) for s in samples], bins=60, log=True)
    if lat:
        for k, style in (("p50", "-"), ("p99", "--")):
            ax.axvline(lat[k], color="k", linestyle=style, linewidth=1, label=f"{k} {lat[k]:.1f} us")
        ax.legend(fontsize=8)
    ax.set_xlabel(f"us (half the round trip; the top 0.1 % folded into the last bin at {hi:.0f})")
    ax.set_ylabel("samples")
    ax.set_title(f"ib_write_lat 64 B: {len(samples)} samples")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(out_dir: str, fig: dict, qps: list[dict], spines: dict, lat_samples: list[float],
          text: list[str], tables: list[str]) -> str:
    charts = []
    for name, ok in (("throughput_per_qp.png", _throughput(os.path.join(out_dir, "throughput_per_qp.png"), qps)),
                     ("packets_per_spine.png", _spines(os.path.join(out_dir, "packets_per_spine.png"), spines)),
                     ("latency_histogram.png", _latency(os.path.join(out_dir, "latency_histogram.png"),
                                                        lat_samples, fig.get("write_lat")))):
        if ok:
            with open(os.path.join(out_dir, name), "rb") as f:
                charts.append((name, base64.b64encode(f.read()).decode()))
    page = ["<!doctype html><html><head><meta charset='utf-8'><title>sroce demo</title>",
            "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
            "pre{background:#f4f4f4;padding:1em;overflow-x:auto;font-size:12px}</style></head><body>",
            "<h1>sroce demo</h1><p>Unchanged Debian RDMA programs across two namespaced hosts over four "
            "spines, one sroced per host (docs/demo.md).</p>",
            "<h2>Summary</h2><pre>" + html.escape("\n".join(text)) + "</pre>"]
    for name, data in charts:
        page.append(f"<h2>{html.escape(name[:-4].replace('_', ' '))}</h2>"
                    f"<img alt='{name}' src='data:image/png;base64,{data}'>")
    page += ["<h2>Full tables</h2><pre>" + html.escape("\n".join(tables)) + "</pre></body></html>"]
    path = os.path.join(out_dir, "report.html")
    with open(path, "w") as f:
        f.write("\n".join(page))
    return path
