#!/usr/bin/python3
"""`make bench-sim`: the simulator at scale (docs/sim.md, "Scale"); prints one
JSON line.

    tools/bench/bench_sim.py [--build BUILD] [--duration-us US] [--hosts 128,1024]
                             [--step-hosts N] [--max-open-qps N] [--timeout S]

For each host count: `sroce-sim run workload` on a leaf-spine of 32 hosts per
leaf (16 below 256 hosts, as docs/results/workload.md), WebSearch at 50 % load
for `duration_us` of arrivals (10 ms by default), seed 1; from its summary
`events_per_s`, `run_wall_s`, `setup_wall_s`, `max_rss_mb` (the process's peak
resident set, from getrusage), `bytes_per_qp` (engine bytes per open QP end at
the end), `engine_bytes_peak`, `packet_pool_bytes` (the packet slots and bodies
the run held), `qps_open_peak`, and the run's own `ok`.
Then, on `step_hosts` hosts (1024 by default), one MoE all-to-all step (4 MiB
per source split over the others, as cc-alltoall, `--skew` 0 by default; at most
`max_open_qps` open QPs per host, the rest of a host's flows wait for one:
a shifted pairwise exchange) and one ring all-reduce step (each host sends 4
MiB to the next: one of the 2(N-1) steps of a ring all-reduce of N x 4 MiB),
each with `run_wall_s`, `max_rss_mb`, `last_end_us` (the step's simulated
duration) and its flows.

Each run is a child process with its own peak RSS. A run that fails or is
killed by --timeout is reported with `ok: false` and its error; the script
fails (exit 1) only when no run could be made at all. The wall-clock figures
depend on the machine's load: `loadavg` (1-minute load average at the start
and end) is reported beside them, and each run's `cpu_s` (user + system
seconds) and `events_per_cpu_s`, which depend on it much less.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def run_workload(sim: str, args: list[str], timeout: float) -> dict:
    cmd = [sim, "run", "workload", "--json", "--seed", "1", "--set", "progress=0"] + args
    t0 = time.monotonic()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
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
    # CPU seconds of the run (user + system): on a shared machine the
    # comparable figure, where wall time depends on the other load.
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    summary["cpu_s"] = round(cpu, 2)
    summary["events_per_cpu_s"] = round(summary["events"] / cpu) if cpu > 0 else None
    return summary


KEYS = ["ok", "flows", "completed", "events", "events_per_s", "run_wall_s", "setup_wall_s",
        "cpu_s", "events_per_cpu_s",
        "max_rss_mb", "bytes_per_qp", "engine_bytes_peak", "packet_pool_bytes", "qps", "qps_open_peak",
        "flows_waited", "p99_slowdown", "last_end_us", "fct_digest", "error"]


def pick(d: dict) -> dict:
    return {k: d[k] for k in KEYS if k in d}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--duration-us", type=int, default=10000)
    ap.add_argument("--hosts", default="128,1024")
    ap.add_argument("--step-hosts", type=int, default=1024)
    ap.add_argument("--max-open-qps", type=int, default=16)
    # 0: balanced experts. cc-alltoall's skew 1 at 1024 hosts sends 1/7.5 of
    # every source's bytes to one host; without CC its QPs give up
    # (RETRY_EXC_ERR) behind the PFC pauses: docs/sim.md, "Scale".
    ap.add_argument("--skew", type=float, default=0)
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
    n = a.step_hosts
    if n > 0:
        per_leaf = 16 if n < 256 else 32
        # A step runs until its last flow completes (at most 200 ms simulated).
        fabric = ["--set", "topo=leaf-spine", "--set", f"hosts={n}",
                  "--set", f"hosts_per_leaf={per_leaf}", "--set", "drain_us=200000"]
        steps = {
            "ring": ["--set", "traffic=ring", "--set", "bytes=4194304"],
            "alltoall": ["--set", "traffic=alltoall", "--set", "bytes=4194304",
                         "--set", f"skew={a.skew:g}", "--set", f"max_open_qps={a.max_open_qps}"],
        }
        for name, args in steps.items():
            r = run_workload(sim, fabric + args, a.timeout)
            made += "events_per_s" in r
            out[f"{name}_h{n}"] = pick(r)
    out["loadavg_end"] = os.getloadavg()[0]
    print(json.dumps(out, sort_keys=True))
    return 0 if made > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
