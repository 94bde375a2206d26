#!/usr/bin/python3
"""sim.scenario.ltp-eval-smoke: runs `sroce-sim run ltp-eval --json` at CI
size and checks that its summary line is there and sane (every key of issue
17 present, values in range, every case completed); not the aims, which are
docs/cc/ltp.md's. Exit 0 = pass, 1 = fail.

  check_ltp_eval.py SROCE_SIM [extra sroce-sim arguments]
"""
import json
import math
import subprocess
import sys

KEYS = ["util_ltp", "util_hpcc", "util_delay", "util_dcqcn", "util_ltp_noprobe", "util_ltp_nofilter",
        "qdelay_p99_us_ltp", "qdelay_p99_us_hpcc", "qdelay_p99_us_delay", "jain_ltp",
        "converge_ms_ltp", "est_err_ltp", "est_err_ltp_noprobe",
        "ltp_sat_cut", "ltp_start", "ltp_guard_ns"]  # the last three: the knobs the run used


def main():
    cmd = [sys.argv[1], "run", "ltp-eval", "--json", "--quiet"] + sys.argv[2:]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    summary = None
    for line in p.stdout.splitlines():
        try:
            j = json.loads(line)
        except json.JSONDecodeError:
            continue
        if j.get("event") == "summary" and j.get("scenario") == "ltp-eval":
            summary = j
    bad = []
    if p.returncode != 0:
        bad.append(f"sroce-sim exited {p.returncode}: {p.stderr[-2000:]}")
    if summary is None:
        print("\n".join(bad + ["no ltp-eval summary line"]))
        return 1
    for k in KEYS:
        v = summary.get(k)
        if not isinstance(v, (int, float)) or not math.isfinite(v):
            bad.append(f"{k}: expected a finite number, got {v!r}")
    for k in KEYS:
        v = summary.get(k)
        if not isinstance(v, (int, float)):
            continue
        if k.startswith("util_") and not 0.05 < v <= 1.05:
            bad.append(f"{k} = {v}: expected a utilisation in (0.05, 1.05]")
        if k.startswith("qdelay") and v < 0:
            bad.append(f"{k} = {v}: expected >= 0")
        if k.startswith("jain") and not 0 < v <= 1.0000001:
            bad.append(f"{k} = {v}: expected in (0, 1]")
        if k.startswith("ltp_") and v < 0:
            bad.append(f"{k} = {v}: expected >= 0")
        if k.startswith("est_err") and v < 0:
            bad.append(f"{k} = {v}: expected >= 0")
    if summary.get("ok") is not True:
        bad.append("summary ok is not true (a flow did not complete or failed)")
    print(json.dumps({k: summary.get(k) for k in KEYS}))
    if bad:
        print("\n".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
