#!/usr/bin/python3
"""Retransmit timeouts under load (issue 21): fresh daemons on one veth path, lossy mode with 8
lanes, `ib_write_bw -q 32 -s 65536 -D 4` RUNS times, then the sender's `engine.timeouts` and
`engine.retransmits` from `sroce status --json`; one JSON line.

    tools/bench/lossy_timeouts.py --build BUILD [--runs N] [--set KEY=VALUE ...]   (root)"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_e2e as b  # noqa: E402
import perftest_out  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="sroced --set")
    a = ap.parse_args()
    bindir = os.path.join(os.path.abspath(a.build), "bin")
    extra = ["--set", "engine.lossy=true", "--set", "engine.lanes=8"]
    for kv in a.set:
        extra += ["--set", kv]
    res: dict = {"loadavg_1m_start": round(os.getloadavg()[0], 2), "gbps": [], "failed_runs": 0}
    path = b.Path(f"slt{os.getpid() % 10000}")
    work = tempfile.mkdtemp(prefix="sroce-timeouts.")
    daemons = None
    try:
        path.open()
        daemons = b.Daemons(bindir, path, work, "warn", extra, tag="timeouts")
        argv = ["ib_write_bw", "-x", "0", "-F", "--report_gbits", "-m", "4096", "-s", "65536", "-D", "4",
                "-q", "32"]
        for _ in range(a.runs):
            try:
                res["gbps"].append(perftest_out.bw_gbps(b.perftest_pair(bindir, path, daemons.socks, argv, 130)))
            except b.BenchError:
                res["failed_runs"] += 1
        out = subprocess.run([os.path.join(bindir, "sroce"), "status", "--socket", daemons.socks[0], "--json"],
                             capture_output=True, text=True, timeout=30).stdout
        eng = json.loads(out)["engine"]
        res["sender_timeouts"] = eng["timeouts"]
        res["sender_retransmits"] = eng["retransmits"]
    finally:
        b.tear_down(daemons, path, work)
    res["sroced_set"] = " ".join(a.set)
    res["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
