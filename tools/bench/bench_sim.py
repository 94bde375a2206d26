#!/usr/bin/python3
"""`make bench-sim`: the simulator at scale (docs/sim.md, "Scale"); prints one
JSON line.

    tools/bench/bench_sim.py [--build BUILD] [--duration-us US] [--hosts 128,1024]
                             [--alltoall-hosts N] [--timeout S]

For each host count: `sroce-sim run workload` on a leaf-spine of 32 hosts per
leaf (16 below 256 hosts, as docs/results/workload.md), WebSearch at 50 % load
for `duration_us` of arrivals (10 ms by default), seed 1; from its summary
`events_per_s`, `run_wall_s`, `setup_wall_s`, `max_rss_mb` (the process's peak
resident set, from getrusage), `bytes_per_qp` (engine bytes per open QP end at
the end), `engine_bytes_peak`, `qps_open_peak`, and the run's own `ok`.
Then one MoE all-to-all step (4 MiB per source, skew 1, as cc-alltoall) on
`alltoall_hosts` hosts, its `run_wall_s` and `max_rss_mb`.

Each run is a child process with its own peak RSS. A run that fails or is
killed by --timeout is reported with `ok: false` and its error; the script
fails (exit 1) only when no run could be made at all. The wall-clock figures
depend on the machine's load: `loadavg` (1-minute load average at the start
and end) is reported beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def run_workload(sim: str, args: list[str], timeout: float) -> dict:
    cmd = [sim, "run", "workload", "--json", "--seed", "1", "--set", "progress=0"] + args
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timeout after {timeout:.0f} s", "cmd": " ".join(cmd)}
    summary = None
    for line in p.stdout.splitlines():
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(d, dict) and "events_per_s" in d:
            summary = d
    if summary is None:
        return {"ok": False, "error": f"exit {p.returncode}, no summary: {p.stderr[-300:]}",
                "cmd": " ".join(cmd), "wall_s": time.monotonic() - t0}
    summary["exit_code"] = p.returncode
    return summary


KEYS = ["ok", "flows", "completed", "events", "events_per_s", "run_wall_s", "setup_wall_s",
        "max_rss_mb", "bytes_per_qp", "engine_bytes_peak", "qps", "qps_open_peak",
        "p99_slowdown", "error"]


def pick(d: dict) -> dict:
    return {k: d[k] for k in KEYS if k in d}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--duration-us", type=int, default=10000)
    ap.add_argument("--hosts", default="128,1024")
    ap.add_argument("--alltoall-hosts", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=3600)
    a = ap.parse_args()
    sim = os.path.join(a.build, "bin", "sroce-sim")
    out: dict = {"bench": "sim", "traffic": "websearch", "load": 0.5,
                 "duration_us": a.duration_us, "loadavg_start": os.getloadavg()[0]}
    made = 0
    for n in [int(x) for x in a.hosts.split(",") if x]:
        per_leaf = 16 if n < 256 else 32
        r = run_workload(sim, ["--set", "topo=leaf-spine", "--set", f"hosts={n}",
                               "--set", f"hosts_per_leaf={per_leaf}", "--set", "traffic=websearch",
                               "--set", "load=0.5", "--set", f"duration_us={a.duration_us}"],
                         a.timeout)
        made += "events_per_s" in r
        out[f"h{n}"] = pick(r)
    n = a.alltoall_hosts
    if n > 0:
        per_leaf = 16 if n < 256 else 32
        r = run_workload(sim, ["--set", "topo=leaf-spine", "--set", f"hosts={n}",
                               "--set", f"hosts_per_leaf={per_leaf}", "--set", "traffic=alltoall",
                               "--set", "bytes=4194304", "--set", "skew=1"], a.timeout)
        made += "events_per_s" in r
        out[f"alltoall_h{n}"] = pick(r)
    out["loadavg_end"] = os.getloadavg()[0]
    print(json.dumps(out, sort_keys=True))
    return 0 if made > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
