#!/usr/bin/python3
"""fabric.pingmesh: the pingmesh evaluation (tools/pingmesh/pingmesh_eval.py) as a test.

4 hosts, 2 leaves, 4 spines, sroced and a pingmesh agent on every host; a clean
run, 5 % loss on a spine link, a dead link, a host with a slow NIC (tbf) and a
host whose agent is SIGSTOPped in bursts. Passes when each fault's element (and
nothing else) is blamed within 20 s, the busy host as host delay, and nothing
in the clean run; also checks what the agents wrote (probe records with both
ACKs, completion timestamps, Prometheus files). SKIP (77) without root or the
binaries."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EVAL = os.path.join(HERE, "..", "..", "tools", "pingmesh", "pingmesh_eval.py")


def main() -> int:
    fabric = os.environ.get("SROCE_FABRIC", "")
    bindir = os.path.dirname(os.path.abspath(fabric)) if fabric else os.path.join(HERE, "../../build/bin")
    p = subprocess.run(["/usr/bin/python3", EVAL, "--bin", bindir, "--check"], text=True,
                       capture_output=True, timeout=900)
    sys.stderr.write(p.stderr[-4000:])
    print(p.stdout.strip())
    if p.returncode == 77:
        return 77
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        print(f"FAIL: no result line (exit {p.returncode})")
        return 1
    r = json.loads(lines[-1])
    problems = []
    for s in r["scenarios"]:
        if not s["correct"]:
            problems.append(f"{s['scenario']}: blamed {s['blamed']}, expected {s['expected']}, "
                            f"detect_s {s['detect_s']}")
    if r["false_blames_clean"]:
        problems.append(f"{r['false_blames_clean']} false blames in the clean run")
    if r["timestamps"] != ["completion"]:
        problems.append(f"agents used {r['timestamps']} timestamps, expected completion timestamps")
    if r["probes"] < 1000 or r["probes_ok"] < r["probes"] // 2:
        problems.append(f"only {r['probes_ok']} of {r['probes']} probes answered")
    if p.returncode != 0 and not problems:
        problems.append(f"eval exited {p.returncode}")
    for x in problems:
        print(f"FAIL: {x}")
    if not problems:
        print("PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
